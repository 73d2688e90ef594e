"""Whole nodes (``Node.whole``, Kubernetes): one GPR at a time per node, whatever it asked for.

Hand-checked cases on 8-GPU H100 nodes (times in hours from NOW), then a property
over random inventories that mix whole and per-GPU nodes: no two windows on a
whole node overlap in time, across two passes (the second keeps the first's promises).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.model import GPRSpec, Node, SlicePolicy
from egs_hub.core.planner import JUST_AFTER, plan
from egs_hub.core.snapshot import Booking, Plan, Request, Snapshot

from .builders import NOW, at, booking, gpus_of, node, req, snap


def whole(name: str, gpus: int = 8, **fields) -> Node:
    return dataclasses.replace(node(name, gpus, **fields), whole=True)


K1, K2 = whole("k1"), whole("k2")
L1 = node("l1")
OPEN = SlicePolicy(max_active_gprs=10)
SLICES = {"a": OPEN, "b": OPEN, "team": OPEN}


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    bookings: tuple[Booking, ...] = ()
    queue: tuple[Request, ...] = ()
    unhealthy: frozenset[str] = frozenset()
    want_starts: dict[int, datetime | None] = field(default_factory=dict)  # GPR id -> planned start
    want_nodes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # GPR id -> planned nodes
    want_gpus: dict[int, int] = field(default_factory=dict)  # admitted now: how many exact GPUs


CASES = {
    "a 2-GPU GPR holds the whole node: the next waits for its end": Case(
        nodes=(K1,),
        bookings=(booking(90, gpus_of(K1, 0, 1), until=1, slice="a"),),
        queue=(req(1, gpus=2, slice="b"),),
        want_starts={1: at(1)},
    ),
    "the same on a per-GPU node: it starts now beside it": Case(
        nodes=(L1,),
        bookings=(booking(90, gpus_of(L1, 0, 1), until=1, slice="a"),),
        queue=(req(1, gpus=6, slice="b"),),
        want_starts={1: NOW},
    ),
    "it goes to the whole node that is free": Case(
        nodes=(K1, K2),
        bookings=(booking(90, gpus_of(K1, 0), until=1, slice="a"),),
        queue=(req(1, gpus=1, slice="b"),),
        want_starts={1: NOW},
        want_nodes={1: ("k2",)},
        want_gpus={1: 1},
    ),
    "two small GPRs on one whole node run one after the other": Case(
        nodes=(K1,),
        queue=(req(1, gpus=2, slice="a"), req(2, gpus=2, slice="b")),
        want_starts={1: NOW, 2: at(1)},
        want_gpus={1: 2},
    ),
    "two small GPRs on two whole nodes run side by side": Case(
        nodes=(K1, K2),
        queue=(req(1, gpus=2, slice="a"), req(2, gpus=2, slice="b")),
        want_starts={1: NOW, 2: NOW},
        want_nodes={1: ("k1",), 2: ("k2",)},
    ),
    "a GPR over one node takes both whole, the last one partly used": Case(
        nodes=(K1, K2),
        queue=(req(1, gpus=10, slice="a"), req(2, gpus=1, slice="b")),
        want_starts={1: NOW, 2: at(1)},
        want_gpus={1: 10},
    ),
    "an unhealthy GPU does not open the node to a second GPR": Case(
        nodes=(K1,),
        bookings=(booking(90, gpus_of(K1, 1, 2), until=2, slice="a"),),
        queue=(req(1, gpus=1, slice="b"),),
        unhealthy=frozenset(gpus_of(K1, 0)),
        want_starts={1: at(2)},
    ),
    "a later GPR backfills the other whole node, not the held one": Case(
        nodes=(K1, K2),
        bookings=(booking(90, gpus_of(K1, 0, 1, 2, 3), until=3, slice="a"),),
        queue=(req(1, gpus=8, slice="b", hours=2), req(2, gpus=4, slice="a", hours=1)),
        want_starts={1: NOW, 2: at(2)},
        want_nodes={1: ("k2",)},
    ),
    "a whole node and a per-GPU node of one cluster: the GPR fills the per-GPU node": Case(
        nodes=(K1, L1),
        bookings=(booking(90, gpus_of(L1, 0, 1, 2, 3), until=1, slice="a"),),
        queue=(req(1, gpus=4, slice="b"),),
        want_starts={1: NOW},
        want_nodes={1: ("l1",)},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_whole_nodes(case: Case):
    snapshot = snap(
        *case.nodes,
        bookings=case.bookings,
        queue=case.queue,
        policies=SLICES,
        unhealthy=case.unhealthy,
    )
    estimates = plan(snapshot, NOW).estimates
    assert {gpr_id: estimates[gpr_id].start for gpr_id in case.want_starts} == case.want_starts
    assert {gpr_id: estimates[gpr_id].placement.nodes for gpr_id in case.want_nodes} == case.want_nodes
    assert {gpr_id: len(estimates[gpr_id].placement.gpus) for gpr_id in case.want_gpus} == case.want_gpus


def test_kept_promise_on_a_whole_node_stays_alone():
    """Second pass: the promise of the GPR waiting for the node is kept, and a newcomer does
    not slip into the node's idle GPUs beside the booking."""
    first = snap(K1, bookings=[booking(90, gpus_of(K1, 0), until=1, slice="a")], queue=[req(1, gpus=2, slice="b")])
    first = dataclasses.replace(first, policies=SLICES)
    promised = plan(first, NOW).estimates
    second = dataclasses.replace(first, queue=(*first.queue, req(2, gpus=1, slice="a", hours=0.5)), previous=promised)
    estimates = plan(second, NOW).estimates
    assert estimates[1].start == at(1)
    assert estimates[2].start == at(2)


# The property: random inventories of whole and per-GPU nodes.

HALF_HOURS = st.integers(min_value=-4, max_value=6).map(lambda n: at(n / 2))


@st.composite
def snapshots(draw) -> Snapshot:
    inventory = []
    for i in range(draw(st.integers(min_value=1, max_value=4))):
        width = draw(st.sampled_from([2, 4, 8]))
        made = node(f"n{i}", width, cluster=draw(st.sampled_from(["c1", "c2"])))
        inventory.append(dataclasses.replace(made, whole=draw(st.booleans().map(lambda b: b or draw(st.booleans())))))
    bookings = []
    free = {n.name: list(n.gpus) for n in inventory}
    for gpr_id in range(100, 100 + draw(st.integers(min_value=0, max_value=3))):
        name = draw(st.sampled_from(sorted(free)))
        target = next(n for n in inventory if n.name == name)
        if not free[name] or (target.whole and len(free[name]) < len(target.gpus)):
            continue  # a whole node holds one GPR
        count = draw(st.integers(min_value=1, max_value=len(free[name])))
        taken, free[name] = tuple(free[name][:count]), free[name][count:]
        start = draw(st.integers(min_value=-4, max_value=0).map(lambda n: at(n / 2)))
        end = start + timedelta(minutes=30 * draw(st.integers(min_value=1, max_value=8)))
        bookings.append(Booking(gpr_id, draw(st.sampled_from(sorted(SLICES))), taken, start, end, draw(st.booleans())))
    queue = tuple(
        Request(
            gpr_id,
            GPRSpec(
                slice=draw(st.sampled_from(sorted(SLICES))),
                duration=timedelta(minutes=30 * draw(st.integers(min_value=1, max_value=4))),
                gpus=draw(st.integers(min_value=1, max_value=10)),
                priority=draw(st.sampled_from([50, 150, 250])),
                cluster=draw(st.sampled_from([None, "c1", "c2"])),
                start_after=draw(st.none() | HALF_HOURS),
            ),
            draw(HALF_HOURS.filter(lambda t: t <= NOW)),
        )
        for gpr_id in range(1, 1 + draw(st.integers(min_value=0, max_value=6)))
    )
    unhealthy = draw(st.lists(st.sampled_from([g for n in inventory for g in n.gpus]), max_size=2, unique=True))
    return Snapshot(
        nodes=tuple(inventory),
        bookings=tuple(bookings),
        queue=queue,
        policies=SLICES,
        unhealthy_gpus=frozenset(unhealthy),
    )


def node_windows(snapshot: Snapshot, planned: Plan) -> dict[str, list[tuple[int, datetime, datetime]]]:
    """(GPR id, start, end) per node of every booking and every placed estimate."""
    node_of = {g: n.name for n in snapshot.nodes for g in n.gpus}
    found: dict[str, list[tuple[int, datetime, datetime]]] = {n.name: [] for n in snapshot.nodes}
    for b in snapshot.bookings:
        held = NOW + JUST_AFTER if b.releasing else max(b.end, NOW + JUST_AFTER)
        for name in {node_of[g] for g in b.gpus}:
            found[name].append((b.gpr_id, NOW, held))
    for e in planned.estimates.values():
        if e.start is not None:
            for name in e.placement.nodes:
                found[name].append((e.gpr_id, e.start, e.end))
    return found


@settings(max_examples=200, deadline=None)
@given(snapshots())
def test_no_two_gprs_overlap_on_a_whole_node(snapshot: Snapshot):
    first = plan(snapshot, NOW)
    second = plan(dataclasses.replace(snapshot, previous=first.estimates), NOW)
    for planned in (first, second):
        per_node = node_windows(snapshot, planned)
        for n in snapshot.nodes:
            if not n.whole:
                continue
            spans = sorted(per_node[n.name], key=lambda w: w[1])
            for (a, _, a_end), (b, b_start, _) in itertools.pairwise(spans):
                assert a_end <= b_start, (n.name, a, b, spans)
        for admit in planned.admits:
            assert len(admit.placement.gpus) == admit.placement.count  # the GPUs asked, not the node's
