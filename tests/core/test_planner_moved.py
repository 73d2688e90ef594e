"""Why a promise was not held where it was (Plan.moved): one case per cause."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from egs_hub.core.model import SlicePolicy
from egs_hub.core.planner import MOVED, plan
from egs_hub.core.snapshot import Booking, Request, Snapshot

from .builders import NOW, node, spec

SECOND = 1 / 3600


def promised(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with its own plan's estimates as the promises."""
    return dataclasses.replace(snapshot, previous=plan(snapshot, NOW).estimates)


def one_node_busy_for(seconds: int, *queue: Request) -> Snapshot:
    """One 8-GPU node held for ``seconds`` by another slice, and ``queue`` waiting for it."""
    n = node("n1")
    held = Booking(9, "other", n.gpus, NOW - timedelta(hours=1), NOW + timedelta(seconds=seconds))
    return Snapshot(nodes=(n,), bookings=(held,), queue=queue)


def request(gpr_id: int, *, gpus: int = 8, seconds: int = 30, slice: str = "a", priority: int = 50) -> Request:
    submitted = NOW - timedelta(minutes=10 - gpr_id)
    return Request(gpr_id, spec(gpus=gpus, hours=seconds * SECOND, slice=slice, priority=priority), submitted)


def test_every_cause_is_explained():
    assert set(MOVED) == {"capacity-lost", "taken", "late", "overtaken"}
    assert all(text for text in MOVED.values())


def test_nothing_moved_is_nothing_named():
    assert plan(promised(one_node_busy_for(10, request(1), request(2))), NOW).moved == {}


def test_a_node_gone_loses_the_promises_on_it():
    snapshot = promised(one_node_busy_for(10, request(1)))
    elsewhere = dataclasses.replace(snapshot, nodes=(node("n2"),), bookings=())
    assert plan(elsewhere, NOW).moved == {1: "capacity-lost"}


def test_higher_priority_work_takes_the_window():
    snapshot = promised(one_node_busy_for(10, request(1)))
    urgent = dataclasses.replace(snapshot, queue=(*snapshot.queue, request(2, priority=250)))
    after = plan(urgent, NOW)
    assert after.moved == {1: "taken"}
    assert after.estimates[1].start > snapshot.previous[1].start


def test_a_window_admitted_late_holds_the_next_promise_as_much_later():
    snapshot = promised(one_node_busy_for(10, request(1), request(2)))
    first = snapshot.previous[1]
    late = timedelta(seconds=2)
    admitted = Booking(1, "a", first.placement.gpus, first.start + late, first.end + late)
    later = dataclasses.replace(snapshot, bookings=(admitted,), queue=snapshot.queue[1:])
    after = plan(later, NOW + timedelta(seconds=12))
    assert after.moved == {2: "late"}
    assert after.estimates[2].start == snapshot.previous[2].start + late


def test_a_window_held_longer_takes_the_promise_after_it():
    """Only an admission written late slips the promises after it: a GPR holding its GPUs longer
    takes the window, and the requests promised after it are planned again in queue order."""
    snapshot = promised(one_node_busy_for(10, request(1), request(2)))
    overran = dataclasses.replace(snapshot.bookings[0], end=NOW + timedelta(seconds=12))
    longer = dataclasses.replace(snapshot, bookings=(overran,))
    after = plan(longer, NOW)
    assert after.moved == {1: "taken", 2: "overtaken"}
    assert after.estimates[1].start == NOW + timedelta(seconds=12)
    assert after.estimates[2].start == snapshot.previous[2].start + timedelta(seconds=2)


def test_a_newcomer_with_a_better_fair_share_overtakes():
    snapshot = promised(one_node_busy_for(10, request(1, slice="heavy")))
    newcomer = dataclasses.replace(
        snapshot,
        queue=(*snapshot.queue, request(2, slice="light")),
        usage={"heavy": 1e9, "light": 0.0},
        policies={"heavy": SlicePolicy(), "light": SlicePolicy()},
    )
    after = plan(newcomer, NOW)
    assert after.estimates[2].start < after.estimates[1].start
    assert after.moved == {1: "overtaken"}
