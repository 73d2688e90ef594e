"""Maintenance windows in the planner: nothing is planned across a node's maintenance, as rule tables
and as a hypothesis invariant over random queues and windows."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core import planner
from egs_hub.core.snapshot import Maintenance

from .builders import NOW, at, booking, gpus_of, node, req, snap

A = node("a", 8)
B = node("b", 8)


def under(*windows: Maintenance, **snapshot):
    return dataclasses.replace(snap(A, B, **snapshot), maintenance=tuple(windows))


def fix(name: str, start: float, end: float) -> Maintenance:
    return Maintenance("c1", name, at(start), at(end))


CASES = {
    # name: (maintenance windows, queued request fields, wanted (start in hours, node))
    "a short GPR fits before the maintenance": ((fix("a", 1, 3), fix("b", 1, 3)), {"gpus": 8, "hours": 1}, (0, "a")),
    "a long one waits until it is over": ((fix("a", 1, 3), fix("b", 1, 3)), {"gpus": 8, "hours": 2}, (3, "a")),
    "or takes the node without maintenance": ((fix("a", 1, 3),), {"gpus": 8, "hours": 2}, (0, "b")),
    "maintenance under way closes the node now": ((fix("a", -1, 2),), {"nodes": 2, "hours": 1}, (2, "a")),
    "an ended window closes nothing": ((fix("a", -3, -1), fix("b", -3, -1)), {"nodes": 2, "hours": 1}, (0, "a")),
}


@pytest.mark.parametrize(("windows", "asked", "want"), CASES.values(), ids=CASES.keys())
def test_nothing_is_planned_across_maintenance(windows, asked, want):
    plan = planner.plan(under(*windows, queue=[req(1, **asked)]), NOW)
    estimate = plan.estimates[1]
    assert (estimate.start, estimate.placement.nodes[0]) == (at(want[0]), want[1])


def test_wait_times_plan_around_it_too():
    snapshot = under(fix("a", 0.5, 4), fix("b", 0.5, 4))
    (option,) = planner.wait_times(snapshot, req(1, gpus=4, hours=1).spec, NOW)
    assert option.start == at(4)


def test_a_window_held_across_it_stays_and_the_rest_of_the_node_waits_for_the_end():
    held = booking(9, gpus_of(A, 0, 1), until=5, slice="other")
    closed_b = fix("b", 0, 9)
    plan = planner.plan(under(fix("a", 1, 3), closed_b, bookings=[held], queue=[req(1, gpus=6, hours=0.5)]), NOW)
    assert (plan.estimates[1].start, plan.estimates[1].placement.nodes) == (NOW, ("a",))  # before the maintenance
    plan = planner.plan(under(fix("a", 1, 3), closed_b, bookings=[held], queue=[req(1, gpus=6, hours=2)]), NOW)
    assert (plan.estimates[1].start, plan.estimates[1].placement.nodes) == (at(3), ("a",))  # after it, beside the held


hours = st.floats(min_value=-2, max_value=10, allow_nan=False).map(lambda h: round(h * 4) / 4)


@st.composite
def windows(draw):
    start = draw(hours)
    return fix(draw(st.sampled_from(["a", "b"])), start, start + draw(st.sampled_from([0.25, 1, 2, 5])))


@settings(max_examples=60, deadline=None)
@given(
    maintenance=st.lists(windows(), max_size=4),
    asks=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from([0.25, 0.5, 1, 3])), min_size=1, max_size=6),
)
def test_no_planned_window_overlaps_a_maintenance_of_its_nodes(maintenance, asks):
    queue = [req(i + 1, gpus=gpus, hours=h) for i, (gpus, h) in enumerate(asks)]
    plan = planner.plan(under(*maintenance, queue=queue), NOW)
    for estimate in plan.estimates.values():
        if estimate.start is None:
            continue
        for m in maintenance:
            if m.node in estimate.placement.nodes:
                assert not (estimate.start < m.end and estimate.end > m.start), (estimate, m)
    assert all(e.start is None or e.start >= NOW for e in plan.estimates.values())
