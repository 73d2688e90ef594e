"""What a replay measured, as plain numbers (the report's JSON keys).

Vocabulary: a GPR's *wait* is its start minus its submit; its *estimate* is the
start the first plan after its submit gave it; the estimate is *kept* when the
GPR started no later than the estimate plus ``KEPT_SLACK_S``. *Utilization*
counts GPU-seconds within the trace's span [0, span): *bound* GPUs are held by a
GPR's window, *used* ones compute (a 12-GPU job holds 16); both are divided by
capacity x span, as the *offered load* is. *Fairness* is Jain's index over the
slices of (GPU-seconds received / GPU-seconds asked) within the span, where a
job asks for its real run starting at submit and receives its real run from
its start.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .cluster import offered_load
from .engine import POLICIES, Replay
from .trace import asked_gpus

KEPT_SLACK_S = 60.0


def percentile(values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (0..100), interpolating linearly between ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def jain(values: Iterable[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n at worst.
    None when empty; 1.0 when every value is 0 (all equally served)."""
    values = list(values)
    if not values:
        return None
    squares = sum(x * x for x in values)
    if squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def kept_share(estimates: Sequence[float | None], starts: Sequence[float], slack: float = KEPT_SLACK_S) -> float | None:
    """Share of started GPRs that started no later than their estimate + ``slack``; a GPR
    that had no estimate (not servable at submit) did not keep one. None when none started."""
    if not starts:
        return None
    kept = sum(1 for e, s in zip(estimates, starts, strict=True) if e is not None and s <= e + slack)
    return kept / len(starts)


def overlap(start: float, end: float, low: float, high: float) -> float:
    return max(0.0, min(end, high) - max(start, low))


def waits_summary(waits: Sequence[float]) -> dict:
    return {
        "gprs": len(waits),
        "wait_mean_s": mean(waits),
        "wait_p50_s": percentile(waits, 50),
        "wait_p95_s": percentile(waits, 95),
        "wait_p99_s": percentile(waits, 99),
    }


def summarize(run: Replay) -> dict:
    """The report's figures for one replay (JSON keys of ``egs-hub simulate --json``)."""
    trace, inventory = run.trace, run.inventory
    span, capacity = trace.span_s, inventory.capacity
    started = [i for i, s in enumerate(run.start) if s is not None]
    waits = [run.start[i] - run.submit[i] for i in started]
    estimates = [run.estimate[i] for i in started]
    starts = [run.start[i] for i in started]
    errors = [abs(s - e) for e, s in zip(estimates, starts, strict=True) if e is not None]
    bound = sum(run.bound_gpus[i] * overlap(run.start[i], run.bound_end[i], 0.0, span) for i in started)
    used = sum(run.used_gpus[i] * overlap(run.start[i], run.used_end[i], 0.0, span) for i in started)
    by_slice: dict[str, list[float]] = defaultdict(list)
    by_project: dict[str, list[float]] = defaultdict(list)
    for i, wait in zip(started, waits, strict=True):
        by_slice[trace.jobs[i].slice].append(wait)
        by_project[inventory.project_of(trace.jobs[i].slice)].append(wait)
    passes = run.pass_s
    figures = {
        "policy": run.policy,
        "backfill": POLICIES[run.policy],
        **waits_summary(waits),
        "gprs": len(trace.jobs),
        "started": len(started),
        "estimate_kept_share": kept_share(estimates, starts),
        "estimate_error_p50_s": percentile(errors, 50),
        "estimate_error_p95_s": percentile(errors, 95),
        "util_bound": bound / (capacity * span),
        "util_used": used / (capacity * span),
        "offered_load": offered_load(trace, inventory),
        "jain": jain(_received_over_asked(run).values()),
        "plan_passes": len(passes),
        "plan_pass_mean_s": mean(passes),
        "plan_pass_p99_s": percentile(passes, 99),
        "plan_total_s": sum(passes),
        "replay_wall_s": run.wall_s,
        "makespan_s": max((run.bound_end[i] for i in started), default=0.0),
        "span_s": span,
        "capacity_gpus": capacity,
        "nodes": inventory.node_count,
        "slices": {name: waits_summary(by_slice.get(name, [])) for name in trace.slices},
        "projects": {
            name: waits_summary(by_project.get(name, []))
            for name in sorted({inventory.project_of(s) for s in trace.slices})
        },
    }
    return figures


def _received_over_asked(run: Replay) -> dict[str, float]:
    """Per slice with work asked within the span: GPU-seconds received / asked there."""
    span = run.trace.span_s
    asked: dict[str, float] = defaultdict(float)
    received: dict[str, float] = defaultdict(float)
    gpn = run.inventory.gpus_per_node
    for i, job in enumerate(run.trace.jobs):
        asked[job.slice] += asked_gpus(job, gpn) * overlap(run.submit[i], run.submit[i] + job.actual_s, 0.0, span)
        if run.start[i] is not None:
            received[job.slice] += run.used_gpus[i] * overlap(run.start[i], run.used_end[i], 0.0, span)
    return {name: received[name] / a for name, a in asked.items() if a > 0}
