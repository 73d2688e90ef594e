"""Replay a trace through the planner in virtual time.

Vocabulary: a *policy* is how the planner fills the inventory, named for the
report (``planner``: our conservative backfill, ``fifo``: strict order,
``easy``: EASY backfill); a *pass* is one call of ``plan()`` with a full
snapshot; an *event* is a submit, an early release (a job's real end before
its window ends), a window end, or with node pools (sim/pools.py) a node
joining, an idle node's time to be given back or a planned window's time to
ask a pool for its node. Virtual time counts whole microseconds from
``EPOCH`` so that times compare exactly; ``now`` for the planner is
``EPOCH + t``.

One loop, as the control plane runs it (DESIGN.md "Data flows one way"): at
each distinct event time (1) apply submits and early releases to the
simulated store and let asked pool nodes join, (2) take a snapshot (its nodes:
the node groups', each pool's joined and joining nodes) and plan, (3) apply the
plan's ends and admits, ask the pools for the nodes the plan needs and give
idle ones back. A pass also runs when a queued GPR's estimated start arrives,
since a start can be due without any other event. Nothing here decides anything: the
planner does, as it does in the service.
"""

from __future__ import annotations

import gc
import heapq
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..core.fairshare import HALF_LIFE, accrue, decay
from ..core.model import FAIR_SHARE_FIRST, GPRSpec, Order, Shape, SlicePolicy
from ..core.planner import plan
from ..core.snapshot import Booking, Estimate, Request, Snapshot
from .cluster import Inventory
from .pools import Fleet, PoolEvent
from .progress import progress_bar
from .trace import Trace

EPOCH = datetime(2017, 10, 1, tzinfo=UTC)
US = timedelta(microseconds=1)
# Report name -> the planner's ``backfill`` mode.
POLICIES = {"planner": "conservative", "fifo": "none", "easy": "easy"}
_RELEASE, _WINDOW_END = 0, 1
POSTFIX_EVERY = 100  # passes between updates of the progress bar's queue length and pass time


@dataclass
class Replay:
    """What happened to each GPR (index i is GPR id i + 1), in seconds from the trace start.

    ``estimate``: the start the first pass after submit estimated (None: not servable);
    ``start``/``bound_end``/``used_end``: None for a GPR that never started.
    ``placed``: the nodes each GPR ran on (() for one that never started).
    ``samples``: after every pass, (time, queued GPRs, GPUs bound, GPUs used). GPUs are
    GPU-equivalents: a MIG instance counts as its part of a GPU (core/sharing.py).
    ``pool_events``: what the node pools did (sim/pools.py); ``end_s``: the last pass's time.
    ``moved``: per GPR moved later while it queued, the seconds each cause moved its estimate
    (core/planner.MOVED, from each pass's ``Plan.moved``; only the planner names causes).
    """

    policy: str
    trace: Trace
    inventory: Inventory
    submit: list[float]
    estimate: list[float | None]
    start: list[float | None]
    bound_end: list[float | None]
    used_end: list[float | None]
    bound_gpus: list[float]
    used_gpus: list[float]
    pass_s: list[float] = field(default_factory=list)
    samples: list[tuple[float, int, float, float]] = field(default_factory=list)
    placed: list[tuple[str, ...]] = field(default_factory=list)
    pool_events: list[PoolEvent] = field(default_factory=list)
    moved: dict[int, dict[str, float]] = field(default_factory=dict)
    end_s: float = 0.0
    wall_s: float = 0.0


def slice_policies(trace: Trace, inventory: Inventory) -> dict[str, SlicePolicy]:
    """No per-slice limits: only fair share (weights from the trace, else the inventory, else 1)
    and the order of the queue decide. Nothing is evicted: the replay has no admin to confirm."""
    weights = trace.shares or inventory.shares
    return {
        name: SlicePolicy(max_active_gprs=10**9, share=weights.get(name, 1.0), eviction="off") for name in trace.slices
    }


def replay(
    trace: Trace,
    inventory: Inventory,
    policy: str,
    *,
    progress: bool = False,
    half_life: timedelta = HALF_LIFE,
    order: Order = FAIR_SHARE_FIRST,
    on_started: Callable[[int], None] | None = None,
) -> Replay:
    """Run ``trace`` on ``inventory`` through ``plan(..., backfill=POLICIES[policy])``, each band's
    requests in ``order`` (core/queue.py); ``on_started`` is told how many GPRs started so far after
    each pass that started some."""
    backfill = POLICIES[policy]
    nodes = inventory.nodes()
    fleet = Fleet(inventory.pools)
    policies = slice_policies(trace, inventory)
    jobs = trace.jobs
    n = len(jobs)
    submit_us = [round(j.submit_s * 1e6) for j in jobs]
    duration_us = [round(j.duration_s * 1e6) for j in jobs]
    actual_us = [min(round(j.actual_s * 1e6), d) for j, d in zip(jobs, duration_us, strict=True)]
    instances = inventory.instance_shapes()
    requests = [
        Request(
            gpr_id=i + 1,
            spec=GPRSpec(
                slice=j.slice,
                duration=duration_us[i] * US,
                gpus=j.gpus,
                nodes=j.nodes,
                priority=j.priority,
                shape=j.shape if j.share is None else instance_for(j.share, instances),
                cluster=j.cluster,
            ),
            submitted_at=EPOCH + submit_us[i] * US,
        )
        for i, j in enumerate(jobs)
    ]
    out = Replay(
        policy=policy,
        trace=trace,
        inventory=inventory,
        submit=[t / 1e6 for t in submit_us],
        estimate=[None] * n,
        start=[None] * n,
        bound_end=[None] * n,
        used_end=[None] * n,
        bound_gpus=[0] * n,
        used_gpus=[0] * n,
        placed=[()] * n,
        pool_events=fleet.events,
    )
    used = [j.share if j.share is not None else j.used_gpus for j in jobs]
    store = _Store(out, used, dict.fromkeys(policies, 0.0), fleet)
    usage: dict[str, float] = {}
    previous: dict = {}
    next_submit, wake, last, started = 0, None, None, 0
    began = time.perf_counter()
    with _frozen(), progress_bar(total=n, desc=policy, enabled=progress) as bar:
        while True:
            due = [t for t in (wake, store.next_event(), fleet.next_event()) if t is not None]
            if next_submit < n:
                due.append(submit_us[next_submit])
            if not due:
                break
            t = min(due)
            if last is not None and t > last:
                usage = _accrued(usage, store.held, (t - last) * US, half_life)
            last = t
            # 1. Apply this instant's events to the store: submits, early releases, nodes joining.
            submitted = []
            while next_submit < n and submit_us[next_submit] == t:
                store.queue[next_submit + 1] = requests[next_submit]
                submitted.append(next_submit)
                next_submit += 1
            store.release_due(t)
            fleet.join_due(t)
            # 2. Snapshot and plan, as the service's reconcile loop does.
            now = EPOCH + t * US
            snapshot = Snapshot(
                nodes=nodes + fleet.nodes(now) if fleet.pools else nodes,
                bookings=tuple(store.bookings.values()),
                queue=tuple(store.queue.values()),
                policies=policies,
                usage=usage,
                previous=previous,
                projects=inventory.projects,
                project_policies=inventory.project_policies,
                order=order,
            )
            tick = time.perf_counter()
            decided = plan(snapshot, now, backfill=backfill)
            out.pass_s.append(time.perf_counter() - tick)
            # 3. Act: end windows, bind admitted GPRs, then ask the pools for nodes and give idle ones back.
            for gpr_id in decided.ends:
                store.unbind(gpr_id - 1, t)
            for admitted in decided.admits:
                i = admitted.gpr_id - 1
                store.bind(admitted, t, now, actual_us[i])
            fleet.act(decided.estimates.values(), t, now)
            for i in submitted:
                estimate = decided.estimates.get(i + 1)
                if estimate is not None and estimate.start is not None:
                    out.estimate[i] = (estimate.start - EPOCH) / US / 1e6
            if decided.moved:
                _note_moved(out.moved, decided.moved, previous, decided.estimates)
            previous = decided.estimates
            wake = _next_start(decided.estimates, store.queue, t)
            out.samples.append((t / 1e6, len(store.queue), store.bound, store.used))
            if decided.admits:
                bar.update(len(decided.admits))
                started += len(decided.admits)
                if on_started is not None:
                    on_started(started)
            if len(out.pass_s) % POSTFIX_EVERY == 0:
                bar.set_postfix(queued=len(store.queue), pass_ms=f"{1000 * out.pass_s[-1]:.1f}", refresh=False)
    out.end_s = (last or 0) / 1e6
    out.wall_s = time.perf_counter() - began
    return out


def _note_moved(
    moved: dict[int, dict[str, float]],
    causes: Mapping[int, str],
    previous: Mapping[int, Estimate],
    estimates: Mapping[int, Estimate],
) -> None:
    """Add to each moved GPR's index the seconds its cause moved its estimate later."""
    for gpr_id, cause in causes.items():
        before, after = previous.get(gpr_id), estimates.get(gpr_id)
        if before is None or before.start is None or after is None or after.start is None:
            continue
        later = (after.start - before.start).total_seconds()
        if later > 0:
            by_cause = moved.setdefault(gpr_id - 1, {})
            by_cause[cause] = by_cause.get(cause, 0.0) + later


@contextmanager
def _frozen() -> Iterator[None]:
    """While inside, the objects made before (the trace, its requests, the inventory: they live through
    the replay) are left out of every garbage collection: each full collection walked them all again
    (12 % of a 6-day Philly replay's time; 4 % with them left out). Where the process froze objects of
    its own already, they stay frozen and nothing more is (unfreezing is all or nothing)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Store:
    """What the service's database would hold during a replay: the queue, the bookings, GPUs
    bound and used (in total and per slice), and when each held GPR lets go of its GPUs; it tells
    the pools (``fleet``) which of their nodes are held."""

    def __init__(self, out: Replay, used_gpus: list[float | None], held: dict[str, float], fleet: Fleet):
        self.out = out
        self.fleet = fleet
        self.used_gpus = used_gpus  # per job: GPUs it computes on when it holds more; None = all
        self.queue: dict[int, Request] = {}
        self.bookings: dict[int, Booking] = {}
        self.held = held  # GPUs bound per slice, for fair share
        self.bound = self.used = 0.0
        self.events: list[tuple[int, int, int]] = []  # (time, GPR index, kind), a heap

    def next_event(self) -> int | None:
        return self.events[0][0] if self.events else None

    def release_due(self, t: int) -> None:
        """Early releases due by ``t`` unbind now; a window end waits for the pass (Plan.ends)."""
        while self.events and self.events[0][0] <= t:
            _, i, kind = heapq.heappop(self.events)
            if kind == _RELEASE:
                self.unbind(i, t)

    def bind(self, admitted: Estimate, t: int, now: datetime, actual_us: int) -> None:
        i = admitted.gpr_id - 1
        request = self.queue.pop(admitted.gpr_id)
        gpus = admitted.placement.gpus
        self.bookings[admitted.gpr_id] = Booking(
            gpr_id=admitted.gpr_id,
            slice=request.spec.slice,
            gpus=gpus,
            start=now,
            end=now + request.spec.duration,
            priority=request.spec.priority,
        )
        out = self.out
        out.start[i] = t / 1e6
        out.placed[i] = admitted.placement.nodes
        self.fleet.hold(admitted.placement.nodes)
        shape = admitted.placement.shape
        held = out.bound_gpus[i] = len(gpus) * float(shape.equivalents)
        out.used_gpus[i] = min(held, self.used_gpus[i] or held)
        self.held[request.spec.slice] += held
        self.bound += held
        self.used += out.used_gpus[i]
        window_us = request.spec.duration // US
        if actual_us < window_us:
            heapq.heappush(self.events, (t + actual_us, i, _RELEASE))
        else:
            heapq.heappush(self.events, (t + window_us, i, _WINDOW_END))

    def unbind(self, i: int, t: int) -> None:
        booking = self.bookings.pop(i + 1)
        out = self.out
        self.held[booking.slice] -= out.bound_gpus[i]
        self.bound -= out.bound_gpus[i]
        self.used -= out.used_gpus[i]
        out.bound_end[i] = out.used_end[i] = t / 1e6
        self.fleet.let_go(out.placed[i], t)


def instance_for(share: float, instances: list[Shape]) -> str | None:
    """The shape a job asking for ``share`` of a GPU asks for: the smallest MIG instance of at least
    that part (``instances``: inventory.instance_shapes()); None (a whole GPU of any shape) without one."""
    fits = (s for s in instances if s.equivalents >= share)
    return next((s.gpu_type for s in fits), None)


def _next_start(estimates, queue: dict[int, Request], t: int) -> int | None:
    """The earliest estimated start after ``t`` among queued GPRs (virtual microseconds)."""
    starts = [e.start for gpr_id, e in estimates.items() if e.start is not None and gpr_id in queue]
    later = [(s - EPOCH) // US for s in starts]
    later = [s for s in later if s > t]
    return min(later, default=None)


def _accrued(usage: dict[str, float], held: dict[str, float], elapsed: timedelta, half_life: timedelta) -> dict:
    """Fair-share usage ``elapsed`` later, with each slice holding ``held`` GPUs throughout."""
    usage = decay(usage, elapsed, half_life)
    for name, gpus in held.items():
        if gpus:
            usage[name] = usage.get(name, 0.0) + accrue({}, name, gpus, elapsed, half_life)[name]
    return usage
