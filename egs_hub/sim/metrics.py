"""What a replay measured, as plain numbers (the report's JSON keys).

Vocabulary: a GPR's *wait* is its start minus its submit; its *estimate* is the
start the first plan after its submit gave it; the estimate is *kept* when the
GPR started no later than the estimate plus ``KEPT_SLACK_S``, else *broken* by its start minus
the estimate; its *cause* is the one that moved its estimate later by the most seconds while it
queued (core/planner.MOVED; ``unnamed`` when no plan named one: EASY and FIFO hold no promises,
so they name none). *Utilization*
counts GPU-seconds within the trace's span [0, span): *bound* GPUs are held by a
GPR's window, *used* ones compute (a 12-GPU job holds 16); both are divided by
capacity x span, as the *offered load* is. With node pools (sim/pools.py) that
capacity is the standing one (the node groups and the pools' ``min`` nodes: comparable
with a run without the pools, and it may pass 100%), and ``util_*_present`` divide by
the GPU-seconds of the nodes actually there within the span instead. A pool's
*node-hours* run from each node's join (or the start, for its ``min`` nodes) to its
give-back or the replay's last pass: what the pool is paid for. *Fairness* is
Jain's index over the slices of (GPU-seconds received / GPU-seconds asked)
within the span, where a job asks for its real run starting at submit and
receives its real run from its start.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from ..core.planner import KEPT_SLACK
from ..core.stats import percentile
from .cluster import offered_load
from .engine import POLICIES, Replay
from .pools import ASK, GIVE_BACK, JOIN, sizes_over_time, step_integral, total_steps
from .trace import asked_gpus

KEPT_SLACK_S = KEPT_SLACK.total_seconds()
UNNAMED = "unnamed"


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


def is_broken(estimate: float | None, start: float, slack: float = KEPT_SLACK_S) -> bool:
    """A started GPR broke its estimate: it started later than the estimate + ``slack`` (one with
    no estimate broke none)."""
    return estimate is not None and start > estimate + slack


def broken_by(estimates: Sequence[float | None], starts: Sequence[float], slack: float = KEPT_SLACK_S) -> list[float]:
    """How late each broken estimate's GPR started: its start minus its estimate."""
    return [s - e for e, s in zip(estimates, starts, strict=True) if is_broken(e, s, slack)]


def broken_causes(run: Replay, started: Sequence[int]) -> dict[str, int]:
    """How many of the broken estimates each cause broke, the most first."""
    counts: dict[str, int] = defaultdict(int)
    for i in started:
        if is_broken(run.estimate[i], run.start[i]):
            by_cause = run.moved.get(i)
            counts[max(by_cause, key=by_cause.__getitem__) if by_cause else UNNAMED] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


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
    broken = broken_by(estimates, starts)
    bound = sum(run.bound_gpus[i] * overlap(run.start[i], run.bound_end[i], 0.0, span) for i in started)
    used = sum(run.used_gpus[i] * overlap(run.start[i], run.used_end[i], 0.0, span) for i in started)
    by_slice: dict[str, list[float]] = defaultdict(list)
    by_project: dict[str, list[float]] = defaultdict(list)
    for i, wait in zip(started, waits, strict=True):
        by_slice[trace.jobs[i].slice].append(wait)
        by_project[inventory.project_of(trace.jobs[i].slice)].append(wait)
    passes = run.pass_s
    sizes = pool_sizes(run)
    pools = pool_figures(run, sizes)
    present = inventory.fixed_capacity * span + sum(p["gpu_seconds_in_span"] for p in pools.values())
    figures = {
        "policy": run.policy,
        "backfill": POLICIES[run.policy],
        **waits_summary(waits),
        "gprs": len(trace.jobs),
        "started": len(started),
        "estimate_kept_share": kept_share(estimates, starts),
        "estimate_error_p50_s": percentile(errors, 50),
        "estimate_error_p95_s": percentile(errors, 95),
        "estimate_broken": len(broken),
        "estimate_broken_by_p50_s": percentile(broken, 50),
        "estimate_broken_by_p95_s": percentile(broken, 95),
        "estimate_broken_by_max_s": max(broken, default=None),
        "estimate_broken_causes": broken_causes(run, started),
        "util_bound": bound / (capacity * span),
        "util_used": used / (capacity * span),
        "util_bound_present": bound / present,
        "util_used_present": used / present,
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
        "capacity_max_gpus": inventory.max_capacity,
        "pool_node_hours": sum((p["node_hours"] for p in pools.values()), 0.0),
        "pool_gpu_hours": sum((p["gpu_hours"] for p in pools.values()), 0.0),
        "pool_scale_ups": sum(p["scale_ups"] for p in pools.values()),
        "pool_nodes_added": sum(p["nodes_added"] for p in pools.values()),
        "pool_give_backs": sum(p["give_backs"] for p in pools.values()),
        "pool_peak_nodes": max((n for _, n in total_steps(sizes, dict.fromkeys(sizes, 1))), default=0),
        "pools": {name: {k: v for k, v in p.items() if k != "gpu_seconds_in_span"} for name, p in pools.items()},
        "slices": {name: waits_summary(by_slice.get(name, [])) for name in trace.slices},
        "projects": {
            name: waits_summary(by_project.get(name, []))
            for name in sorted({inventory.project_of(s) for s in trace.slices})
        },
    }
    return figures


def pool_figures(run: Replay, sizes: dict[str, list[tuple[float, int]]]) -> dict[str, dict]:
    """Per pool: node- and GPU-hours, asks (``scale_ups``), nodes that joined after an ask
    (``nodes_added``), ``give_backs``, its ``peak_nodes``, and its GPU-seconds within the span;
    ``sizes``: ``pool_sizes(run)``."""
    figures = {}
    for pool in run.inventory.pools:
        steps, gpus = sizes[pool.name], pool.shape.gpus_per_node
        node_s = step_integral(steps, 0.0, run.end_s)
        events = [e for e in run.pool_events if e.pool == pool.name]
        figures[pool.name] = {
            "min": pool.min_nodes,
            "max": pool.max_nodes,
            "node_hours": node_s / 3600,
            "gpu_hours": node_s * gpus / 3600,
            "scale_ups": sum(1 for e in events if e.kind == ASK),
            "nodes_added": sum(1 for e in events if e.kind == JOIN),
            "give_backs": sum(1 for e in events if e.kind == GIVE_BACK),
            "peak_nodes": max(n for _, n in steps),
            "gpu_seconds_in_span": step_integral(steps, 0.0, run.trace.span_s) * gpus,
        }
    return figures


def pool_sizes(run: Replay) -> dict[str, list[tuple[float, int]]]:
    """Each pool's nodes over time, every pool's (one that never had a node: none throughout)."""
    return {p.name: [(0.0, 0)] for p in run.inventory.pools} | sizes_over_time(run.pool_events)


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
