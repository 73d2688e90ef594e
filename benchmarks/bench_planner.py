"""Planner at scale: full plan passes, wait-time queries, queue operations, peak memory.

The scenario (issue 3): 2,000 nodes x 8 GPUs in 4 shapes and 2 clusters; 1,500
provisioned GPRs; 10,000 queued GPRs of mixed sizes, priorities and durations.
Targets: plan pass p50 and p99 <= 1 s; wait-time query over all shapes p99 <=
20 ms; 100,000 queue operations <= 1 s; peak RSS <= 500 MB.

A pass made ``LATE`` (0.2 s) after the last with nothing started meanwhile, as after
a late reconcile pass or an outage, is timed too (``plan_late_s``), and
``late_moved_later`` counts the estimates it moved later than that (each promise
should move by no more than the lateness).

Wait-time queries ask for random slices (random fair shares) and priorities, so
most sort ahead of some of their band; the first such query on a band of a plan
also makes the band's rewind (planner.Views), which ``estimate_max_ms`` shows.

``reference_loop_s`` is the machine's speed at the time: the best of three runs
of a fixed 10-million-step Python loop. A virtual machine's speed moves from day
to day (twice as slow, seen here); compare figures taken at different times
through it.

    python benchmarks/bench_planner.py --json planner.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import resource
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from egs_hub.core.model import GPRSpec, Node, Shape, SlicePolicy
from egs_hub.core.planner import plan, wait_times
from egs_hub.core.queue import PriorityQueue, band
from egs_hub.core.snapshot import Booking, Request, Snapshot

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
SHAPES = [Shape("H100", 80, 8), Shape("A100", 80, 8), Shape("B200", 192, 8), Shape("L40S", 48, 8)]
CLUSTERS = ["east", "west"]
SIZES = [1, 1, 1, 2, 2, 4, 4, 8, 8, 16]  # GPUs; 16 spans two nodes
HOURS = [0.5, 1, 1, 2, 2, 4, 8, 12, 24]
PRIORITIES = [50, 101, 101, 101, 150, 250]
LATE = timedelta(seconds=0.2)


def scenario(seed: int, nodes: int, bound: int, queued: int, slices: int) -> Snapshot:
    rng = random.Random(seed)
    inventory = []
    for i in range(nodes):
        shape = SHAPES[i % len(SHAPES)]
        cluster = CLUSTERS[(i // len(SHAPES)) % len(CLUSTERS)]
        name = f"n{i:04d}"
        inventory.append(Node(name, cluster, shape, tuple(f"{name}-g{g}" for g in range(8))))
    names = [f"s{i:03d}" for i in range(slices)]
    policies = {n: SlicePolicy(max_active_gprs=40, share=rng.choice([1, 2, 4])) for n in names}
    bookings, free = [], {n.name: list(n.gpus) for n in inventory}
    order = list(inventory)
    rng.shuffle(order)
    k = 0
    for gpr_id in range(1, bound + 1):
        size = rng.choice([1, 2, 4, 8])
        while len(free[order[k % len(order)].name]) < size:
            k += 1
        node = order[k % len(order)]
        gpus, free[node.name] = tuple(free[node.name][:size]), free[node.name][size:]
        start = NOW - timedelta(hours=rng.uniform(0, 4))
        end = NOW + timedelta(minutes=rng.uniform(1, 24 * 60))
        bookings.append(Booking(gpr_id, names[gpr_id % slices], gpus, start, end, priority=rng.choice(PRIORITIES)))
    queue = []
    for gpr_id in range(bound + 1, bound + queued + 1):
        spec = GPRSpec(
            slice=rng.choice(names),
            duration=timedelta(hours=rng.choice(HOURS)),
            gpus=rng.choice(SIZES),
            priority=rng.choice(PRIORITIES),
            shape=rng.choice([None, "H100", "A100", "B200", "L40S", "H100", "A100"]),
            cluster=rng.choice([None, None, "east", "west"]),
        )
        queue.append(Request(gpr_id, spec, NOW - timedelta(seconds=rng.uniform(0, 86400))))
    usage = {n: rng.uniform(0, 1e8) for n in names}
    return Snapshot(
        nodes=tuple(inventory), bookings=tuple(bookings), queue=tuple(queue), policies=policies, usage=usage
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_plan(snapshot: Snapshot, passes: int) -> tuple[list[float], object]:
    """The first pass plans from nothing; later ones keep the previous pass's promises."""
    times, current = [], None
    for _ in range(passes):
        if current is not None:
            snapshot = dataclasses.replace(snapshot, previous=current.estimates)
        started = time.perf_counter()
        current = plan(snapshot, NOW)
        times.append(time.perf_counter() - started)
        print(f"  plan pass: {times[-1]:.3f} s", file=sys.stderr)
    return times, current


def bench_late_pass(snapshot: Snapshot, current, late: timedelta) -> tuple[float, int]:
    """A pass ``late`` after the last, nothing having started meanwhile (the service was away,
    or a pass came late): its time, and how many estimates moved later than ``late``."""
    started = time.perf_counter()
    after = plan(dataclasses.replace(snapshot, previous=current.estimates), NOW + late)
    seconds = time.perf_counter() - started
    moved = sum(
        1
        for gpr_id, estimate in after.estimates.items()
        if estimate.start is not None
        and current.estimates[gpr_id].start is not None
        and estimate.start > current.estimates[gpr_id].start + late
    )
    return seconds, moved


def bench_wait_times(snapshot: Snapshot, current, queries: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    times, ahead = [], 0
    for _ in range(queries):
        spec = GPRSpec(
            slice=rng.choice(list(snapshot.policies)),
            duration=timedelta(hours=rng.choice(HOURS)),
            gpus=rng.choice(SIZES),
            priority=rng.choice(PRIORITIES),
        )
        started = time.perf_counter()
        wait_times(snapshot, spec, NOW, current=current)
        times.append(time.perf_counter() - started)
        ahead += current.views.ahead(spec, NOW) < len(current.views.placed[band(spec.priority)])
    print(f"  wait-time queries sorting ahead of some of their band: {ahead}/{queries}", file=sys.stderr)
    return times


def bench_queue(operations: int, seed: int) -> float:
    """``operations`` queue operations, a third each of insert, priority change and remove."""
    rng = random.Random(seed)
    third = operations // 3
    requests = [
        Request(i, GPRSpec(slice=f"s{i % 50}", duration=timedelta(hours=1), gpus=1, priority=rng.randint(1, 300)), NOW)
        for i in range(third)
    ]
    factors = {f"s{i}": (rng.uniform(0.01, 1), rng.uniform(0.01, 1)) for i in range(50)}  # (project's, own)
    priorities = [rng.randint(1, 300) for _ in requests]
    queue = PriorityQueue(factors=factors)
    started = time.perf_counter()
    for request in requests:
        queue.push(request)
    for request, priority in zip(requests, priorities, strict=True):
        queue.change_priority(request.gpr_id, priority)
    for request in requests:
        queue.position(request.gpr_id)
        queue.remove(request.gpr_id)
    return time.perf_counter() - started


def bench_reference(steps: int = 10_000_000) -> float:
    """Best of three runs of a fixed pure-Python loop, in seconds."""
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(steps):
            total += i
        runs.append(time.perf_counter() - started)
    return min(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--bound", type=int, default=1500)
    parser.add_argument("--queued", type=int, default=10000)
    parser.add_argument("--passes", type=int, default=11)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    snapshot = scenario(args.seed, args.nodes, args.bound, args.queued, slices=100)
    pass_times, current = bench_plan(snapshot, args.passes)
    late_seconds, moved_later = bench_late_pass(snapshot, current, LATE)
    query_times = bench_wait_times(snapshot, current, args.queries, args.seed)
    queue_seconds = bench_queue(100_000, args.seed)
    admitted = len(current.admits)
    placed = sum(e.start is not None for e in current.estimates.values())
    figures = {
        "nodes": args.nodes,
        "gpus": args.nodes * 8,
        "provisioned": args.bound,
        "queued": args.queued,
        "admitted_first_pass": admitted,
        "estimated": placed,
        "plan_first_s": round(pass_times[0], 4),
        "plan_p50_s": round(statistics.median(pass_times), 4),
        "plan_p99_s": round(percentile(pass_times, 0.99), 4),
        "plan_late_s": round(late_seconds, 4),
        "late_moved_later": moved_later,
        "estimate_p50_ms": round(1000 * statistics.median(query_times), 3),
        "estimate_p99_ms": round(1000 * percentile(query_times, 0.99), 3),
        "estimate_max_ms": round(1000 * max(query_times), 3),
        "queue_ops": 100_000,
        "queue_ops_s": round(queue_seconds, 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "reference_loop_s": round(bench_reference(), 3),
    }
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
