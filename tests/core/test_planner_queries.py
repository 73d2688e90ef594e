"""Planner queries: wait_times (one option per cluster and shape), unservable_reason, Shape.matches."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from egs_hub.core.model import GPRSpec, Node, SlicePolicy
from egs_hub.core.planner import plan, unservable_reason, wait_times
from egs_hub.core.snapshot import Booking, Request, Snapshot

from .builders import (
    NOW,
    at,
    booking,
    check_wait_times_match_plan,
    gpus_of,
    node,
    req,
    shape,
    snap,
    spec,
    view_state,
)

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


@dataclass(frozen=True)
class AheadCase:
    """``spec`` sorts ahead of queued requests of its band; ``last`` is the same request
    sorting last in it. Each is asked about alone."""

    nodes: tuple[Node, ...]
    queue: tuple[Request, ...]
    spec: GPRSpec
    last: GPRSpec
    want: datetime  # the soonest start of ``spec``: it may take windows promised to those behind it
    want_last: datetime  # the soonest start of ``last``: after the whole band
    bookings: tuple[Booking, ...] = ()
    policies: dict[str, SlicePolicy] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)


H2 = node("h2")
H1_FOR_AN_HOUR = (booking(90, H1.gpus, until=1, slice="o"),)
AHEAD = {
    # h1 is busy for an hour; 1 is promised it at +1h; asked behind 1, h1 is free at +2h
    "higher priority takes the window promised to the request behind it": AheadCase(
        (H1,),
        (req(1, gpus=8, slice="a"),),
        spec(gpus=8, slice="b", priority=150),
        spec(gpus=8, slice="b", priority=101),
        want=at(1),
        want_last=at(2),
        bookings=H1_FOR_AN_HOUR,
    ),
    # b used nothing (factor 1); a and c used the same (factor 2 ** -1.5): c sorts after 1
    "a better fair share goes ahead of a higher priority": AheadCase(
        (H1,),
        (req(1, gpus=8, slice="a", priority=200),),
        spec(gpus=8, slice="b", priority=101),
        spec(gpus=8, slice="c", priority=101),
        want=at(1),
        want_last=at(2),
        bookings=H1_FOR_AN_HOUR,
        policies={name: SlicePolicy() for name in "abc"},
        usage={"a": 1000.0, "c": 1000.0},
    ),
    # 1 has h1 at +1h, 2 at +2h: at priority 120 the request goes between them
    "ahead of one, behind another": AheadCase(
        (H1,),
        (req(1, gpus=8, slice="a", priority=150), req(2, gpus=8, slice="c")),
        spec(gpus=8, slice="b", priority=120),
        spec(gpus=8, slice="b", priority=101),
        want=at(2),
        want_last=at(3),
        bookings=H1_FOR_AN_HOUR,
    ),
    # b holds one GPR at a time; 1 (b, on a1 from +1h to +3h) is behind it, so h1 is free now
    "its slice's limit: the slice's window behind it, on another shape": AheadCase(
        (H1, A1),
        (req(1, gpus=4, shape="A100", slice="b", hours=2),),
        spec(shape="H100", slice="b", priority=150, hours=2),
        spec(shape="H100", slice="b", priority=101, hours=2),
        want=NOW,
        want_last=at(3),
        bookings=(booking(90, A1.gpus, until=1, slice="o"),),
    ),
    # h1 is free at +1h, h2 at +2h; 1 takes h1 for two hours
    "whole nodes": AheadCase(
        (H1, H2),
        (req(1, nodes=1, slice="a", hours=2),),
        spec(nodes=2, slice="b", priority=150),
        spec(nodes=2, slice="b", priority=101),
        want=at(2),
        want_last=at(3),
        bookings=(*H1_FOR_AN_HOUR, booking(91, H2.gpus, until=2, slice="o")),
    ),
}


@pytest.mark.parametrize("case", AHEAD.values(), ids=AHEAD.keys())
def test_wait_times_ahead_of_requests_in_the_band(case: AheadCase):
    snapshot = snap(*case.nodes, bookings=case.bookings, queue=case.queue, policies=case.policies, usage=case.usage)
    current = plan(snapshot, NOW)
    assert wait_times(snapshot, case.spec, NOW, current=current)[0].start == case.want
    assert wait_times(snapshot, case.last, NOW, current=current)[0].start == case.want_last
    check_wait_times_match_plan(snapshot, case.spec)
    check_wait_times_match_plan(snapshot, case.last)


def test_wait_times_leave_the_plan_as_it_was():
    """Asked ahead of the band, then last in it, then ahead again: the same answers, and
    the plan's timelines are unchanged."""
    case = AHEAD["higher priority takes the window promised to the request behind it"]
    snapshot = snap(*case.nodes, bookings=case.bookings, queue=case.queue)
    current = plan(snapshot, NOW)
    before = view_state(current.views)
    asked = [wait_times(snapshot, s, NOW, current=current)[0].start for s in (case.spec, case.last, case.spec)]
    assert asked == [at(1), at(2), at(1)]
    assert view_state(current.views) == before


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
        want="1 whole nodes of any shape cannot be placed: the inventory has 1 such node(s) with up to 8 GPUs each, "
        "and 1 of their GPUs are unhealthy or on quarantined nodes",
    ),
    "unhealthy GPUs leave too few on the node": UnservableCase(
        (A1,),
        spec(gpus=4),
        unhealthy=frozenset(gpus_of(A1, 0)),
        want="4 GPUs of any shape cannot be placed: the inventory has 1 such node(s) with up to 4 GPUs each, "
        "and 1 of their GPUs are unhealthy or on quarantined nodes",
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
