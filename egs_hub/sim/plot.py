"""The replay plot: three stacked panels over virtual time, one line per policy.

Panels: queued GPRs; GPUs bound (solid) and used (dashed) against capacity
(with node pools: the standing capacity, and each policy's GPUs present, dotted);
mean wait of the GPRs that started in each time bin. Time counts from the
trace start, in days, hours, minutes or seconds as fits; a dotted line marks
the end of the trace's span. Needs matplotlib (the ``sim`` extra), drawn with
the Agg backend so no display is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .engine import Replay
from .metrics import pool_sizes
from .pools import total_steps
from .trace import SimInputError

POINTS = 2000  # samples per line: enough for a figure, small enough to draw fast
UNITS = ((2 * 86400.0, 86400.0, "days"), (2 * 3600.0, 3600.0, "hours"), (120.0, 60.0, "minutes"), (0.0, 1.0, "seconds"))


def unit(largest: float) -> tuple[float, str]:
    """The unit to show times up to ``largest`` seconds in: (seconds per unit, its name)."""
    return next((size, name) for above, size, name in UNITS if largest >= above)


def write_plot(runs: Sequence[Replay], path: str | Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SimInputError("--plot needs matplotlib: pip install 'egs-hub[sim]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    # Up to the last start: after it the replays only drain, which would squash the rest.
    span = runs[0].trace.span_s if runs else 0.0
    end = max([span, *(s for run in runs for s in run.start if s is not None)]) * 1.05 or 1.0
    grid = np.linspace(0.0, end, POINTS)
    day, day_name = unit(end)
    binned = [_binned_waits(run, end, np) for run in runs]
    hour, hour_name = unit(max((float(np.nanmax(w)) for _, w in binned if np.isfinite(w).any()), default=0.0))
    fig, (queue_ax, gpus_ax, wait_ax) = plt.subplots(3, 1, sharex=True, figsize=(11, 9), constrained_layout=True)
    for n, run in enumerate(runs):
        color = f"C{n}"
        samples = np.array(run.samples, dtype=float).reshape(-1, 4)
        at = np.clip(np.searchsorted(samples[:, 0], grid, side="right") - 1, 0, None)
        value = samples[at] if len(samples) else np.zeros((len(grid), 4))
        days = grid / day
        queue_ax.step(days, value[:, 1], where="post", color=color, label=run.policy)
        gpus_ax.step(days, value[:, 2], where="post", color=color, label=f"{run.policy} bound")
        gpus_ax.step(
            days, value[:, 3], where="post", color=color, linestyle="--", alpha=0.7, label=f"{run.policy} used"
        )
        if run.inventory.pools:
            gpus = {p.name: p.shape.gpus_per_node for p in run.inventory.pools}
            present = np.array(total_steps(pool_sizes(run), gpus), dtype=float).reshape(-1, 2)
            at = np.clip(np.searchsorted(present[:, 0], grid, side="right") - 1, 0, None)
            gpus_ax.step(
                days,
                run.inventory.fixed_capacity + present[at, 1],
                where="post",
                color=color,
                linestyle=":",
                label=f"{run.policy} GPUs present",
            )
        centers, waits = binned[n]
        wait_ax.plot(centers / day, waits / hour, color=color, marker=".", markersize=3, label=run.policy)
    capacity = runs[0].inventory.capacity if runs else 0
    standing = "standing capacity" if runs and runs[0].inventory.pools else "capacity"
    gpus_ax.axhline(capacity, color="black", linewidth=1, label=f"{standing} ({capacity})")
    for ax in (queue_ax, gpus_ax, wait_ax):
        ax.axvline(span / day, color="grey", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
    queue_ax.set_ylabel("queued GPRs")
    gpus_ax.set_ylabel("GPUs")
    wait_ax.set_ylabel(f"mean wait ({hour_name})")
    wait_ax.set_xlabel(f"{day_name} from trace start (dotted: end of span), up to the last start")
    wait_ax.set_xlim(0, end / day)
    queue_ax.legend(loc="best")
    gpus_ax.legend(loc="lower right", fontsize="small", ncol=2)
    title = runs[0].trace.name if runs else ""
    if runs:
        title += f" on {runs[0].inventory.describe()}"
    queue_ax.set_title(title)
    try:
        fig.savefig(path, dpi=100)
    except OSError as e:
        raise SimInputError(f"{path}: cannot write the plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)


def _binned_waits(run: Replay, end: float, np):
    """Mean wait of GPRs started in each of ``POINTS // 10`` bins of [0, end]; empty bins are gaps."""
    started = [(s, s - run.submit[i]) for i, s in enumerate(run.start) if s is not None]
    bins = max(1, POINTS // 10)
    edges = np.linspace(0.0, end, bins + 1)
    if not started:
        return (edges[:-1] + edges[1:]) / 2, np.full(bins, np.nan)
    starts, waits = np.array(started, dtype=float).T
    which = np.clip(np.searchsorted(edges, starts, side="right") - 1, 0, bins - 1)
    total = np.bincount(which, weights=waits, minlength=bins)
    count = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return (edges[:-1] + edges[1:]) / 2, mean
