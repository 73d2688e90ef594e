"""The planner: ``plan(snapshot, now) -> Plan``.

Vocabulary: a *booking* is a GPR holding GPUs now (provisioning, provisioned or
releasing); a *request* is a GPR waiting for GPUs; a *placement* is the exact
GPUs and nodes a request would get; an *estimate* is a request's planned start
and placement. The same pass that admits also estimates, so a queued GPR's
estimated start comes from the planner that will start it.

This first planner walks the queue in order (``queue_key``) and gives each
request the earliest start at which its GPUs are free for its whole window,
after the requests ahead of it are placed; a request whose start is ``now`` is
admitted. Slice limits (``max_active_gprs``, ``max_gpus``) hold at every
instant of a window. Pure: no I/O, no clock, deterministic.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .model import GPRSpec, Node, Shape, SlicePolicy
from .snapshot import Estimate, Option, Placement, Plan, Request, Snapshot

# A booking that is releasing, or whose window has passed, still holds its GPUs
# at ``now``; they are free for planning right after.
JUST_AFTER = timedelta(microseconds=1)


def queue_key(request: Request) -> tuple:
    """Queue order: higher priority first, then earlier submit, then lower id."""
    return (-request.spec.priority, request.submitted_at, request.gpr_id)


def plan(snapshot: Snapshot, now: datetime) -> Plan:
    """Windows to end, GPRs to admit now, and an estimate for every queued GPR."""
    ends = tuple(
        b.gpr_id for b in sorted(snapshot.bookings, key=lambda b: (b.end, b.gpr_id)) if not b.releasing and b.end <= now
    )
    timeline = _Timeline.of(snapshot, now)
    estimates = {}
    for position, request in enumerate(sorted(snapshot.queue, key=queue_key), start=1):
        estimates[request.gpr_id] = timeline.place(request, position, snapshot.nodes)
    admits = tuple(e for e in estimates.values() if e.start == now)
    approvals = tuple(r.gpr_id for r in sorted(snapshot.pending, key=queue_key))
    return Plan(admits=admits, ends=ends, estimates=estimates, approvals=approvals)


def wait_times(snapshot: Snapshot, spec: GPRSpec, now: datetime) -> list[Option]:
    """When a request for ``spec`` submitted now would start, on every (cluster, shape)
    that could serve it, as if it joined the queue behind everything of its priority."""
    probe = Request(gpr_id=-1, spec=spec, submitted_at=now)
    timeline = _Timeline.of(snapshot, now)
    for request in sorted(snapshot.queue, key=queue_key):
        if queue_key(request) < (-spec.priority, now, math.inf):
            timeline.place(request, 0, snapshot.nodes)
    options = []
    for (cluster, shape), nodes in _groups(eligible_nodes(snapshot.nodes, spec)).items():
        estimate = timeline.earliest(probe, nodes)
        if estimate is not None:
            start, placement = estimate
            options.append(Option(cluster, shape, start, start - now, placement))
    return sorted(options, key=lambda o: (o.start, o.cluster, o.shape.name))


def eligible_nodes(nodes: Iterable[Node], spec: GPRSpec) -> list[Node]:
    """Nodes of the cluster and shape the spec allows, that accept new work."""
    return sorted(
        (
            n
            for n in nodes
            if n.schedulable and (spec.cluster is None or n.cluster == spec.cluster) and n.shape.matches(spec.shape)
        ),
        key=lambda n: n.key,
    )


def gpu_count(spec: GPRSpec, nodes: Iterable[Node]) -> int:
    """GPUs the spec holds: ``gpus``, or ``nodes`` times the largest node it may get."""
    if spec.gpus is not None:
        return spec.gpus
    per_node = max((n.shape.gpus_per_node for n in eligible_nodes(nodes, spec)), default=0)
    return (spec.nodes or 0) * per_node


def unservable_reason(spec: GPRSpec, nodes: tuple[Node, ...], unhealthy: frozenset[str]) -> str | None:
    """Why no amount of waiting serves ``spec`` here; None when it can be served."""
    candidates = eligible_nodes(nodes, spec)
    where = f"shape {spec.shape!r}" if spec.shape else "any shape"
    where += f" in cluster {spec.cluster!r}" if spec.cluster else ""
    if not candidates:
        return f"no schedulable node offers {where}"
    free = {n.key: [g for g in n.gpus if g not in unhealthy] for n in candidates}
    if _place(candidates, free, spec) is None:
        asked = f"{spec.gpus} GPUs" if spec.gpus is not None else f"{spec.nodes} whole nodes"
        largest = max(n.shape.gpus_per_node for n in candidates)
        return (
            f"{asked} of {where} cannot be placed: the inventory has {len(candidates)} such "
            f"node(s) with up to {largest} GPUs each"
        )
    return None


def _groups(nodes: Iterable[Node]) -> dict[tuple[str, Shape], list[Node]]:
    groups: dict[tuple[str, Shape], list[Node]] = defaultdict(list)
    for node in nodes:
        groups[(node.cluster, node.shape)].append(node)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].name)))


def _place(nodes: list[Node], free: Mapping[tuple[str, str], list[str]], spec: GPRSpec) -> Placement | None:
    """Exact GPUs for ``spec`` among ``free`` GPUs (per node key, in index order).

    ``gpus`` that fit one node go on the node with the fewest free GPUs that
    has enough (best fit); more GPUs than a node has take whole free nodes of
    one cluster and shape, filled in order; ``nodes`` takes whole free nodes.
    """
    if spec.gpus is not None:
        fitting = [n for n in nodes if n.shape.gpus_per_node >= spec.gpus and len(free[n.key]) >= spec.gpus]
        if fitting:
            best = min(fitting, key=lambda n: (len(free[n.key]), n.key))
            return Placement(best.cluster, best.shape, (best.name,), tuple(free[best.key][: spec.gpus]))
    for (cluster, shape), group in _groups(nodes).items():
        whole = [n for n in group if len(free[n.key]) == len(n.gpus) == shape.gpus_per_node]
        if spec.nodes is not None:
            if len(whole) >= spec.nodes:
                chosen = whole[: spec.nodes]
                gpus = tuple(g for n in chosen for g in n.gpus)
                return Placement(cluster, shape, tuple(n.name for n in chosen), gpus)
        elif spec.gpus > shape.gpus_per_node:
            needed = math.ceil(spec.gpus / shape.gpus_per_node)
            if len(whole) >= needed:
                chosen = whole[:needed]
                gpus = tuple(g for n in chosen for g in n.gpus)[: spec.gpus]
                return Placement(cluster, shape, tuple(n.name for n in chosen), gpus)
    return None


@dataclass
class _Usage:
    start: datetime
    end: datetime
    gpus: int


class _Timeline:
    """Busy intervals per GPU and per slice; grows as requests are placed."""

    def __init__(self, now: datetime, policies: Mapping[str, SlicePolicy], unhealthy: frozenset[str]):
        self.now = now
        self.policies = policies
        self.unhealthy = unhealthy
        self.busy: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
        self.usage: dict[str, list[_Usage]] = defaultdict(list)

    @classmethod
    def of(cls, snapshot: Snapshot, now: datetime) -> _Timeline:
        timeline = cls(now, snapshot.policies, snapshot.unhealthy_gpus)
        for booking in snapshot.bookings:
            end = now + JUST_AFTER if booking.releasing else max(booking.end, now + JUST_AFTER)
            timeline.reserve(booking.slice, booking.gpus, booking.start, end)
        return timeline

    def reserve(self, slice_name: str, gpus: tuple[str, ...], start: datetime, end: datetime) -> None:
        for gpu in gpus:
            self.busy[gpu].append((start, end))
        self.usage[slice_name].append(_Usage(start, end, len(gpus)))

    def place(self, request: Request, position: int, nodes: tuple[Node, ...]) -> Estimate:
        found = self.earliest(request, eligible_nodes(nodes, request.spec))
        if found is None:
            return Estimate(request.gpr_id, position, None, None, None)
        start, placement = found
        end = start + request.spec.duration
        self.reserve(request.spec.slice, placement.gpus, start, end)
        return Estimate(request.gpr_id, position, start, end, placement)

    def earliest(self, request: Request, nodes: list[Node]) -> tuple[datetime, Placement] | None:
        spec = request.spec
        lower = max(self.now, spec.start_after or self.now)
        candidates = {lower}
        for node in nodes:
            for gpu in node.gpus:
                candidates.update(end for _, end in self.busy[gpu] if end > lower)
        candidates.update(u.end for u in self.usage[spec.slice] if u.end > lower)
        for start in sorted(candidates):
            end = start + spec.duration
            free = {n.key: [g for g in n.gpus if g not in self.unhealthy and self._free(g, start, end)] for n in nodes}
            # A ``nodes`` request holds more GPUs on larger nodes: when the slice's
            # limits refuse the first placement, a smaller (cluster, shape) may do.
            placements = [_place(nodes, free, spec)]
            if spec.nodes is not None:
                placements += [_place(group, free, spec) for group in _groups(nodes).values()]
            for placement in placements:
                if placement is not None and self._slice_allows(spec.slice, start, end, len(placement.gpus)):
                    return start, placement
        return None

    def _free(self, gpu: str, start: datetime, end: datetime) -> bool:
        return all(b_end <= start or end <= b_start for b_start, b_end in self.busy[gpu])

    def _slice_allows(self, slice_name: str, start: datetime, end: datetime, gpus: int) -> bool:
        """``max_active_gprs`` and ``max_gpus`` hold at every instant of [start, end).

        A GPR larger than ``max_gpus`` alone was approved over quota; it runs
        while the slice holds nothing else.
        """
        policy = self.policies.get(slice_name, SlicePolicy())
        usage = self.usage[slice_name]
        points = [start] + [u.start for u in usage if start < u.start < end]
        for point in points:
            active = [u for u in usage if u.start <= point < u.end]
            if len(active) + 1 > policy.max_active_gprs:
                return False
            if policy.max_gpus is not None:
                limit = max(policy.max_gpus, gpus)
                if sum(u.gpus for u in active) + gpus > limit:
                    return False
        return True
