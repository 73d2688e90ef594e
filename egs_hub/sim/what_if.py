"""A what-if capacity plan as the admin page runs it (service/capacity.py): the service's history
(sim/history.py) replayed through the planner on its nodes as they are and changed, with progress.

Run as ``python -m egs_hub.sim.what_if``: it reads the request as JSON on stdin (``db_url``,
``since_s``, ``add_nodes`` and ``remove_nodes`` as ``[shape, count]`` pairs, ``prices`` as ``[shape,
price per GPU-hour]`` pairs over the service's) and writes lines on
stdout: ``progress F`` (0 to 1) as the replays go, then ``result {...}`` (``plan``'s answer) or
``error MESSAGE`` (bad input, exit 2).

The answer: the GPRs replayed; ``recorded``, ``current`` and ``changed`` (None without a change), each
with its waits (JSON keys as ``simulate --json``), per slice, the replays with what their nodes cost
over the span (None where a shape has no price), and GPUs bound over time as ``POINTS``
``[seconds from the start, share of the GPUs]`` (what really happened is over the GPUs there now).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .cluster import Inventory
from .engine import replay
from .history import History, capacity_cost, changed, load_history, priced
from .metrics import summarize
from .trace import SimInputError

POINTS = 100
WAITS = ("gprs", "wait_mean_s", "wait_p50_s", "wait_p95_s", "wait_p99_s")


def bound_over_time(steps: list[tuple[float, int]], span: float, capacity: int) -> list[list[float]]:
    """``steps`` ((time, GPUs bound from then on), in time order) at ``POINTS`` even times over
    ``[0, span]``, as shares of ``capacity``."""
    out, k, bound = [], 0, 0
    for i in range(POINTS + 1):
        t = span * i / POINTS
        while k < len(steps) and steps[k][0] <= t:
            bound = steps[k][1]
            k += 1
        out.append([round(t, 3), round(bound / capacity, 6) if capacity else 0.0])
    return out


def held_steps(held: tuple[tuple[float, float, int], ...]) -> list[tuple[float, int]]:
    """(time, GPUs bound from then on) of windows held over ``(start, end, gpus)``."""
    changes = sorted([(s, g) for s, _, g in held] + [(e, -g) for _, e, g in held])
    steps, bound = [], 0
    for t, delta in changes:
        bound += delta
        steps.append((t, bound))
    return steps


def _case(
    history: History, inventory: Inventory, prices: list[tuple[str, float]], on_started: Callable[[int], None]
) -> dict:
    run = replay(history.trace, inventory, "planner", on_started=on_started)
    figures = summarize(run)
    steps = [(t, bound) for t, _, bound, _ in run.samples]
    return {
        "nodes": inventory.describe(),
        "capacity_gpus": inventory.capacity,
        "capacity_cost": capacity_cost(inventory, priced(history.prices, inventory, prices), history.trace.span_s),
        **{k: figures[k] for k in (*WAITS, "util_bound", "estimate_kept_share")},
        "slices": figures["slices"],
        "bound": bound_over_time(steps, history.trace.span_s, inventory.capacity),
    }


def plan(
    db_url: str,
    since: timedelta,
    add: list[tuple[str, int]],
    remove: list[tuple[str, int]],
    prices: list[tuple[str, float]],
    progress: Callable[[float], None],
    now: datetime,
) -> dict:
    """The what-if's answer (module doc); ``progress`` is told the share of the replays done."""
    history = load_history(db_url, since, now)
    cases = [("current", history.inventory)]
    if add or remove:
        cases.append(("changed", changed(history.inventory, add, remove)))
    total = len(history.trace.jobs) * len(cases)
    answer = {
        "gprs": len(history.trace.jobs),
        "recorded": {
            **history.recorded,
            "slices": history.slices,
            "bound": bound_over_time(held_steps(history.held), history.trace.span_s, history.inventory.capacity),
        },
        "changed": None,
    }
    for k, (name, inventory) in enumerate(cases):
        done = k * len(history.trace.jobs)
        answer[name] = _case(history, inventory, prices, lambda started, done=done: progress((done + started) / total))
    return answer


def _pairs(asked: dict, key: str) -> list[tuple[str, int]]:
    return [(str(shape), int(count)) for shape, count in asked.get(key, [])]


def main() -> int:
    shown = [-1.0]

    def progress(share: float) -> None:
        if share - shown[0] >= 0.01:  # a line per percent at most
            shown[0] = share
            print(f"progress {share:.4f}", flush=True)

    try:
        asked = json.load(sys.stdin)
        add, remove = _pairs(asked, "add_nodes"), _pairs(asked, "remove_nodes")
        prices = [(str(shape), float(price)) for shape, price in asked.get("prices", [])]
        since = timedelta(seconds=asked["since_s"])
        answer = plan(asked["db_url"], since, add, remove, prices, progress, datetime.now(UTC))
    except SimInputError as e:
        print(f"error {e}", flush=True)
        return 2
    print("result " + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
