"""The replay report: policies side by side as a text table, and as JSON.

Vocabulary: *figures* are one policy's summary (``metrics.summarize``); a report
maps each policy's name to its figures, which is also the JSON file's shape. An
inventory with node pools adds ``POOL_ROWS`` after the waits (what the pools cost
for them) and ``PRESENT_ROWS`` after the utilization (over the GPUs there).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path

from .trace import SimInputError


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def pass_time(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.2f} ms"


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def broken(figures: Mapping) -> str:
    """How many estimates were broken, and by how much."""
    if not figures["estimate_broken"]:
        return "0"
    by = " / ".join(duration(figures[f"estimate_broken_by_{p}_s"]) for p in ("p50", "p95", "max"))
    return f"{figures['estimate_broken']}, by {by}"


def causes(figures: Mapping) -> str:
    """How many broken estimates each cause broke."""
    return ", ".join(f"{cause} {count}" for cause, count in figures["estimate_broken_causes"].items()) or "-"


# Row label -> how to show it from one policy's figures.
ROWS: list[tuple[str, Callable[[Mapping], str]]] = [
    ("GPRs started / submitted", lambda f: f"{f['started']} / {f['gprs']}"),
    ("offered load", lambda f: number(f["offered_load"])),
    ("wait mean", lambda f: duration(f["wait_mean_s"])),
    ("wait p50", lambda f: duration(f["wait_p50_s"])),
    ("wait p95", lambda f: duration(f["wait_p95_s"])),
    ("wait p99", lambda f: duration(f["wait_p99_s"])),
    ("started by estimate +60 s", lambda f: share(f["estimate_kept_share"])),
    ("estimates broken, by p50 / p95 / max", broken),
    ("estimates broken, by cause", causes),
    ("estimate error p50", lambda f: duration(f["estimate_error_p50_s"])),
    ("estimate error p95", lambda f: duration(f["estimate_error_p95_s"])),
    ("utilization bound", lambda f: share(f["util_bound"])),
    ("utilization used", lambda f: share(f["util_used"])),
    ("Jain's index (slices)", lambda f: number(f["jain"])),
    ("plan passes", lambda f: str(f["plan_passes"])),
    ("plan pass mean", lambda f: pass_time(f["plan_pass_mean_s"])),
    ("plan pass p99", lambda f: pass_time(f["plan_pass_p99_s"])),
    ("plan total", lambda f: duration(f["plan_total_s"])),
    ("replay wall time", lambda f: duration(f["replay_wall_s"])),
]


def hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


# Rows shown only when the inventory has node pools, after the row named first.
POOL_ROWS: list[tuple[str, Callable[[Mapping], str]]] = [
    ("pool node-hours", lambda f: hours(f["pool_node_hours"])),
    ("pool GPU-hours", lambda f: hours(f["pool_gpu_hours"])),
    ("pool peak nodes", lambda f: str(f["pool_peak_nodes"])),
    ("pool scale-ups / nodes added", lambda f: f"{f['pool_scale_ups']} / {f['pool_nodes_added']}"),
    ("pool give-backs", lambda f: str(f["pool_give_backs"])),
]
PRESENT_ROWS: list[tuple[str, Callable[[Mapping], str]]] = [
    ("utilization bound, GPUs present", lambda f: share(f["util_bound_present"])),
    ("utilization used, GPUs present", lambda f: share(f["util_used_present"])),
]


# Rows shown only when the replay was made again with the GPUs whole (runner.py), after utilization.
WITHOUT_MIG_ROWS: list[tuple[str, Callable[[Mapping], str]]] = [
    ("without MIG: wait mean", lambda f: duration(f["without_mig"]["wait_mean_s"])),
    ("without MIG: wait p95", lambda f: duration(f["without_mig"]["wait_p95_s"])),
    ("without MIG: utilization bound", lambda f: share(f["without_mig"]["util_bound"])),
    ("without MIG: utilization used", lambda f: share(f["without_mig"]["util_used"])),
]


def rows_for(report: Mapping[str, Mapping]) -> list[tuple[str, Callable[[Mapping], str]]]:
    """ROWS, with POOL_ROWS after the waits and PRESENT_ROWS after the utilization when there are pools,
    and WITHOUT_MIG_ROWS after the utilization when the replay was made again with the GPUs whole."""
    pools = any(f.get("pools") for f in report.values())
    mig = any(f.get("without_mig") for f in report.values())
    rows = []
    for label, show in ROWS:
        rows.append((f"{label}, standing GPUs" if pools and label.startswith("utilization") else label, show))
        if pools and label == "wait p99":
            rows += POOL_ROWS
        elif label == "utilization used":
            rows += (PRESENT_ROWS if pools else []) + (WITHOUT_MIG_ROWS if mig else [])
    return rows


def table(report: Mapping[str, Mapping]) -> str:
    """Policies as columns: the summary rows, then mean / p95 wait per slice."""
    policies = list(report)
    rows = rows_for(report)
    lines = _grid(["", *policies], [[label, *(show(report[p]) for p in policies)] for label, show in rows])
    slices = next(iter(report.values()))["slices"] if report else {}
    if slices:
        rows = []
        for name in slices:
            cells = []
            for p in policies:
                waits = report[p]["slices"][name]
                cells.append(f"{duration(waits['wait_mean_s'])} / {duration(waits['wait_p95_s'])}")
            rows.append([f"{name} ({slices[name]['gprs']})", *cells])
        lines += ["", "wait mean / p95 per slice (GPRs started)"]
        lines += _grid(["slice", *policies], rows)
    return "\n".join(lines)


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(cell.rjust(w) for cell, w in zip(cells[1:], widths[1:], strict=True))])

    return [line(header), *(line(r) for r in rows)]


def write_json(report: Mapping[str, Mapping], path: str | Path) -> None:
    """One object per policy; numbers that are not finite become null."""
    try:
        Path(path).write_text(json.dumps(_finite(report), indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise SimInputError(f"{path}: cannot write the JSON report: {e.strerror or e}") from None


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
