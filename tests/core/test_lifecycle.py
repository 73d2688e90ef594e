"""The GPR state machine: every (status, transition function) pair, and each function's extras."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from egs_hub.core import lifecycle
from egs_hub.core.errors import IllegalTransition
from egs_hub.core.lifecycle import TRANSITIONS
from egs_hub.core.model import GPR, EndReason, Event, Status

from .builders import NOW, at, gpr, spec

ADMIN = "admin"
BACKEND = "backend"
S = Status


@dataclass(frozen=True)
class Transition:
    call: Callable[[GPR], tuple[GPR, Event]]
    to: Status  # the status a legal call moves to
    sources: frozenset[Status]  # the statuses it is legal from
    kind: str  # the event's kind
    actor: str  # the event's actor
    end_reason: EndReason | None = None  # the end reason the GPR under test carries


FUNCTIONS = {
    "approve": Transition(
        lambda g: lifecycle.approve(g, ADMIN, "ok", NOW),
        S.QUEUED,
        frozenset({S.PENDING_APPROVAL}),
        "approved",
        ADMIN,
    ),
    "deny": Transition(
        lambda g: lifecycle.deny(g, ADMIN, "no", NOW),
        S.REJECTED,
        frozenset({S.PENDING_APPROVAL}),
        "rejected",
        ADMIN,
    ),
    "cancel": Transition(
        lambda g: lifecycle.cancel(g, "alice", "", NOW),
        S.CANCELLED,
        frozenset({S.PENDING_APPROVAL, S.QUEUED}),
        "cancelled",
        "alice",
    ),
    "admit": Transition(
        lambda g: lifecycle.admit(g, ("n1-g0", "n1-g1"), ("n1",), NOW),
        S.PROVISIONING,
        frozenset({S.QUEUED}),
        "admitted",
        lifecycle.PLANNER,
    ),
    "mark_provisioned": Transition(
        lambda g: lifecycle.mark_provisioned(g, BACKEND, NOW),
        S.PROVISIONED,
        frozenset({S.PROVISIONING}),
        "provisioned",
        BACKEND,
    ),
    "fail": Transition(
        lambda g: lifecycle.fail(g, BACKEND, "node lost", NOW),
        S.FAILED,
        frozenset({S.QUEUED, S.PROVISIONING}),
        "failed",
        BACKEND,
    ),
    "move off failed nodes": Transition(
        lambda g: lifecycle.move_off(g, "east", ("n1",), BACKEND, "node n1 is not Ready", NOW),
        S.QUEUED,
        frozenset({S.PROVISIONING}),
        "moved",
        BACKEND,
    ),
    "window ends": Transition(
        lambda g: lifecycle.begin_release(g, EndReason.WINDOW_ENDED, lifecycle.PLANNER, "", NOW),
        S.RELEASING,
        frozenset({S.PROVISIONED}),
        "window-ended",
        lifecycle.PLANNER,
    ),
    "early release": Transition(
        lambda g: lifecycle.begin_release(g, EndReason.RELEASED_EARLY, "alice", "done", NOW),
        S.RELEASING,
        frozenset({S.PROVISIONING, S.PROVISIONED}),
        "released-early",
        "alice",
    ),
    "idle release": Transition(
        lambda g: lifecycle.begin_release(g, EndReason.IDLE_RELEASED, "idle-culler", "", NOW),
        S.RELEASING,
        frozenset({S.PROVISIONING, S.PROVISIONED}),
        "idle-released",
        "idle-culler",
    ),
    "eviction": Transition(
        lambda g: lifecycle.begin_release(g, EndReason.EVICTED, lifecycle.PLANNER, "for GPR 9", NOW),
        S.RELEASING,
        frozenset({S.PROVISIONING, S.PROVISIONED}),
        "evicted",
        lifecycle.PLANNER,
    ),
    "complete": Transition(
        lambda g: lifecycle.complete(g, BACKEND, NOW),
        S.COMPLETE,
        frozenset({S.RELEASING}),
        "complete",
        BACKEND,
    ),
    "requeue after eviction": Transition(
        lambda g: lifecycle.requeue(g, lifecycle.PLANNER, NOW),
        S.QUEUED,
        frozenset({S.RELEASING}),
        "requeued",
        lifecycle.PLANNER,
        end_reason=EndReason.EVICTED,
    ),
}

PAIRS = {f"{name} from {status}": (status, name) for name in FUNCTIONS for status in TRANSITIONS}


@pytest.mark.parametrize(("status", "name"), PAIRS.values(), ids=PAIRS.keys())
def test_every_status_and_transition(status: Status, name: str):
    t = FUNCTIONS[name]
    before = gpr(status, end_reason=t.end_reason)
    if status not in t.sources:
        with pytest.raises(IllegalTransition, match=f"GPR {before.id}"):
            t.call(before)
        return
    moved, event = t.call(before)
    assert t.to in TRANSITIONS[status]
    assert moved.status is t.to
    assert (moved.id, moved.spec, moved.requested_by, moved.created_at) == (
        before.id,
        before.spec,
        before.requested_by,
        before.created_at,
    )
    assert moved.updated_at == NOW
    assert moved.status_reason == event.reason
    assert moved.ended_at == (NOW if t.to.is_final else before.ended_at)
    assert (event.kind, event.actor, event.time) == (t.kind, t.actor, NOW)
    assert event.reason
    assert (event.gpr_id, event.slice) == (before.id, before.spec.slice)
    assert (event.from_status, event.to_status) == (status, t.to)


def test_functions_cover_every_edge_of_the_state_machine():
    edges = {(source, to) for source, targets in TRANSITIONS.items() for to in targets}
    made = {(source, t.to) for t in FUNCTIONS.values() for source in t.sources}
    assert made == edges
    assert set(TRANSITIONS) == set(Status)
    assert all(not TRANSITIONS[s] for s in Status if s.is_final)


@pytest.mark.parametrize(
    ("reasons", "reject", "want_status", "want_reason"),
    [
        ([], False, S.QUEUED, "within the slice's policy"),
        (["too long"], False, S.PENDING_APPROVAL, "too long"),
        (["too long", "too big"], False, S.PENDING_APPROVAL, "too long; too big"),
        ([], True, S.QUEUED, "within the slice's policy"),  # nothing over a limit: nothing to reject
        (["too long"], True, S.REJECTED, "over the slice's limits: too long"),
        (["too long", "too big"], True, S.REJECTED, "over the slice's limits: too long; too big"),
    ],
)
def test_submit(reasons: list[str], reject: bool, want_status: Status, want_reason: str):
    made, event = lifecycle.submit(3, spec(gpus=2), "bob", reasons, NOW, reject=reject)
    assert (made.id, made.status, made.status_reason, made.requested_by) == (
        3,
        want_status,
        want_reason,
        "bob",
    )
    assert made.created_at == made.updated_at == NOW
    assert made.ended_at == (NOW if want_status.is_final else None)  # a rejected GPR ends as it is made
    assert made.window_start is None and made.bound_gpus == ()
    assert (event.kind, event.actor, event.reason, event.time) == ("submitted", "bob", want_reason, NOW)
    assert (event.from_status, event.to_status, event.gpr_id, event.slice) == (None, want_status, 3, "team")


def test_admit_sets_the_window_and_binding():
    queued = gpr(S.QUEUED, gpus=2, hours=3)
    moved, event = lifecycle.admit(queued, ("n1-g0", "n1-g1"), ("n1",), NOW)
    assert (moved.window_start, moved.window_end) == (NOW, NOW + timedelta(hours=3))
    assert (moved.bound_gpus, moved.bound_nodes) == (("n1-g0", "n1-g1"), ("n1",))
    assert event.data == {"gpus": ["n1-g0", "n1-g1"], "nodes": ["n1"]}
    assert "n1" in event.reason


@pytest.mark.parametrize("end_reason", list(EndReason))
def test_begin_release_records_the_end_reason(end_reason: EndReason):
    moved, event = lifecycle.begin_release(gpr(S.PROVISIONED), end_reason, ADMIN, "", NOW)
    assert moved.end_reason is end_reason
    assert event.reason == end_reason.value  # the default reason
    assert moved.bound_gpus == ("n1-g0",)  # still held until complete


def test_empty_reasons_get_defaults():
    assert lifecycle.approve(gpr(S.PENDING_APPROVAL), ADMIN, "", NOW)[1].reason == "approved"
    assert lifecycle.deny(gpr(S.PENDING_APPROVAL), ADMIN, "", NOW)[1].reason == "denied"
    assert lifecycle.cancel(gpr(S.QUEUED), "alice", "", NOW)[1].reason == "cancelled"


def test_requeue_gives_a_fresh_window():
    releasing = gpr(S.RELEASING, end_reason=EndReason.EVICTED)
    moved, event = lifecycle.requeue(releasing, lifecycle.PLANNER, NOW)
    assert (moved.window_start, moved.window_end, moved.end_reason) == (None, None, None)
    assert (moved.bound_gpus, moved.bound_nodes) == ((), ())
    assert event.kind == "requeued"


def test_move_off_gives_a_fresh_window_away_from_the_failed_nodes():
    provisioning = dataclasses.replace(
        lifecycle.admit(gpr(S.QUEUED), ("n2-g0", "n3-g0"), ("n2", "n3"), at(0))[0], avoid_nodes=(("east", "n1"),)
    )
    moved, event = lifecycle.move_off(provisioning, "east", ("n2", "n1"), BACKEND, "node n2 is cordoned", NOW)
    assert (moved.window_start, moved.window_end, moved.bound_gpus, moved.bound_nodes) == (None, None, (), ())
    assert moved.avoid_nodes == (("east", "n1"), ("east", "n2"))  # once each, in the order they failed
    assert moved.status_reason == "node n2 is cordoned; queued again for other nodes"
    assert event.data == {"cluster": "east", "nodes": ["n2", "n1"]}


def test_move_off_names_the_failed_nodes():
    with pytest.raises(IllegalTransition, match="only a provisioning GPR moves off failed nodes"):
        lifecycle.move_off(gpr(S.PROVISIONING), "east", (), BACKEND, "cannot check", NOW)


@pytest.mark.parametrize("end_reason", [r for r in EndReason if r is not EndReason.EVICTED])
def test_requeue_only_after_eviction(end_reason: EndReason):
    with pytest.raises(IllegalTransition, match="not evicted"):
        lifecycle.requeue(gpr(S.RELEASING, end_reason=end_reason), ADMIN, NOW)


def test_requeue_not_after_complete():
    with pytest.raises(IllegalTransition):
        lifecycle.requeue(gpr(S.COMPLETE, end_reason=EndReason.EVICTED), ADMIN, NOW)


@pytest.mark.parametrize("status", list(Status))
def test_change_priority(status: Status):
    before = gpr(status, priority=50)
    if status.is_final:
        with pytest.raises(IllegalTransition, match="priority"):
            lifecycle.change_priority(before, 250, ADMIN, at(1))
        return
    changed, event = lifecycle.change_priority(before, 250, ADMIN, at(1))
    assert changed.spec == dataclasses.replace(before.spec, priority=250)
    assert (changed.status, changed.updated_at) == (status, at(1))
    assert (event.kind, event.actor, event.time, event.gpr_id) == (
        "priority-changed",
        ADMIN,
        at(1),
        before.id,
    )
    assert event.data == {"from": 50, "to": 250}
    assert event.reason == "priority 50 -> 250"


@pytest.mark.parametrize("status", list(Status))
def test_edit_only_before_provisioning(status: Status):
    before = gpr(status, gpus=1)
    wanted = dataclasses.replace(before.spec, gpus=4, shape="A100")
    if status not in (S.PENDING_APPROVAL, S.QUEUED):
        with pytest.raises(IllegalTransition, match="edited"):
            lifecycle.edit(before, wanted, "alice", NOW)
        return
    edited, event = lifecycle.edit(before, wanted, "alice", NOW)
    assert (edited.spec, edited.status, edited.updated_at) == (wanted, status, NOW)
    assert (event.kind, event.actor, event.reason) == ("edited", "alice", "changed gpus, shape")
    assert event.data == {"fields": ["gpus", "shape"]}


def test_edit_with_no_change_says_so():
    before = gpr(S.QUEUED)
    assert lifecycle.edit(before, before.spec, "alice", NOW)[1].reason == "changed nothing"


def test_a_window_is_shortened_not_lengthened():
    held = gpr(Status.PROVISIONED)
    shortened, event = lifecycle.shorten(held, at(0.25), "maintenance", "node n1's maintenance", at(0))
    assert shortened.window_end == at(0.25) and shortened.status is Status.PROVISIONED
    assert event.kind == "window-shortened" and event.data["was"] == at(0.5).isoformat()
    assert lifecycle.shorten(held, at(-1), "m", "now", at(0))[0].window_end == at(0)  # never before now
    with pytest.raises(IllegalTransition):
        lifecycle.shorten(held, at(1), "m", "later", at(0))
    with pytest.raises(IllegalTransition):
        lifecycle.shorten(gpr(Status.QUEUED), at(0.25), "m", "queued", at(0))
