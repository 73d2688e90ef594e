"""Builders of core test data (nodes, requests, bookings, snapshots, GPRs) and shared checks.

Every builder takes the few fields a test cares about and fills the rest with
plain defaults, so a case reads as what it is about. Times are offsets from
``NOW`` in hours (floats allowed) so that tables stay short.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from egs_hub.core.model import GPR, PRIORITY_DEFAULT, EndReason, GPRSpec, Node, Shape, SlicePolicy, Status
from egs_hub.core.planner import Views, plan, wait_times
from egs_hub.core.snapshot import Booking, Request, Snapshot

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SLICE = "team"


def at(hours: float = 0) -> datetime:
    """``NOW`` plus ``hours``."""
    return NOW + timedelta(hours=hours)


def shape(model: str = "H100", gpus: int = 8, memory_gb: int = 80) -> Shape:
    return Shape(model=model, memory_gb=memory_gb, gpus_per_node=gpus)


def node(
    name: str,
    gpus: int = 8,
    model: str = "H100",
    *,
    memory_gb: int = 80,
    cluster: str = "c1",
    schedulable: bool = True,
) -> Node:
    """A node whose GPU UUIDs are ``"<name>-g<index>"`` (names are unique per test)."""
    return Node(
        name=name,
        cluster=cluster,
        shape=shape(model, gpus, memory_gb),
        gpus=tuple(f"{name}-g{i}" for i in range(gpus)),
        schedulable=schedulable,
    )


def gpus_of(node_: Node, *indexes: int) -> tuple[str, ...]:
    """UUIDs of ``node_``'s GPUs at ``indexes`` (all of them when none are given)."""
    if not indexes:
        return node_.gpus
    return tuple(node_.gpus[i] for i in indexes)


def spec(
    *,
    gpus: int | None = None,
    nodes: int | None = None,
    hours: float = 1,
    slice: str = SLICE,
    priority: int = PRIORITY_DEFAULT,
    shape: str | None = None,
    cluster: str | None = None,
    start_after: float | None = None,
) -> GPRSpec:
    """A GPR spec; one GPU when neither ``gpus`` nor ``nodes`` is given."""
    if gpus is None and nodes is None:
        gpus = 1
    return GPRSpec(
        slice=slice,
        duration=timedelta(hours=hours),
        gpus=gpus,
        nodes=nodes,
        priority=priority,
        shape=shape,
        cluster=cluster,
        start_after=None if start_after is None else at(start_after),
    )


def req(gpr_id: int, *, submitted: float | None = None, **spec_fields) -> Request:
    """A queued request; submitted ``gpr_id`` minutes before ``NOW`` unless told."""
    submitted_at = at(submitted) if submitted is not None else NOW - timedelta(hours=1, minutes=-gpr_id)
    return Request(gpr_id=gpr_id, spec=spec(**spec_fields), submitted_at=submitted_at)


def booking(
    gpr_id: int,
    gpus: tuple[str, ...],
    *,
    until: float = 1,
    since: float = -1,
    slice: str = SLICE,
    releasing: bool = False,
    priority: int = PRIORITY_DEFAULT,
    preemptible: bool = True,
) -> Booking:
    """A GPR holding ``gpus`` from ``since`` to ``until`` (hours from ``NOW``)."""
    return Booking(
        gpr_id=gpr_id,
        slice=slice,
        gpus=gpus,
        start=at(since),
        end=at(until),
        releasing=releasing,
        priority=priority,
        preemptible=preemptible,
    )


def snap(
    *nodes: Node,
    bookings: list[Booking] | tuple[Booking, ...] = (),
    queue: list[Request] | tuple[Request, ...] = (),
    pending: list[Request] | tuple[Request, ...] = (),
    policies: dict[str, SlicePolicy] | None = None,
    unhealthy: set[str] | frozenset[str] = frozenset(),
    usage: dict[str, float] | None = None,
) -> Snapshot:
    return Snapshot(
        nodes=tuple(nodes),
        bookings=tuple(bookings),
        queue=tuple(queue),
        pending=tuple(pending),
        policies=dict(policies or {}),
        unhealthy_gpus=frozenset(unhealthy),
        usage=dict(usage or {}),
    )


def gpr(status: Status, *, gpr_id: int = 7, end_reason: EndReason | None = None, **spec_fields) -> GPR:
    """A GPR in ``status`` with the fields that status implies (window, bound GPUs, end)."""
    created = at(-2)
    made = GPR(
        id=gpr_id,
        spec=spec(**spec_fields),
        requested_by="alice",
        status=status,
        created_at=created,
        updated_at=created,
    )
    if status.holds_gpus or status is Status.COMPLETE:
        made = dataclasses.replace(
            made,
            window_start=at(-1),
            window_end=at(0.5),
            bound_gpus=("n1-g0",),
            bound_nodes=("n1",),
        )
    if status is Status.RELEASING or status is Status.COMPLETE:
        made = dataclasses.replace(made, end_reason=end_reason or EndReason.RELEASED_EARLY)
    if status.is_final:
        made = dataclasses.replace(made, ended_at=at(-0.5))
    return made


def check_wait_times_match_plan(snapshot: Snapshot, wanted: GPRSpec) -> None:
    """Shared check: the soonest wait_times option is the estimate the next plan() gives
    ``wanted`` submitted now, when the queue keeps the current plan's promises
    (DESIGN.md: one planner estimates and admits), wherever it sorts in its band; and
    asking does not change the answer to the next question."""
    current = plan(snapshot, NOW)
    before = view_state(current.views)
    options = wait_times(snapshot, wanted, NOW, current=current)
    assert wait_times(snapshot, wanted, NOW, current=current) == options
    assert view_state(current.views) == before
    last_id = max((r.gpr_id for r in snapshot.queue), default=0) + 1
    probe = Request(gpr_id=last_id, spec=wanted, submitted_at=NOW)
    following = dataclasses.replace(snapshot, queue=(*snapshot.queue, probe), previous=current.estimates)
    planned = plan(following, NOW).estimates[last_id]
    if not options:
        assert planned.start is None
        return
    assert planned.start == options[0].start
    soonest = {(o.cluster, o.shape) for o in options if o.start == planned.start}
    assert (planned.placement.cluster, planned.placement.shape) in soonest


def view_state(views: Views) -> list:
    """Every node profile, pool summary and slice use in a plan's views, to compare (a slice
    use with nothing in it counts as none)."""
    return [
        (
            b,
            [
                (
                    [(p.times.copy(), p.values.copy()) for p in pool.profiles],
                    [pool.tail.tolist(), pool.hole.tolist(), pool.first.tolist(), pool.free_now.tolist()],
                )
                for pool in timeline.pools
            ],
            {
                name: [(p.times.copy(), p.values.copy()) for p in (use.active, use.parts)]
                for name, use in timeline.slices.items()
                if use is not None and (len(use.active.times) > 1 or use.active.values != [0])
            },
        )
        for b, timeline in sorted(views.after_band.items())
    ]
