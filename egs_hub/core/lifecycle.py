"""The GPR state machine: every transition is one function.

Each function checks that the move is legal from the GPR's status, and
returns the new GPR and the audit event to record (actor, reason, time).

    pending-approval -> queued -> provisioning -> provisioned -> releasing -> complete
    side exits: rejected, cancelled (before provisioning), failed (a queued GPR
    the planner cannot place, a provisioning one that could not be bound); and a
    provisioned GPR leaves through releasing with an end reason: window-ended,
    released-early, idle-released or evicted. An evicted GPR goes from
    releasing back to queued when its slice re-queues evicted work; a
    provisioning GPR whose nodes failed their pre-checks goes back to queued
    when its slice moves such GPRs to other nodes.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from .errors import IllegalTransition
from .model import GPR, EndReason, Event, GPRSpec, Status

PLANNER = "planner"

# What a GPR queued again gives up: its window and its GPUs.
_UNPLACED = {
    "window_start": None,
    "window_end": None,
    "bound_gpus": (),
    "bound_nodes": (),
    "price_per_gpu_hour": None,
}

# status -> the statuses it may move to
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.PENDING_APPROVAL: frozenset({Status.QUEUED, Status.REJECTED, Status.CANCELLED}),
    Status.QUEUED: frozenset({Status.PROVISIONING, Status.CANCELLED, Status.FAILED}),
    Status.PROVISIONING: frozenset({Status.PROVISIONED, Status.FAILED, Status.RELEASING, Status.QUEUED}),
    Status.PROVISIONED: frozenset({Status.RELEASING}),
    Status.RELEASING: frozenset({Status.COMPLETE, Status.QUEUED}),
    Status.COMPLETE: frozenset(),
    Status.REJECTED: frozenset(),
    Status.CANCELLED: frozenset(),
    Status.FAILED: frozenset(),
}


def _move(gpr: GPR, to: Status, *, kind: str, actor: str, reason: str, now: datetime, **changes) -> tuple[GPR, Event]:
    if to not in TRANSITIONS[gpr.status]:
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; it cannot become {to} ({kind})")
    moved = dataclasses.replace(gpr, status=to, status_reason=reason, updated_at=now, **changes)
    event = Event(
        kind=kind,
        actor=actor,
        reason=reason,
        time=now,
        gpr_id=gpr.id,
        slice=gpr.spec.slice,
        from_status=gpr.status,
        to_status=to,
    )
    return moved, event


def submit(
    gpr_id: int,
    spec: GPRSpec,
    requested_by: str,
    approval_reasons: list[str],
    now: datetime,
    *,
    reject: bool = False,
) -> tuple[GPR, Event]:
    """A new GPR: queued, or pending-approval with the reasons policy gave.

    With ``reject`` (the slice policy's ``reject_over_limits``) a GPR with reasons is
    created rejected, ended at ``now``. That is a creation, not a transition, so
    TRANSITIONS has no edge for it; like every GPR that ends rejected, it never leaves.
    """
    if not approval_reasons:
        status, reason = Status.QUEUED, "within the slice's policy"
    elif reject:
        status, reason = Status.REJECTED, "over the slice's limits: " + "; ".join(approval_reasons)
    else:
        status, reason = Status.PENDING_APPROVAL, "; ".join(approval_reasons)
    gpr = GPR(
        id=gpr_id,
        spec=spec,
        requested_by=requested_by,
        status=status,
        status_reason=reason,
        created_at=now,
        updated_at=now,
        ended_at=now if status.is_final else None,
    )
    event = Event(
        kind="submitted",
        actor=requested_by,
        reason=reason,
        time=now,
        gpr_id=gpr_id,
        slice=spec.slice,
        to_status=status,
    )
    return gpr, event


def approve(gpr: GPR, actor: str, reason: str, now: datetime) -> tuple[GPR, Event]:
    # releasing -> queued is requeue's edge (evicted GPRs only) and provisioning -> queued is
    # move_off's, not approval's.
    if gpr.status is not Status.PENDING_APPROVAL:
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; only pending GPRs are approved")
    return _move(gpr, Status.QUEUED, kind="approved", actor=actor, reason=reason or "approved", now=now)


def deny(gpr: GPR, actor: str, reason: str, now: datetime) -> tuple[GPR, Event]:
    return _move(
        gpr,
        Status.REJECTED,
        kind="rejected",
        actor=actor,
        reason=reason or "denied",
        now=now,
        ended_at=now,
    )


def cancel(gpr: GPR, actor: str, reason: str, now: datetime) -> tuple[GPR, Event]:
    """Only before provisioning: a GPR holding GPUs is released, not cancelled."""
    return _move(
        gpr,
        Status.CANCELLED,
        kind="cancelled",
        actor=actor,
        reason=reason or "cancelled",
        now=now,
        ended_at=now,
    )


def admit(
    gpr: GPR, gpus: tuple[str, ...], nodes: tuple[str, ...], now: datetime, price: float | None = None
) -> tuple[GPR, Event]:
    """The planner gives the GPR its GPUs; its window starts now, at ``price`` per GPU-hour (core/cost.py)."""
    moved, event = _move(
        gpr,
        Status.PROVISIONING,
        kind="admitted",
        actor=PLANNER,
        reason=f"{len(gpus)} GPU(s) free on {', '.join(nodes)}",
        now=now,
        window_start=now,
        window_end=now + gpr.spec.duration,
        bound_gpus=gpus,
        bound_nodes=nodes,
        price_per_gpu_hour=price,
    )
    return moved, dataclasses.replace(event, data={"gpus": list(gpus), "nodes": list(nodes)})


def mark_provisioned(gpr: GPR, actor: str, now: datetime) -> tuple[GPR, Event]:
    return _move(
        gpr,
        Status.PROVISIONED,
        kind="provisioned",
        actor=actor,
        reason="GPUs bound to the slice; restart your server to use them",
        now=now,
    )


def fail(gpr: GPR, actor: str, reason: str, now: datetime) -> tuple[GPR, Event]:
    """Binding failed (provisioning), or the planner could not place a queued GPR (issue 25)."""
    return _move(gpr, Status.FAILED, kind="failed", actor=actor, reason=reason, now=now, ended_at=now)


def move_off(
    gpr: GPR, cluster: str, nodes: tuple[str, ...], actor: str, reason: str, now: datetime
) -> tuple[GPR, Event]:
    """Nodes of a provisioning GPR failed their pre-checks (nothing was bound): it waits again,
    with a fresh window, and is never placed on those nodes of ``cluster`` again."""
    if gpr.status is not Status.PROVISIONING or not nodes:
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; only a provisioning GPR moves off failed nodes")
    avoid = tuple(dict.fromkeys((*gpr.avoid_nodes, *((cluster, name) for name in nodes))))
    moved, event = _move(
        gpr,
        Status.QUEUED,
        kind="moved",
        actor=actor,
        reason=f"{reason}; queued again for other nodes",
        now=now,
        avoid_nodes=avoid,
        **_UNPLACED,
    )
    return moved, dataclasses.replace(event, data={"cluster": cluster, "nodes": list(nodes)})


_END_KINDS = {
    EndReason.WINDOW_ENDED: "window-ended",
    EndReason.RELEASED_EARLY: "released-early",
    EndReason.IDLE_RELEASED: "idle-released",
    EndReason.EVICTED: "evicted",
}


def begin_release(gpr: GPR, end_reason: EndReason, actor: str, reason: str, now: datetime) -> tuple[GPR, Event]:
    """The GPR leaves its GPUs: window end, early release, idle timeout or eviction."""
    if end_reason is EndReason.WINDOW_ENDED and gpr.status is not Status.PROVISIONED:
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; only a provisioned window ends")
    return _move(
        gpr,
        Status.RELEASING,
        kind=_END_KINDS[end_reason],
        actor=actor,
        reason=reason or end_reason.value,
        now=now,
        end_reason=end_reason,
    )


def shorten(gpr: GPR, end: datetime, actor: str, reason: str, now: datetime) -> tuple[GPR, Event]:
    """A GPR holding GPUs gets a window that ends at ``end`` (not before ``now``) instead: the window
    ends then as any window does."""
    if not gpr.status.holds_gpus or gpr.status is Status.RELEASING or gpr.window_end is None:
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; only a GPR holding its window can be shortened")
    end = max(end, now)
    if end >= gpr.window_end:
        raise IllegalTransition(f"GPR {gpr.id}'s window ends at {gpr.window_end}, before {end}: nothing to shorten")
    event = Event(
        kind="window-shortened",
        actor=actor,
        reason=reason,
        time=now,
        gpr_id=gpr.id,
        slice=gpr.spec.slice,
        data={"window_end": end.isoformat(), "was": gpr.window_end.isoformat()},
    )
    return dataclasses.replace(gpr, window_end=end, updated_at=now), event


def complete(gpr: GPR, actor: str, now: datetime) -> tuple[GPR, Event]:
    """The backend has taken the GPUs back."""
    return _move(
        gpr,
        Status.COMPLETE,
        kind="complete",
        actor=actor,
        reason="GPUs returned to the pool",
        now=now,
        ended_at=now,
    )


def requeue(gpr: GPR, actor: str, now: datetime) -> tuple[GPR, Event]:
    """An evicted GPR waits again for GPUs, with a fresh window."""
    if gpr.end_reason is not EndReason.EVICTED:
        raise IllegalTransition(f"GPR {gpr.id} was not evicted; only evicted GPRs are re-queued")
    return _move(
        gpr,
        Status.QUEUED,
        kind="requeued",
        actor=actor,
        reason="evicted; queued again",
        now=now,
        end_reason=None,
        **_UNPLACED,
    )


def change_priority(gpr: GPR, priority: int, actor: str, now: datetime) -> tuple[GPR, Event]:
    """Admins change priority at any time; it moves the GPR in the queue."""
    if gpr.status.is_final:
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; its priority no longer matters")
    changed = dataclasses.replace(gpr, spec=dataclasses.replace(gpr.spec, priority=priority), updated_at=now)
    event = Event(
        kind="priority-changed",
        actor=actor,
        reason=f"priority {gpr.spec.priority} -> {priority}",
        time=now,
        gpr_id=gpr.id,
        slice=gpr.spec.slice,
        data={"from": gpr.spec.priority, "to": priority},
    )
    return changed, event


def edit(gpr: GPR, spec: GPRSpec, actor: str, now: datetime) -> tuple[GPR, Event]:
    """The owner changes the request before it is provisioned."""
    if gpr.status not in (Status.PENDING_APPROVAL, Status.QUEUED):
        raise IllegalTransition(f"GPR {gpr.id} is {gpr.status}; only pending or queued GPRs can be edited")
    changed_fields = sorted(
        f.name for f in dataclasses.fields(spec) if getattr(spec, f.name) != getattr(gpr.spec, f.name)
    )
    event = Event(
        kind="edited",
        actor=actor,
        reason="changed " + (", ".join(changed_fields) or "nothing"),
        time=now,
        gpr_id=gpr.id,
        slice=gpr.spec.slice,
        data={"fields": changed_fields},
    )
    return dataclasses.replace(gpr, spec=spec, updated_at=now), event
