"""The priority queue: band, then fair share, then priority, then submission, then id; and the
multifactor order (a virtual submit time from fair share and size)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.model import Order
from egs_hub.core.queue import PriorityQueue, band, queue_key
from egs_hub.core.snapshot import Request

from .builders import req


@pytest.mark.parametrize(
    ("priority", "want_band"),
    [(1, 0), (100, 0), (101, 1), (200, 1), (201, 2), (300, 2)],
)
def test_band(priority: int, want_band: int):
    assert band(priority) == want_band


@pytest.mark.parametrize("priority", [0, 301])
def test_band_refuses_priorities_out_of_range(priority: int):
    with pytest.raises(ValueError, match=f"priority {priority} is outside 1-300"):
        band(priority)


@dataclass(frozen=True)
class OrderCase:
    requests: list[Request]
    factors: dict[str, float | tuple[float, float]]  # per slice: its factor in one project, or (project's, own)
    want: list[int]  # gpr ids in queue order

    @property
    def tree(self) -> dict[str, tuple[float, float]]:
        return {s: f if isinstance(f, tuple) else (1.0, f) for s, f in self.factors.items()}


ORDERS = {
    "higher priority first": OrderCase([req(1, priority=150), req(2, priority=160)], {}, want=[2, 1]),
    "band boundary 100/101 beats fair share": OrderCase(
        [req(1, priority=100, slice="a"), req(2, priority=101, slice="b")], {"a": 1.0, "b": 0.1}, want=[2, 1]
    ),
    "band boundary 200/201 beats fair share": OrderCase(
        [req(1, priority=200, slice="a"), req(2, priority=201, slice="b")], {"a": 1.0, "b": 0.1}, want=[2, 1]
    ),
    "fair share beats priority within a band": OrderCase(
        [req(1, priority=200, slice="a"), req(2, priority=101, slice="b")], {"a": 0.3, "b": 0.9}, want=[2, 1]
    ),
    "fair share beats priority within the low band": OrderCase(
        [req(1, priority=100, slice="a"), req(2, priority=1, slice="b")], {"a": 0.3, "b": 0.9}, want=[2, 1]
    ),
    "slices without a factor get 1.0": OrderCase(
        [req(1, priority=101, slice="a"), req(2, priority=200, slice="b")], {"b": 0.99}, want=[1, 2]
    ),
    "same priority and factor: earlier submission first": OrderCase(
        [req(1, submitted=-1), req(2, submitted=-2)], {}, want=[2, 1]
    ),
    "all else equal: lower id first": OrderCase([req(2, submitted=-1), req(1, submitted=-1)], {}, want=[1, 2]),
    "the project's factor before the slice's": OrderCase(
        [req(1, slice="a"), req(2, slice="b")], {"a": (0.4, 1.0), "b": (0.6, 0.1)}, want=[2, 1]
    ),
    "within a project, the slice's factor": OrderCase(
        [req(1, slice="a"), req(2, slice="b")], {"a": (0.5, 0.2), "b": (0.5, 0.3)}, want=[2, 1]
    ),
    "the band before the project's factor": OrderCase(
        [req(1, priority=201, slice="a"), req(2, priority=200, slice="b")],
        {"a": (0.1, 0.1), "b": (1.0, 1.0)},
        want=[1, 2],
    ),
}


@pytest.mark.parametrize("case", ORDERS.values(), ids=ORDERS.keys())
def test_order(case: OrderCase):
    queue = PriorityQueue(case.requests, case.tree)
    assert [r.gpr_id for r in queue] == case.want
    assert [queue.position(gpr_id) for gpr_id in case.want] == list(range(1, len(case.want) + 1))
    # the order is the one queue_key gives
    by_key = sorted(case.requests, key=lambda r: queue_key(r, case.tree.get(r.spec.slice, (1.0, 1.0))))
    assert [r.gpr_id for r in by_key] == case.want


def test_change_priority_moves_the_request():
    queue = PriorityQueue([req(1, priority=150), req(2, priority=120), req(3, priority=50)])
    changed = queue.change_priority(3, 250)  # an admin moves GPR 3 to the top
    assert changed.spec.priority == 250 and changed.gpr_id == 3
    assert [r.gpr_id for r in queue] == [3, 1, 2]
    queue.change_priority(1, 10)
    assert [r.gpr_id for r in queue] == [3, 2, 1]
    assert queue.position(1) == 3


def test_position_of_a_key_not_in_the_queue():
    queue = PriorityQueue([req(1, priority=250), req(2, priority=150), req(3, priority=50)])
    assert queue.position_of(queue.key(req(9, priority=300))) == 1
    assert queue.position_of(queue.key(req(9, priority=150))) == 3  # behind 2: submitted later
    assert queue.position_of(queue.key(req(9, priority=10))) == 4
    assert len(queue) == 3  # nothing pushed


def test_remove_membership_and_length():
    queue = PriorityQueue([req(1), req(2)])
    assert 1 in queue and 3 not in queue and len(queue) == 2
    assert queue.remove(1) == req(1)
    assert 1 not in queue and len(queue) == 1
    assert [r.gpr_id for r in queue] == [2]


def test_errors_name_the_gpr():
    queue = PriorityQueue([req(1)])
    with pytest.raises(ValueError, match="GPR 1 is already in the queue"):
        queue.push(req(1, priority=5))
    for call in (queue.remove, queue.position, lambda i: queue.change_priority(i, 5)):
        with pytest.raises(KeyError, match="GPR 9 is not in the queue"):
            call(9)
    with pytest.raises(ValueError, match="priority 301 is outside"):
        queue.change_priority(1, 301)
    assert list(queue) == [req(1)]  # unchanged by the refused calls


FACTORS = {"a": (1.0, 1.0), "b": (1.0, 0.5), "c": (0.5, 1.0)}
IDS = st.integers(min_value=1, max_value=12)
PRIORITIES = st.sampled_from([1, 50, 100, 101, 150, 200, 201, 300])
OPS = st.one_of(
    st.tuples(
        st.just("push"),
        IDS,
        PRIORITIES,
        st.sampled_from([*FACTORS, "d"]),
        st.integers(min_value=-3, max_value=0),
    ),
    st.tuples(st.just("remove"), IDS),
    st.tuples(st.just("change"), IDS, PRIORITIES),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_queue_matches_a_sorted_list(ops):
    """After any push/remove/change_priority sequence, the queue is its requests sorted by
    queue_key, positions agree, and absent or duplicate ids raise without changing anything."""
    queue = PriorityQueue(factors=FACTORS)
    held: dict[int, Request] = {}
    for op, gpr_id, *args in ops:
        if op == "push":
            priority, slice_, submitted = args
            request = req(gpr_id, priority=priority, slice=slice_, submitted=submitted)
            if gpr_id in held:
                with pytest.raises(ValueError):
                    queue.push(request)
            else:
                queue.push(request)
                held[gpr_id] = request
        elif gpr_id not in held:
            with pytest.raises(KeyError):
                if op == "remove":
                    queue.remove(gpr_id)
                else:
                    queue.change_priority(gpr_id, *args)
        elif op == "remove":
            assert queue.remove(gpr_id) == held.pop(gpr_id)
        else:
            held[gpr_id] = queue.change_priority(gpr_id, *args)
            assert held[gpr_id].spec.priority == args[0]
        want = sorted(held.values(), key=lambda r: queue_key(r, FACTORS.get(r.spec.slice, (1.0, 1.0))))
        assert list(queue) == want
        assert len(queue) == len(want)
        assert [queue.position(r.gpr_id) for r in want] == list(range(1, len(want) + 1))
        assert all(queue.position_of(queue.key(r)) == i for i, r in enumerate(want, 1))


# The multifactor order (queue.Order): a virtual submit time per request.

FS_S = 3600.0  # a tree factor of 1 is worth an hour of waiting
SIZE_S = 600.0  # ten minutes later per GPU-hour


def _penalty(request: Request) -> float:
    return SIZE_S * (request.spec.gpus or 0) * request.spec.duration.total_seconds() / 3600


requests_in_one_band = st.lists(
    st.builds(
        lambda i, submitted, gpus, hours, slice_: req(i, submitted=submitted, gpus=gpus, hours=hours, slice=slice_),
        st.just(0),
        st.floats(-48, 0, allow_nan=False),
        st.integers(1, 16),
        st.floats(0.1, 72, allow_nan=False),
        st.sampled_from(["a", "b", "c"]),
    ),
    min_size=2,
    max_size=12,
).map(lambda rs: [Request(i + 1, r.spec, r.submitted_at) for i, r in enumerate(rs)])
tree_factors = st.fixed_dictionaries(
    {s: st.tuples(st.floats(0.01, 1.0), st.floats(0.01, 1.0)) for s in ("a", "b", "c")}
)


@settings(max_examples=200, deadline=None)
@given(requests=requests_in_one_band, factors=tree_factors)
def test_a_request_is_overtaken_only_by_requests_submitted_within_its_bound(requests, factors):
    """Nothing starves: in the multifactor order a request goes behind one submitted later only when
    that one was submitted less than ``fair_share_s`` plus its own size penalty after it."""
    order = Order(fair_share_s=FS_S, size_s_per_gpu_hour=SIZE_S)
    queue = PriorityQueue(requests, factors, order, lambda spec: spec.gpus)
    served = list(queue)
    for k, request in enumerate(served):
        for ahead in served[:k]:
            late = (ahead.submitted_at - request.submitted_at).total_seconds()
            assert late < FS_S + _penalty(request) + 1e-6


@settings(max_examples=200, deadline=None)
@given(requests=requests_in_one_band, factors=tree_factors)
def test_the_multifactor_order_is_by_virtual_submit_time(requests, factors):
    order = Order(fair_share_s=FS_S, size_s_per_gpu_hour=SIZE_S)

    def virtual(r: Request) -> tuple[float, int]:
        project, own = factors[r.spec.slice]
        return r.submitted_at.timestamp() + _penalty(r) - FS_S * (project + own) / 2, r.gpr_id

    queue = PriorityQueue(requests, factors, order, lambda spec: spec.gpus)
    assert [r.gpr_id for r in queue] == [r.gpr_id for r in sorted(requests, key=virtual)]


def test_shortest_first_with_aging():
    """Same slice: the smaller request goes first unless the bigger waited longer than the
    difference in their size penalties (8 GPU-hours against 1: 70 minutes at 600 s a GPU-hour)."""
    order = Order(size_s_per_gpu_hour=SIZE_S)
    big = req(1, submitted=-1, gpus=8, hours=1)
    small = req(2, submitted=0, gpus=1, hours=1)
    assert [r.gpr_id for r in PriorityQueue([big, small], order=order)] == [2, 1]
    older = req(1, submitted=-1.2, gpus=8, hours=1)
    assert [r.gpr_id for r in PriorityQueue([older, small], order=order)] == [1, 2]
    # the default order: submit time only, whatever the size
    assert [r.gpr_id for r in PriorityQueue([big, small])] == [1, 2]


def test_the_multifactor_order_keeps_bands_and_priority_first():
    """Fair share and size weigh against waiting, never against a higher band or priority."""
    order = Order(fair_share_s=FS_S, size_s_per_gpu_hour=SIZE_S)
    factors = {"light": (1.0, 1.0), "heavy": (0.01, 0.01)}
    requests = [
        req(1, submitted=-5, gpus=1, slice="light", priority=50),
        req(2, submitted=0, gpus=16, hours=48, slice="heavy", priority=150),
        req(3, submitted=0, gpus=1, slice="light", priority=120),
        req(4, submitted=0, gpus=1, slice="heavy", priority=250),
    ]
    assert [r.gpr_id for r in PriorityQueue(requests, factors, order)] == [4, 2, 3, 1]


def test_with_no_fair_share_weight_fair_share_still_comes_first():
    factors = {"light": (1.0, 1.0), "heavy": (0.5, 0.5)}
    requests = [req(1, submitted=-10, gpus=1, slice="heavy"), req(2, submitted=0, gpus=64, hours=24, slice="light")]
    order = Order(size_s_per_gpu_hour=SIZE_S)
    assert [r.gpr_id for r in PriorityQueue(requests, factors, order)] == [2, 1]


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"fair_share_s": -1.0}, "fair_share_s"),
        ({"fair_share_s": float("inf")}, "fair_share_s"),
        ({"size_s_per_gpu_hour": float("nan")}, "size_s_per_gpu_hour"),
        ({"size_s_per_gpu_hour": -600.0}, "size_s_per_gpu_hour"),
    ],
)
def test_an_order_with_a_bad_weight_is_refused_naming_it(fields, name):
    with pytest.raises(ValueError, match=f"queue order: {name} must be a finite number of seconds >= 0"):
        Order(**fields)
