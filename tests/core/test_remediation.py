"""Failing GPUs in provisioned GPRs (core/remediation.py) and where the planner replaces a failed
node's GPUs (planner.replacement): rule tables, and a hypothesis invariant that a replacement never
takes a GPU someone holds or is planned to get before the window ends."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core import planner, remediation
from egs_hub.core.model import Status
from egs_hub.core.samples import GpuSample
from egs_hub.core.snapshot import Maintenance

from .builders import NOW, at, booking, gpr, gpus_of, node, req, snap

A, B, C = node("a", 8), node("b", 8), node("c", 4, "A100", memory_gb=40)


def sample(xid: int = 0, ecc: int | None = 0) -> GpuSample:
    return GpuSample(uuid="g0", time=NOW, xid=xid, ecc_errors=ecc)


@pytest.mark.parametrize(
    ("reading", "alerts", "why"),
    [
        (sample(xid=79), {"xid"}, "XID 79 (fallen off the bus)"),
        (sample(xid=48), {"xid"}, "XID 48 (double-bit ECC error)"),
        (sample(xid=31), {"xid"}, None),  # an application's memory fault: not the GPU's
        (sample(xid=79), set(), None),  # no longer alerting: over an hour ago
        (sample(ecc=2), {"ecc"}, "uncorrected ECC errors (2)"),
        (None, {"gpu-lost"}, "it stopped reporting (fallen off the bus or lost)"),
        (sample(), {"temperature", "power"}, None),  # hot is an alert, not a failure
    ],
)
def test_what_counts_as_a_failed_gpu(reading, alerts, why):
    assert remediation.failure(reading, frozenset(alerts)) == why


def test_failed_gpus_read_alerts_by_the_samples_uuid():
    real = GpuSample(uuid="GPU-real", time=NOW, xid=79)
    found = remediation.failed_gpus(["c/n/0", "c/n/1"], {"c/n/0": real}, {"GPU-real": frozenset({"xid"})})
    assert found == {"c/n/0": "XID 79 (fallen off the bus)"}


def provisioned(gpus: tuple[str, ...], *, until: float = 2, **spec_fields):
    nodes = tuple(dict.fromkeys(g.rsplit("-g", 1)[0] for g in gpus))
    made = gpr(Status.PROVISIONED, gpr_id=7, **spec_fields)
    return dataclasses.replace(made, bound_gpus=gpus, bound_nodes=nodes, window_end=at(until))


def test_a_swap_keeps_the_window_and_the_gpus_order():
    held = provisioned(gpus_of(A, 0, 1) + gpus_of(B, 0))
    swapped, event = remediation.replaced(held, gpus_of(A, 0, 1), gpus_of(C, 2, 3), "a", "c", "XID 79", NOW)
    assert swapped.bound_gpus == gpus_of(C, 2, 3) + gpus_of(B, 0) and swapped.bound_nodes == ("c", "b")
    assert swapped.window_end == held.window_end and swapped.status is Status.PROVISIONED
    assert [(r.failed_node, r.node, r.at) for r in swapped.replaced] == [("a", "c", NOW)]
    assert event.kind == "node-replaced" and event.reason.startswith("node a was replaced by c at ")
    assert "restart from your checkpoint" in event.reason and event.data["old_gpus"] == list(gpus_of(A, 0, 1))
    with pytest.raises(ValueError):
        remediation.replaced(held, gpus_of(C, 0), gpus_of(C, 1), "c", "b", "x", NOW)  # it does not hold C's


def replacement(snapshot, held, failed="a", count=None):
    current = planner.plan(snapshot, NOW)
    count = count if count is not None else sum(g.startswith(f"{failed}-") for g in held.bound_gpus)
    return planner.replacement(current, snapshot, held, ("c1", failed), count, NOW)


def test_a_free_node_of_the_same_shape_replaces_the_failed_one():
    held = provisioned(gpus_of(A, 0, 1))
    found = replacement(snap(A, B, C, bookings=[booking(7, gpus_of(A, 0, 1), until=2)]), held)
    assert (found.nodes, found.gpus, found.shape.name) == (("b",), gpus_of(B, 0, 1), "H100-80GB x8")


def test_gpus_held_or_unhealthy_are_not_taken():
    held = provisioned(gpus_of(A, 0, 1))
    others = booking(9, gpus_of(B, 0, 1, 2), until=5, slice="other")
    found = replacement(snap(A, B, bookings=[booking(7, gpus_of(A, 0, 1), until=2), others], unhealthy={"b-g3"}), held)
    assert found.gpus == gpus_of(B, 4, 5)


def test_no_promise_moves_for_it():
    # B is promised to a queued GPR from 1 h on: a replacement until 2 h would move that promise.
    held = provisioned(gpus_of(A, 0, 1))
    filler = booking(9, gpus_of(B, 0, 1, 2, 3, 4, 5, 6, 7), until=1, slice="other")
    queued = req(3, gpus=8, hours=4, slice="other")
    snapshot = snap(A, B, bookings=[booking(7, gpus_of(A, 0, 1), until=2), filler], queue=[queued])
    assert replacement(snapshot, held) is None
    assert replacement(snapshot, dataclasses.replace(held, window_end=at(0.5))) is None  # B is busy now


def test_none_when_no_node_of_the_shape_is_free_or_under_maintenance():
    held = provisioned(gpus_of(A, 0, 1))
    snapshot = snap(A, C, bookings=[booking(7, gpus_of(A, 0, 1), until=2)])
    assert replacement(snapshot, held) is None  # C is an A100
    closed = dataclasses.replace(
        snap(A, B, bookings=[booking(7, gpus_of(A, 0, 1), until=2)]),
        maintenance=(Maintenance("c1", "b", at(1), at(3)),),
    )
    assert replacement(closed, held) is None


def test_a_whole_node_gpr_takes_a_whole_node():
    held = provisioned(gpus_of(A), nodes=1)
    partly = booking(9, gpus_of(B, 0), until=5, slice="other")
    c2 = node("d", 8)
    found = replacement(snap(A, B, c2, bookings=[booking(7, gpus_of(A), until=2), partly]), held)
    assert found.nodes == ("d",) and found.gpus == gpus_of(c2)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("bde"), st.integers(1, 8), st.floats(0.1, 6)), max_size=6),
    st.lists(st.tuples(st.integers(1, 8), st.floats(0.5, 4)), max_size=4),
    st.integers(1, 8),
    st.floats(0.2, 5),
)
def test_a_replacement_never_takes_what_someone_holds_or_is_promised(held_elsewhere, queued, count, until):
    nodes = [A, node("b", 8), node("d", 8), node("e", 8)]
    by_name = {n.name: n for n in nodes}
    bookings = [booking(7, gpus_of(A, *range(count)), until=until)]
    taken: dict[str, int] = {}
    for i, (name, want, hours) in enumerate(held_elsewhere):
        start = taken.get(name, 0)
        if start + want > 8:
            continue
        bookings.append(booking(100 + i, gpus_of(by_name[name], *range(start, start + want)), until=hours, slice="o"))
        taken[name] = start + want
    queue = [req(200 + i, gpus=want, hours=hours, slice="o") for i, (want, hours) in enumerate(queued)]
    snapshot = snap(*nodes, bookings=bookings, queue=queue)
    held = provisioned(gpus_of(A, *range(count)), until=until)
    current = planner.plan(snapshot, NOW)
    found = planner.replacement(current, snapshot, held, ("c1", "a"), count, NOW)
    if found is None:
        return
    assert len(found.gpus) == count and len(found.nodes) == 1 and found.nodes[0] != "a"
    assert not set(found.gpus) & {g for b in bookings for g in b.gpus}
    end = held.window_end
    for estimate in current.estimates.values():  # nobody is planned on those nodes before the window ends
        if estimate.start is not None and estimate.start < end and found.nodes[0] in estimate.placement.nodes:
            planned = planner.plan(
                dataclasses.replace(snapshot, bookings=(*snapshot.bookings, booking(8, found.gpus, until=until))),
                NOW,
            )
            assert planned.estimates[estimate.gpr_id].start <= estimate.start + timedelta(seconds=1)
