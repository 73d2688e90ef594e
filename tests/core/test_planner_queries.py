"""Planner queries: wait_times (one option per cluster and shape), unservable_reason, Shape.matches."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from egs_hub.core.model import GPRSpec, Node, SlicePolicy
from egs_hub.core.planner import plan, unservable_reason, wait_times
from egs_hub.core.snapshot import Booking, Request, Snapshot

from .builders import NOW, at, booking, check_wait_times_match_plan, gpus_of, node, req, shape, snap, spec

H1 = node("h1")  # H100-80GB x8 in c1
A1 = node("a1", 4, "A100")  # A100-80GB x4 in c1
X1 = node("x1", cluster="c2")  # H100-80GB x8 in c2


@pytest.mark.parametrize(
    ("wanted", "want"),
    [
        (None, True),
        ("H100", True),
        ("h100", True),
        ("H100-80GB", True),
        ("H100-80GB x8", True),
        ("H100-80GBx8", True),
        (" h100-80gb X8 ", True),
        ("H100-80GB x4", False),
        ("H100-40GB", False),
        ("A100", False),
        ("H10", False),
        ("", False),
    ],
)
def test_shape_matches(wanted: str | None, want: bool):
    assert shape("H100", 8, 80).matches(wanted) is want


@dataclass(frozen=True)
class WaitCase:
    nodes: tuple[Node, ...]
    spec: GPRSpec
    queue: tuple[Request, ...] = ()
    bookings: tuple[Booking, ...] = ()
    policies: dict[str, SlicePolicy] = field(default_factory=dict)
    want: list[tuple[str, str, datetime]] = field(default_factory=list)  # (cluster, shape name, start), in order


WAITS = {
    "one option per cluster and shape, soonest first": WaitCase(
        (H1, node("h2"), A1, X1),
        spec(gpus=2),
        bookings=(
            booking(90, H1.gpus, until=2, slice="o"),
            booking(91, node("h2").gpus, until=3, slice="o"),
            booking(92, X1.gpus, until=1, slice="o"),
        ),
        want=[("c1", "A100-80GB x4", NOW), ("c2", "H100-80GB x8", at(1)), ("c1", "H100-80GB x8", at(2))],
    ),
    "ties sorted by cluster then shape": WaitCase(
        (X1, H1, A1),
        spec(gpus=1),
        want=[("c1", "A100-80GB x4", NOW), ("c1", "H100-80GB x8", NOW), ("c2", "H100-80GB x8", NOW)],
    ),
    "only shapes that can serve": WaitCase((H1, A1), spec(gpus=6), want=[("c1", "H100-80GB x8", NOW)]),
    "shape and cluster filter": WaitCase(
        (H1, A1, X1), spec(shape="H100", cluster="c2"), want=[("c2", "H100-80GB x8", NOW)]
    ),
    "nothing can serve": WaitCase((H1, A1), spec(gpus=9), want=[]),
    "behind queued GPRs of higher priority": WaitCase(
        (H1,),
        spec(gpus=8, priority=100),
        queue=(req(1, gpus=8, priority=200, slice="o", hours=2),),
        want=[("c1", "H100-80GB x8", at(2))],
    ),
    "behind queued GPRs of the same priority": WaitCase(
        (H1,),
        spec(gpus=8),
        queue=(req(1, gpus=8, slice="o", submitted=0),),
        want=[("c1", "H100-80GB x8", at(1))],
    ),
    "ahead of queued GPRs of lower priority": WaitCase(
        (H1,),
        spec(gpus=8, priority=200),
        queue=(req(1, gpus=8, priority=100, slice="o"),),
        want=[("c1", "H100-80GB x8", NOW)],
    ),
    "after the slice's own booking": WaitCase(
        (H1,),
        spec(),
        bookings=(booking(90, gpus_of(H1, 0), until=0.5),),
        want=[("c1", "H100-80GB x8", at(0.5))],
    ),
    "not before start_after": WaitCase((H1,), spec(start_after=4), want=[("c1", "H100-80GB x8", at(4))]),
}


@pytest.mark.parametrize("case", WAITS.values(), ids=WAITS.keys())
def test_wait_times(case: WaitCase):
    snapshot = snap(*case.nodes, bookings=case.bookings, queue=case.queue, policies=case.policies)
    options = wait_times(snapshot, case.spec, NOW)
    assert [(o.cluster, o.shape.name, o.start) for o in options] == case.want
    for option in options:
        assert option.wait == option.start - NOW
        assert (option.placement.cluster, option.placement.shape) == (option.cluster, option.shape)
        assert option.placement.count == case.spec.gpus
    check_wait_times_match_plan(snapshot, case.spec)


MATCH_PLAN = {
    "nodes request under a slice quota": (
        snap(
            node("a8", 8, "A100"),
            node("h4", 4, "H100"),
            node("l1", 4, "L4"),
            bookings=(booking(90, node("l1", 4, "L4").gpus, until=2),),
            policies={"team": SlicePolicy(max_gpus=8, max_active_gprs=2)},
        ),
        spec(nodes=1),
    ),
    "queue ahead on every shape": (
        snap(
            H1,
            A1,
            X1,
            queue=(req(1, gpus=4, priority=300, slice="o"), req(2, gpus=8, priority=250, slice="p")),
        ),
        spec(gpus=4),
    ),
    "multi-node gpus": (
        snap(H1, node("h2"), bookings=(booking(90, gpus_of(H1, 0), until=1, slice="o"),)),
        spec(gpus=10),
    ),
}


@pytest.mark.parametrize(("snapshot", "wanted"), MATCH_PLAN.values(), ids=MATCH_PLAN.keys())
def test_wait_times_match_plan(snapshot: Snapshot, wanted: GPRSpec):
    check_wait_times_match_plan(snapshot, wanted)


def test_wait_times_is_the_latest_start_for_a_request_that_sorts_ahead_in_its_band():
    """h1 is full for an hour; 1 (priority 101) is promised it at +1h. Asked at priority 150
    (same band, ahead of 1), wait_times answers as if behind 1 (+2h); submitted, the request
    goes ahead of 1 and takes its window (+1h)."""
    policies = {name: SlicePolicy(max_active_gprs=10) for name in ("a", "b", "o")}
    snapshot = snap(
        H1, bookings=(booking(90, H1.gpus, until=1, slice="o"),), queue=(req(1, gpus=8, slice="a"),), policies=policies
    )
    current = plan(snapshot, NOW)
    wanted = spec(gpus=8, slice="b", priority=150)
    assert [o.start for o in wait_times(snapshot, wanted, NOW, current=current)] == [at(2)]
    probe = Request(2, wanted, NOW)
    following = plan(dataclasses.replace(snapshot, queue=(*snapshot.queue, probe), previous=current.estimates), NOW)
    assert {i: e.start for i, e in following.estimates.items()} == {1: at(2), 2: at(1)}


@dataclass(frozen=True)
class UnservableCase:
    nodes: tuple[Node, ...]
    spec: GPRSpec
    unhealthy: frozenset[str] = frozenset()
    want: str | None = None  # the reason; None when waiting long enough serves it


UNSERVABLE = {
    "servable": UnservableCase((H1,), spec(gpus=8)),
    "servable once booked GPUs are free": UnservableCase((H1, node("h2")), spec(nodes=2)),
    "no node of the shape": UnservableCase((H1,), spec(shape="B200"), want="no schedulable node offers shape 'B200'"),
    "no node in the cluster": UnservableCase(
        (H1,),
        spec(shape="H100", cluster="c9"),
        want="no schedulable node offers shape 'H100' in cluster 'c9'",
    ),
    "only unschedulable nodes": UnservableCase(
        (node("h0", schedulable=False),), spec(), want="no schedulable node offers any shape"
    ),
    "more GPUs than the inventory": UnservableCase(
        (H1, A1),
        spec(gpus=16),
        want="16 GPUs of any shape cannot be placed: the inventory has 2 such node(s) with up to 8 GPUs each",
    ),
    "more nodes than the inventory": UnservableCase(
        (H1,),
        spec(nodes=2),
        want="2 whole nodes of any shape cannot be placed: the inventory has 1 such node(s) with up to 8 GPUs each",
    ),
    "unhealthy GPUs make a node not whole": UnservableCase(
        (H1,),
        spec(nodes=1),
        unhealthy=frozenset(gpus_of(H1, 2)),
        want="1 whole nodes of any shape cannot be placed: the inventory has 1 such node(s) with up to 8 GPUs each",
    ),
    "unhealthy GPUs leave too few on the node": UnservableCase(
        (A1,),
        spec(gpus=4),
        unhealthy=frozenset(gpus_of(A1, 0)),
        want="4 GPUs of any shape cannot be placed: the inventory has 1 such node(s) with up to 4 GPUs each",
    ),
    "unhealthy GPUs elsewhere do not matter": UnservableCase(
        (A1, H1), spec(gpus=4), unhealthy=frozenset(gpus_of(A1, 0))
    ),
}


@pytest.mark.parametrize("case", UNSERVABLE.values(), ids=UNSERVABLE.keys())
def test_unservable_reason(case: UnservableCase):
    assert unservable_reason(case.spec, case.nodes, case.unhealthy) == case.want
    # plan() agrees: an unservable request gets no estimate, a servable one does
    queued = snap(*case.nodes, queue=(Request(1, case.spec, NOW - timedelta(hours=1)),), unhealthy=case.unhealthy)
    assert (plan(queued, NOW).estimates[1].start is None) == (case.want is not None)
