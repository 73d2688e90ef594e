"""The planner's rules, one hand-checkable case each: kept promises, fair share, bands,
backfill against the baselines, bursting, and eviction.

Every case runs on one or two 8-GPU H100 nodes; times are hours from NOW.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from egs_hub.core.model import Node, SlicePolicy
from egs_hub.core.planner import plan
from egs_hub.core.snapshot import Booking, Request, Snapshot

from .builders import NOW, at, booking, gpus_of, node, req, snap

H1 = node("h1")
H2 = node("h2")
X1 = node("x1", cluster="c2")
OPEN = SlicePolicy(max_active_gprs=10)
SLICES = {"a": OPEN, "b": OPEN, "team": OPEN, "o": OPEN}


def starts(snapshot: Snapshot, **options) -> dict[int, datetime | None]:
    return {gpr_id: e.start for gpr_id, e in plan(snapshot, NOW, **options).estimates.items()}


# Promises: the second plan sees the first plan's estimates as snapshot.previous.

FULL_FOR_AN_HOUR = booking(90, H1.gpus, until=1, slice="o")
A_WAITS = req(1, gpus=8, slice="a")


@dataclass(frozen=True)
class PromiseCase:
    arrivals: tuple[Request, ...] = ()
    released: tuple[int, ...] = ()
    usage: dict[str, float] = field(default_factory=dict)
    want: dict[int, datetime] = field(default_factory=dict)  # second plan's starts


PROMISES = {
    "a later arrival with better fair share goes ahead, into the promised window": PromiseCase(
        arrivals=(req(2, gpus=8, slice="b", submitted=0),),
        usage={"a": 1e6},
        want={1: at(2), 2: at(1)},
    ),
    "a later arrival with worse fair share goes after the promise": PromiseCase(
        arrivals=(req(2, gpus=8, slice="b", submitted=0),),
        usage={"b": 1e6},
        want={1: at(1), 2: at(2)},
    ),
    "a higher band arrival may take the promised window": PromiseCase(
        arrivals=(req(2, gpus=8, slice="b", priority=250, submitted=0),),
        want={1: at(2), 2: at(1)},
    ),
    "a lower band arrival waits behind": PromiseCase(
        arrivals=(req(2, gpus=8, slice="b", priority=50, submitted=0),),
        want={1: at(1), 2: at(2)},
    ),
    "a small arrival backfills the gap before the promise": PromiseCase(
        arrivals=(req(2, gpus=8, slice="b", hours=0.5, submitted=0),),
        released=(90,),
        want={1: NOW, 2: at(1)},
    ),
    "early release moves the promise earlier": PromiseCase(released=(90,), want={1: NOW}),
}


@pytest.mark.parametrize("case", PROMISES.values(), ids=PROMISES.keys())
def test_promises(case: PromiseCase):
    first_snapshot = snap(H1, bookings=(FULL_FOR_AN_HOUR,), queue=(A_WAITS,), policies=SLICES)
    first = plan(first_snapshot, NOW)
    assert first.estimates[1].start == at(1)
    second = dataclasses.replace(
        first_snapshot,
        queue=(A_WAITS, *case.arrivals),
        bookings=tuple(b for b in first_snapshot.bookings if b.gpr_id not in case.released),
        usage=case.usage,
        previous=first.estimates,
    )
    assert starts(second) == case.want


def test_a_window_planned_where_another_ends_off_the_second_fits_again_on_the_next_pass():
    """n0's GPU 0 is free 2 microseconds after +0.5h; 1 takes it for half an hour. A float sum of
    those seconds ends a hair after the microsecond the estimate says, so 3, planned to start
    when 1 ends, did not fit when its promise was held again: the next pass planned the band as after
    lost capacity and the estimates moved. Window ends are on the microsecond grid of the times they come from."""
    n0, n1 = node("n0"), node("n1", gpus=4)
    off_the_second = dataclasses.replace(
        booking(100, gpus_of(n0, 0), until=0.5), end=at(0.5) + timedelta(microseconds=2)
    )
    queue = (req(1, hours=0.5), req(2, gpus=3, hours=0.5), req(3, hours=0.5))
    first_snapshot = snap(n0, n1, bookings=(off_the_second,), queue=queue)
    first = plan(first_snapshot, NOW)
    assert plan(dataclasses.replace(first_snapshot, previous=first.estimates), NOW).estimates == first.estimates


def test_a_fair_share_change_does_not_break_a_promise():
    """1 (a) and 2 (b) wait for the node, 1 first; then b's usage drops below a's, so 2 is
    ahead in the queue, but only a newcomer may take a promised window: both keep theirs."""
    queue = (A_WAITS, req(2, gpus=8, slice="b"))
    first_snapshot = snap(H1, bookings=(FULL_FOR_AN_HOUR,), queue=queue, policies=SLICES, usage={"b": 1e6})
    first = plan(first_snapshot, NOW)
    assert {i: e.start for i, e in first.estimates.items()} == {1: at(1), 2: at(2)}
    second = plan(dataclasses.replace(first_snapshot, usage={"a": 1e6}, previous=first.estimates), NOW)
    assert {i: e.start for i, e in second.estimates.items()} == {1: at(1), 2: at(2)}
    assert {i: e.position for i, e in second.estimates.items()} == {1: 2, 2: 1}


def test_a_request_behind_a_newcomer_keeps_its_promise_where_it_still_fits():
    """Two nodes, both full for an hour; 1 and 2 are promised one each at +1h. A newcomer of a
    slice with better fair share goes ahead and takes h1 at +1h: 1 moves after it, 2 keeps h2."""
    bookings = (FULL_FOR_AN_HOUR, booking(91, H2.gpus, until=1, slice="o"))
    queue = (A_WAITS, req(2, gpus=8, slice="a"))
    first_snapshot = snap(H1, H2, bookings=bookings, queue=queue, policies=SLICES, usage={"a": 1e6})
    first = plan(first_snapshot, NOW)
    assert {i: (e.start, e.placement.nodes) for i, e in first.estimates.items()} == {
        1: (at(1), ("h1",)),
        2: (at(1), ("h2",)),
    }
    newcomer = req(3, gpus=8, slice="b", submitted=0)
    second = plan(dataclasses.replace(first_snapshot, queue=(*queue, newcomer), previous=first.estimates), NOW)
    assert {i: (e.start, e.placement.nodes) for i, e in second.estimates.items()} == {
        3: (at(1), ("h1",)),
        1: (at(2), ("h1",)),
        2: (at(1), ("h2",)),
    }


def test_a_request_whose_promise_no_longer_fits_stays_ahead_of_those_queued_after_it():
    """1 then 2 wait for h1, promised +1h and +2h. The window ahead of them overruns by half an
    hour (capacity lost, as after an outage): 1's promise no longer fits, 2's still does. 1 is
    ahead in the queue, so it takes the first window (+1.5h) and 2 moves after it (+2.5h);
    before issue 18's fix, 1 was planned behind 2's promise (+3h)."""
    queue = (A_WAITS, req(2, gpus=8, slice="b"))
    first_snapshot = snap(H1, bookings=(FULL_FOR_AN_HOUR,), queue=queue, policies=SLICES)
    first = plan(first_snapshot, NOW)
    assert starts(first_snapshot) == {1: at(1), 2: at(2)}
    overrun = dataclasses.replace(FULL_FOR_AN_HOUR, end=at(1.5))
    second = dataclasses.replace(first_snapshot, bookings=(overrun,), previous=first.estimates)
    assert starts(second) == {1: at(1.5), 2: at(2.5)}


@pytest.mark.parametrize("c_freed_then", [False, True])
def test_promises_due_while_the_service_was_away_move_every_promise_of_the_band_by_as_much_at_most(
    c_freed_then: bool,
):
    """Planned at -0.2h: 3 starts at once on c (4 GPUs) and 4 follows it there at +0.8h; 5 waits
    for a, busy until +0.95h; b is busy for hours. The service was away until now, so 3 starts
    0.2h late and 4's promise no longer fits. Taking its place in the queue, 4 would take half
    of a at +0.95h and push 5 a whole hour; instead every promise of the band moves 0.2h later
    (they all still fit), and each then moves earlier where it can: 4 starts when 3 ends, 5
    keeps its window. When c's last window ended at -0.2h, 3 was held on c from just after
    (a microsecond), keeping its end, so 4's promise starts a microsecond before 3's estimated
    end: held later, it fits likewise."""
    a, b, c = node("a"), node("b"), node("c", gpus=4)
    busy = (booking(90, a.gpus, until=0.95, slice="o"), booking(91, b.gpus, until=3, slice="o"))
    if c_freed_then:
        busy += (booking(92, c.gpus, until=-0.2, slice="o"),)
    queue = (req(3, gpus=4), req(4, gpus=4), req(5, gpus=8))
    first_snapshot = snap(a, b, c, bookings=busy, queue=queue, policies=SLICES)
    first = plan(first_snapshot, at(-0.3 if c_freed_then else -0.2))
    if c_freed_then:  # the pass when 3 was due
        first = plan(dataclasses.replace(first_snapshot, previous=first.estimates), at(-0.2))
    just_after = timedelta(microseconds=1) if c_freed_then else timedelta(0)
    assert {i: (e.start, e.placement.nodes) for i, e in first.estimates.items()} == {
        3: (at(-0.2) + just_after, ("c",)),
        4: (at(0.8), ("c",)),
        5: (at(0.95), ("a",)),
    }
    second = dataclasses.replace(first_snapshot, bookings=busy[:2], previous=first.estimates)
    assert {i: (e.start, e.placement.nodes) for i, e in plan(second, NOW).estimates.items()} == {
        3: (NOW, ("c",)),
        4: (at(1), ("c",)),
        5: (at(0.95), ("a",)),
    }


def test_a_late_promise_that_holding_its_band_later_does_not_save_is_dropped_and_the_band_kept():
    """One GPR of slice a at a time (its default policy). 1 starts now and 3 waits until +1h, after 2 (a
    higher band, not before +0.5h). The service was away 12 ms: 1 would end 12 ms into 2's window, held
    later or not, so its promise is dropped and it waits for 2; 3 keeps its promise until 1 takes its
    place in the queue ahead of it."""
    queue = (
        req(1, hours=0.5, slice="a", priority=50),
        req(2, hours=0.5, slice="a", priority=150, start_after=0.5),
        req(3, hours=0.5, slice="a", priority=50),
    )
    first_snapshot = snap(node("n0"), queue=queue)
    first = plan(first_snapshot, NOW)
    assert {i: e.start for i, e in first.estimates.items()} == {1: NOW, 2: at(0.5), 3: at(1)}
    second = plan(dataclasses.replace(first_snapshot, previous=first.estimates), NOW + timedelta(milliseconds=12))
    assert {i: e.start for i, e in second.estimates.items()} == {1: at(1), 2: at(0.5), 3: at(1.5)}


def test_a_request_whose_promise_no_longer_fits_takes_a_window_nobody_was_promised_if_as_early():
    """1 waits for h2 (free at +1h), 2 for h1 (free at +1.5h). The window on h2 overruns to +1.5h:
    1's promise no longer fits. h1 and h2 are both free at +1.5h; 1 takes h2, which nobody was
    promised, so 2 keeps its promise on h1."""
    on_h2 = booking(91, H2.gpus, until=1, slice="o")
    bookings = (booking(90, H1.gpus, until=1.5, slice="o"), on_h2)
    queue = (A_WAITS, req(2, gpus=8, slice="b"))
    first_snapshot = snap(H1, H2, bookings=bookings, queue=queue, policies=SLICES)
    first = plan(first_snapshot, NOW)
    assert {i: (e.start, e.placement.nodes) for i, e in first.estimates.items()} == {
        1: (at(1), ("h2",)),
        2: (at(1.5), ("h1",)),
    }
    overrun = dataclasses.replace(on_h2, end=at(1.5))
    second = plan(dataclasses.replace(first_snapshot, bookings=(bookings[0], overrun), previous=first.estimates), NOW)
    assert {i: (e.start, e.placement.nodes) for i, e in second.estimates.items()} == {
        1: (at(1.5), ("h2",)),
        2: (at(1.5), ("h1",)),
    }


def test_without_promises_fair_share_orders_the_band():
    """The same arrival as the first promise case, planned from nothing: b used less, goes first."""
    snapshot = snap(
        H1,
        bookings=(FULL_FOR_AN_HOUR,),
        queue=(A_WAITS, req(2, gpus=8, slice="b", submitted=0)),
        policies=SLICES,
        usage={"a": 1e6},
    )
    got = plan(snapshot, NOW)
    assert {i: e.start for i, e in got.estimates.items()} == {1: at(2), 2: at(1)}
    assert {i: e.position for i, e in got.estimates.items()} == {1: 2, 2: 1}


# Backfill: ours (conservative) against EASY and strict order, on one node where 4 GPUs
# are bound for two hours. 1 needs the whole node (the head, at +2h); 2 would start now
# but run into 1's window; 3 fits the 4 free GPUs for an hour before it.

BACKFILL_SNAPSHOT = snap(
    H1,
    bookings=(booking(90, gpus_of(H1, 0, 1, 2, 3), until=2, slice="o"),),
    queue=(req(1, gpus=8), req(2, gpus=4, hours=3), req(3, gpus=4, hours=1)),
    policies=SLICES,
)


@pytest.mark.parametrize(
    ("backfill", "want"),
    [
        ("conservative", {1: at(2), 2: at(3), 3: NOW}),
        ("easy", {1: at(2), 2: at(3), 3: NOW}),
        ("none", {1: at(2), 2: at(3), 3: at(3)}),
    ],
)
def test_backfill_against_baselines(backfill: str, want: dict[int, datetime]):
    assert starts(BACKFILL_SNAPSHOT, backfill=backfill) == want


def test_backfill_uses_the_gap_before_a_multi_node_head():
    """Two nodes; 1 needs both, at +1h when h1 frees. 2 fits h2 for the hour before: both
    backfills start it now, strict order does not; 3 (3h) goes after 1 in all three."""
    snapshot = snap(
        H1,
        H2,
        bookings=(booking(90, H1.gpus, until=1, slice="o"),),
        queue=(req(1, gpus=16), req(2, gpus=8, hours=1), req(3, gpus=8, hours=3)),
        policies=SLICES,
    )
    assert starts(snapshot) == {1: at(1), 2: NOW, 3: at(2)}
    assert starts(snapshot, backfill="easy") == {1: at(1), 2: NOW, 3: at(2)}
    assert starts(snapshot, backfill="none") == {1: at(1), 2: at(2), 3: at(2)}


def test_bursts_to_the_cluster_that_starts_soonest():
    snapshot = snap(H1, X1, bookings=(booking(90, H1.gpus, until=2, slice="o"),), queue=(req(1, gpus=4),))
    got = plan(snapshot, NOW)
    assert got.estimates[1].start == NOW
    assert got.estimates[1].placement.cluster == "c2"


def test_unknown_backfill_is_refused():
    with pytest.raises(ValueError, match="backfill must be one of conservative, easy, none"):
        plan(snap(H1), NOW, backfill="greedy")


# Eviction: the top of the queue (priority 250) is blocked; provisioned GPRs of lower
# priority that are preemptible may be ended for it.


@dataclass(frozen=True)
class EvictionCase:
    nodes: tuple[Node, ...]
    bookings: tuple[Booking, ...]
    gpus: int
    want: tuple[int, ...] | None  # victims; None: no eviction
    priority: int = 250
    mode: str = "confirm"


LOW_3H = booking(91, gpus_of(H1, 0, 1, 2, 3), until=3, priority=50, slice="o")
MID_1H = booking(92, gpus_of(H1, 4, 5, 6, 7), until=1, priority=80, slice="o")
EVICTIONS = {
    "lowest priority first": EvictionCase((H1,), (LOW_3H, MID_1H), 4, (91,)),
    "as many as it takes": EvictionCase((H1,), (LOW_3H, MID_1H), 8, (91, 92)),
    "never a non-preemptible GPR": EvictionCase(
        (H1,), (dataclasses.replace(LOW_3H, preemptible=False), MID_1H), 4, (92,)
    ),
    "only lower priorities": EvictionCase((H1,), (LOW_3H, MID_1H), 8, None, priority=60),
    "policy off": EvictionCase((H1,), (LOW_3H, MID_1H), 4, None, mode="off"),
    "automatic by policy": EvictionCase((H1,), (LOW_3H, MID_1H), 4, (91,), mode="auto"),
    "the fewest: a victim that does not help is spared": EvictionCase(
        (H1, H2),
        (
            booking(91, gpus_of(H1, 0, 1), until=3, priority=50, slice="o"),
            booking(93, gpus_of(H1, 2, 3, 4, 5, 6, 7), until=3, priority=200, slice="o"),
            booking(92, H2.gpus, until=3, priority=60, slice="o"),
        ),
        8,
        (92,),
    ),
    "none when it can start now": EvictionCase((H1,), (MID_1H,), 4, None),
}


@pytest.mark.parametrize("case", EVICTIONS.values(), ids=EVICTIONS.keys())
def test_eviction(case: EvictionCase):
    policies = {**SLICES, "team": SlicePolicy(max_active_gprs=10, eviction=case.mode)}
    snapshot = snap(
        *case.nodes, bookings=case.bookings, queue=(req(1, gpus=case.gpus, priority=case.priority),), policies=policies
    )
    evictions = plan(snapshot, NOW).evictions
    if case.want is None:
        assert evictions == ()
    else:
        assert [(e.gpr_id, e.victims, e.automatic) for e in evictions] == [(1, case.want, case.mode == "auto")]


# Nodes a request avoids (they failed its pre-checks): never planned there, others unaffected.


def placed(snapshot: Snapshot, **options) -> dict[int, tuple[datetime | None, tuple[str, ...]]]:
    estimates = plan(snapshot, NOW, **options).estimates
    return {i: (e.start, e.placement.nodes if e.placement else ()) for i, e in estimates.items()}


def avoiding(request: Request, *keys: tuple[str, str]) -> Request:
    return dataclasses.replace(request, avoid=frozenset(keys))


AVOID_CASES = {
    "goes to the other node, later, while the one behind takes the avoided node now": (
        snap(
            H1,
            H2,
            bookings=(booking(91, H2.gpus, until=1, slice="o"),),
            queue=(avoiding(req(1, gpus=8), ("c1", "h1")), req(2, gpus=8)),
            policies=SLICES,
        ),
        {1: (at(1), ("h2",)), 2: (NOW, ("h1",))},
    ),
    "a node of the same name on another cluster is not avoided": (
        snap(H1, node("h1", cluster="c2"), queue=(avoiding(req(1, gpus=8), ("c1", "h1")),), policies=SLICES),
        {1: (NOW, ("h1",))},
    ),
    "a multi-node request leaves the avoided node out": (
        snap(H1, H2, X1, node("h3"), queue=(avoiding(req(1, gpus=16), ("c1", "h2")),), policies=SLICES),
        {1: (NOW, ("h1", "h3"))},
    ),
    "avoiding every node it could use, it cannot be placed": (
        snap(H1, H2, queue=(avoiding(req(1, gpus=8), ("c1", "h1"), ("c1", "h2")),), policies=SLICES),
        {1: (None, ())},
    ),
}


@pytest.mark.parametrize("snapshot, want", AVOID_CASES.values(), ids=AVOID_CASES.keys())
def test_avoided_nodes(snapshot: Snapshot, want: dict):
    assert placed(snapshot) == want


@pytest.mark.parametrize("backfill", ["easy", "none"])
def test_the_baselines_avoid_nodes_too(backfill: str):
    snapshot, want = AVOID_CASES["a multi-node request leaves the avoided node out"]
    assert placed(snapshot, backfill=backfill) == want


def test_a_promise_on_an_avoided_node_is_dropped():
    """Admitted to h1 now, the request's nodes failed their pre-checks: back in the queue with
    its promise of h1 from the last plan, it is planned on h2 (free in an hour) instead."""
    queue = (req(1, gpus=8),)
    first_snapshot = snap(H1, H2, bookings=(booking(91, H2.gpus, until=1, slice="o"),), queue=queue, policies=SLICES)
    first = plan(first_snapshot, NOW)
    assert first.estimates[1].placement.nodes == ("h1",) and first.estimates[1].start == NOW
    moved = dataclasses.replace(first_snapshot, queue=(avoiding(queue[0], ("c1", "h1")),), previous=first.estimates)
    assert placed(moved) == {1: (at(1), ("h2",))}


def test_eviction_for_a_request_weighs_only_nodes_it_may_use():
    """The blocked top avoids h1: ending the low-priority GPR on h1 would not let it start,
    so the one on h2 is named, though h1's ends later."""
    bookings = (
        booking(91, H1.gpus, until=3, slice="o", priority=10),
        booking(92, H2.gpus, until=2, slice="o", priority=20),
    )
    top = avoiding(req(1, gpus=8, priority=250), ("c1", "h1"))
    policies = {**SLICES, "team": SlicePolicy(max_active_gprs=10, eviction="auto")}
    evictions = plan(snap(H1, H2, bookings=bookings, queue=(top,), policies=policies), NOW).evictions
    assert [(e.gpr_id, e.victims) for e in evictions] == [(1, (92,))]
