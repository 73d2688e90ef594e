"""Dynamic node pools (core/node_pools.py): the joining nodes the planner counts, when a pool is asked to
grow and which idle nodes it gives back, as rule tables; and as hypothesis invariants over random queues,
that nothing is admitted onto a node that has not joined and nothing starts on it before it can join."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core import planner
from egs_hub.core.node_pools import (
    NodePool,
    PoolNode,
    PoolState,
    growth,
    joining_nodes,
    planned_nodes,
    to_give_back,
)

from .builders import NOW, at, booking, gpus_of, node, req, shape, snap

DELAY = timedelta(minutes=10)
POOL = NodePool("c1", "h100", shape(), 0, 3, DELAY, timedelta(minutes=30))
A = node("a", 8)


NOTHING_ASKED = PoolState()


def joining(state: PoolState = NOTHING_ASKED, joined: int = 0, pool: NodePool = POOL):
    return joining_nodes(pool, state, joined, NOW)


def test_joining_nodes_are_the_room_left_closed_until_the_delay():
    nodes = joining(joined=1)
    assert [(n.name, n.joins_at, n.pool, n.whole) for n in nodes] == [
        ("h100+1", NOW + DELAY, "h100", True),
        ("h100+2", NOW + DELAY, "h100", True),
    ]
    assert nodes[0].gpus == tuple(f"c1/h100+1/gpu{i}" for i in range(8))
    assert joining(joined=3) == () and joining(joined=5) == ()


JOINS = {
    # name: (state, joined, wanted joins_at of each joining node, in minutes from NOW)
    "none asked: all at the delay": (PoolState(), 0, [10, 10, 10]),
    "asked 4 min ago: coming at 6, the rest at 10": (PoolState(2, NOW - timedelta(minutes=4)), 0, [6, 6, 10]),
    "one of two asked has joined": (PoolState(2, NOW - timedelta(minutes=4)), 1, [6, 10]),
    "late: expected a minute from now": (PoolState(1, NOW - timedelta(minutes=30)), 0, [1, 10, 10]),
    "after a failed ask: the delay from the retry": (PoolState(0, None, NOW + timedelta(minutes=5)), 0, [15, 15, 15]),
}


@pytest.mark.parametrize(("state", "joined", "want"), JOINS.values(), ids=JOINS.keys())
def test_when_joining_nodes_join(state, joined, want):
    assert [(n.joins_at - NOW) / timedelta(minutes=1) for n in joining(state, joined)] == want


GROWTH = {
    # name: (state, joined, planned (node, start in minutes), wanted growth)
    "nothing planned on it": (PoolState(), 0, [("a", 0)], 0),
    "a window as soon as it can join": (PoolState(), 0, [("h100+1", 10)], 1),
    "two nodes of a window": (PoolState(), 0, [("h100+1", 10), ("h100+2", 10)], 2),
    "a window far later does not ask yet": (PoolState(), 0, [("h100+1", 120)], 0),
    "a node already coming is not asked again": (PoolState(1, NOW), 0, [("h100+1", 10)], 0),
    "the next one is": (PoolState(1, NOW), 0, [("h100+1", 10), ("h100+2", 10)], 1),
    "after a failed ask, nothing until the retry": (
        PoolState(0, None, NOW + timedelta(minutes=1)),
        0,
        [("h100+1", 11)],
        0,
    ),
}


@pytest.mark.parametrize(("state", "joined", "planned", "want"), GROWTH.values(), ids=GROWTH.keys())
def test_growth(state, joined, planned, want):
    planned = [(name, NOW + timedelta(minutes=m)) for name, m in planned]
    assert growth(POOL, state, joined, planned, NOW) == want


def test_a_pool_below_its_minimum_grows_to_it_and_never_past_its_maximum():
    pool = NodePool("c1", "h100", shape(), 2, 3, DELAY, DELAY)
    assert growth(pool, PoolState(), 0, [], NOW) == 2
    assert growth(pool, PoolState(1, NOW), 0, [], NOW) == 1
    assert growth(pool, PoolState(), 0, [(f"h100+{k}", NOW + DELAY) for k in (1, 2, 3, 4)], NOW) == 3


IDLE = timedelta(minutes=30)
GIVE_BACK = {
    # name: (min nodes, nodes (name, idle minutes or None: held), planned (node, start in minutes), wanted)
    "idle long enough": (0, [("n1", 31), ("n2", 5)], [], ("n1",)),
    "longest idle first, down to the minimum": (1, [("n1", 40), ("n2", 60), ("n3", None)], [], ("n2", "n1")),
    "the minimum stays": (2, [("n1", 40), ("n2", 60)], [], ()),
    "a held node stays": (0, [("n1", None)], [], ()),
    "a window planned soon keeps it": (0, [("n1", 40)], [("n1", 5)], ()),
    "one planned as a new node could join keeps it": (0, [("n1", 40)], [("n1", 10)], ()),
    "one planned later than a new node could join does not": (0, [("n1", 40)], [("n1", 60)], ("n1",)),
}


@pytest.mark.parametrize(("minimum", "nodes", "planned", "want"), GIVE_BACK.values(), ids=GIVE_BACK.keys())
def test_to_give_back(minimum, nodes, planned, want):
    pool = NodePool("c1", "h100", shape(), minimum, 4, DELAY, IDLE)
    members = [PoolNode(name, None if m is None else NOW - timedelta(minutes=m)) for name, m in nodes]
    planned = [(name, NOW + timedelta(minutes=m)) for name, m in planned]
    assert to_give_back(pool, members, planned, NOW) == want


def with_pool(*nodes, state=NOTHING_ASKED, joined=0, **fields):
    return snap(*nodes, *joining(state, joined), **fields)


def test_a_request_that_would_wait_hours_is_planned_on_a_joining_node_after_the_delay():
    busy = booking(9, gpus_of(A), until=5, slice="other")
    plan = planner.plan(with_pool(A, bookings=[busy], queue=[req(1, gpus=8, hours=1)]), NOW)
    estimate = plan.estimates[1]
    assert (estimate.start, estimate.placement.nodes) == (NOW + DELAY, ("h100+1",))
    assert plan.admits == ()
    assert growth(POOL, PoolState(), 0, planned_nodes(plan.estimates.values(), "c1"), NOW) == 1


def test_a_free_node_is_taken_now_and_nothing_is_asked():
    plan = planner.plan(with_pool(A, queue=[req(1, gpus=8, hours=1)]), NOW)
    assert [e.placement.nodes for e in plan.admits] == [("a",)]
    assert growth(POOL, PoolState(), 0, planned_nodes(plan.estimates.values(), "c1"), NOW) == 0


def test_a_short_wait_on_a_real_node_beats_the_delay():
    busy = booking(9, gpus_of(A), until=0.1, slice="other")  # free in 6 minutes
    plan = planner.plan(with_pool(A, bookings=[busy], queue=[req(1, gpus=8, hours=1)]), NOW)
    assert (plan.estimates[1].start, plan.estimates[1].placement.nodes) == (at(0.1), ("a",))


def test_at_equal_starts_the_nodes_that_are_there_are_taken_first():
    x, y = node("x", 8), node("y", 8)  # named after the joining nodes
    busy = [booking(8, gpus_of(x), until=1, slice="s"), booking(9, gpus_of(y), until=1, slice="t")]
    small = NodePool("c1", "h100", shape(), 0, 2, DELAY, DELAY)
    snapshot = snap(x, y, *joining(pool=small), bookings=busy, queue=[req(1, nodes=3, hours=1)])
    estimate = planner.plan(snapshot, NOW).estimates[1]
    assert (estimate.start, sorted(estimate.placement.nodes)) == (at(1), ["h100+1", "x", "y"])


def test_wait_times_count_the_pool_and_servability_its_maximum():
    busy = booking(9, gpus_of(A), until=5, slice="other")
    snapshot = with_pool(A, bookings=[busy])
    (option,) = planner.wait_times(snapshot, req(1, nodes=3, hours=1).spec, NOW)
    assert option.start == NOW + DELAY
    assert planner.unservable_reason(req(1, nodes=4, hours=1).spec, snapshot.nodes, frozenset()) is None
    assert planner.unservable_reason(req(1, nodes=5, hours=1).spec, snapshot.nodes, frozenset()) is not None


asks = st.lists(
    st.tuples(st.sampled_from([1, 4, 8, 16]), st.sampled_from([0.1, 0.5, 2]), st.sampled_from([0, 0.05, 1])),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(
    asks=asks,
    busy_until=st.sampled_from([0.05, 1, 6]),
    state=st.sampled_from([PoolState(), PoolState(1, NOW - timedelta(minutes=4)), PoolState(3, NOW)]),
)
def test_nothing_starts_on_a_node_before_it_can_join(asks, busy_until, state):
    queue = [req(i + 1, gpus=g, hours=h, submitted=-s) for i, (g, h, s) in enumerate(asks)]
    snapshot = with_pool(A, state=state, bookings=[booking(99, gpus_of(A), until=busy_until)], queue=queue)
    joins = {n.name: n.joins_at for n in snapshot.nodes if n.joins_at is not None}
    plan = planner.plan(snapshot, NOW)
    for estimate in plan.estimates.values():
        for name in estimate.placement.nodes:
            assert estimate.start >= joins.get(name, NOW), (estimate, joins)
    assert not any(set(e.placement.nodes) & set(joins) for e in plan.admits)
    asked = growth(POOL, state, 0, planned_nodes(plan.estimates.values(), "c1"), NOW)
    assert 0 <= asked <= POOL.max_nodes - min(state.target, POOL.max_nodes)
