"""plan(): admits, estimates, ends and approvals, as one table of named cases."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from egs_hub.core.model import Node, Order, SlicePolicy
from egs_hub.core.planner import plan
from egs_hub.core.snapshot import Booking, Request

from .builders import NOW, at, booking, gpus_of, node, req, snap

H1, H2, H3 = node("h1"), node("h2"), node("h3")  # H100-80GB x8 in c1
A1 = node("a1", 4, "A100")  # A100-80GB x4 in c1
L1 = node("l1", 4, "L4", memory_gb=24)  # L4-24GB x4 in c1
C2 = node("x1", 8, cluster="c2")  # H100-80GB x8 in c2
JUST_AFTER_NOW = NOW + timedelta(microseconds=1)  # GPUs held at now are free right after


@dataclass(frozen=True)
class PlanCase:
    nodes: tuple[Node, ...]
    queue: tuple[Request, ...] = ()
    bookings: tuple[Booking, ...] = ()
    pending: tuple[Request, ...] = ()
    policies: dict[str, SlicePolicy] = field(default_factory=dict)
    unhealthy: frozenset[str] = frozenset()
    # every queued GPR's estimated start; None when the inventory can never serve it
    want_starts: dict[int, datetime | None] = field(default_factory=dict)
    want_nodes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # placement nodes of these GPRs
    want_gpus: dict[int, tuple[str, ...]] = field(default_factory=dict)  # exact GPUs of these GPRs
    want_ends: tuple[int, ...] = ()  # bookings whose window is over, in end order
    want_approvals: tuple[int, ...] = ()  # pending GPRs, in queue order


CASES = {
    "admits on free GPUs now": PlanCase(
        (H1,), queue=(req(1, gpus=2),), want_starts={1: NOW}, want_gpus={1: gpus_of(H1, 0, 1)}
    ),
    "best fit: the node with the fewest free GPUs that has enough": PlanCase(
        (H1, H2),
        queue=(req(1, gpus=2),),
        bookings=(booking(90, gpus_of(H2, 0, 1, 2, 3, 4, 5), slice="o"),),
        want_starts={1: NOW},
        want_gpus={1: gpus_of(H2, 6, 7)},
    ),
    "best fit ties go to the first node": PlanCase(
        (H2, H1), queue=(req(1, gpus=3),), want_starts={1: NOW}, want_nodes={1: ("h1",)}
    ),
    "best fit prefers a smaller node": PlanCase(
        (H1, A1), queue=(req(1, gpus=4),), want_starts={1: NOW}, want_nodes={1: ("a1",)}
    ),
    "never splits what fits one node": PlanCase(
        (H1, H2),
        queue=(req(1, gpus=6),),
        bookings=(
            booking(90, gpus_of(H1, 0, 1, 2, 3), until=2, slice="o"),
            booking(91, gpus_of(H2, 0, 1, 2, 3), until=3, slice="o"),
        ),
        want_starts={1: at(2)},
        want_gpus={1: gpus_of(H1, 0, 1, 2, 3, 4, 5)},
    ),
    "multi-node gpus take whole free nodes and the remainder on the fullest node": PlanCase(
        (H1, H2, H3),
        queue=(req(1, gpus=12),),
        bookings=(booking(90, gpus_of(H1, 0), slice="o"),),
        want_starts={1: NOW},
        want_nodes={1: ("h2", "h1")},
        want_gpus={1: H2.gpus + gpus_of(H1, 1, 2, 3, 4)},
    ),
    "multi-node gpus stay in one shape": PlanCase(
        (H1, node("a8", 8, "A100")), queue=(req(1, gpus=12),), want_starts={1: None}
    ),
    "multi-node gpus stay in one cluster": PlanCase((H1, C2), queue=(req(1, gpus=12),), want_starts={1: None}),
    "multi-node gpus need enough whole nodes of one shape": PlanCase(
        (H1, A1, node("a2", 4, "A100")), queue=(req(1, gpus=10),), want_starts={1: None}
    ),
    "gpus over one node's size span nodes of the small shape": PlanCase(
        (H1, A1, node("a2", 4, "A100")),
        queue=(req(1, gpus=6),),
        bookings=(booking(90, gpus_of(H1, 0, 1, 2), until=2, slice="o"),),
        want_starts={1: NOW},
        want_nodes={1: ("a1", "a2")},
    ),
    "nodes request takes whole free nodes": PlanCase(
        (H1, H2, H3),
        queue=(req(1, nodes=2),),
        bookings=(booking(90, gpus_of(H1, 7), slice="o"),),
        want_starts={1: NOW},
        want_nodes={1: ("h2", "h3")},
        want_gpus={1: H2.gpus + H3.gpus},
    ),
    "nodes request waits for a whole node": PlanCase(
        (H1,),
        queue=(req(1, nodes=1),),
        bookings=(booking(90, gpus_of(H1, 3), until=1.5, slice="o"),),
        want_starts={1: at(1.5)},
    ),
    "shape by model": PlanCase((A1, H1), queue=(req(1, shape="H100"),), want_starts={1: NOW}, want_nodes={1: ("h1",)}),
    "shape by GPU type": PlanCase(
        (A1, H1), queue=(req(1, shape="H100-80GB"),), want_starts={1: NOW}, want_nodes={1: ("h1",)}
    ),
    "shape by full name": PlanCase(
        (A1, H1), queue=(req(1, shape="H100-80GB x8"),), want_starts={1: NOW}, want_nodes={1: ("h1",)}
    ),
    "shape nobody offers": PlanCase((A1, H1), queue=(req(1, shape="B200"),), want_starts={1: None}),
    "cluster constraint": PlanCase(
        (A1, C2), queue=(req(1, cluster="c2"),), want_starts={1: NOW}, want_nodes={1: ("x1",)}
    ),
    "unschedulable node is skipped": PlanCase(
        (node("h0", schedulable=False), H1),
        queue=(req(1, gpus=8),),
        want_starts={1: NOW},
        want_nodes={1: ("h1",)},
    ),
    "only unschedulable nodes": PlanCase((node("h0", schedulable=False),), queue=(req(1),), want_starts={1: None}),
    "unhealthy GPU is skipped": PlanCase(
        (H1,),
        queue=(req(1, gpus=2),),
        unhealthy=frozenset(gpus_of(H1, 0)),
        want_starts={1: NOW},
        want_gpus={1: gpus_of(H1, 1, 2)},
    ),
    "a node with an unhealthy GPU is not whole": PlanCase(
        (H1,),
        queue=(req(1, nodes=1), req(2, gpus=8)),
        unhealthy=frozenset(gpus_of(H1, 5)),
        want_starts={1: None, 2: None},
    ),
    "higher priority first": PlanCase(
        (H1,),
        queue=(req(1, gpus=8, priority=50, slice="a"), req(2, gpus=8, priority=200, slice="b")),
        want_starts={2: NOW, 1: at(1)},
    ),
    "same priority: earlier submit first": PlanCase(
        (H1,),
        queue=(req(1, gpus=8, slice="a", submitted=-1), req(2, gpus=8, slice="b", submitted=-2)),
        want_starts={2: NOW, 1: at(1)},
    ),
    "same priority and submit: lower id first": PlanCase(
        (H1,),
        queue=(req(2, gpus=8, slice="a", submitted=-1), req(1, gpus=8, slice="b", submitted=-1)),
        want_starts={1: NOW, 2: at(1)},
    ),
    "queue fills the timeline in order": PlanCase(
        (H1,),
        queue=tuple(req(i, gpus=8, slice=f"s{i}", hours=2) for i in (1, 2, 3)),
        want_starts={1: NOW, 2: at(2), 3: at(4)},
    ),
    "high priority waits for the booking that frees its GPUs": PlanCase(
        (H1, A1),
        queue=(req(1, gpus=8, priority=300), req(2, gpus=2, priority=50, slice="b")),
        bookings=(booking(90, H1.gpus, until=3, slice="o"),),
        want_starts={1: at(3), 2: NOW},
        want_nodes={1: ("h1",), 2: ("a1",)},
    ),
    "lower priority does not take GPUs the higher one is waiting for": PlanCase(
        (H1,),
        queue=(req(1, gpus=8, priority=300), req(2, gpus=1, priority=50, slice="b", hours=2)),
        bookings=(booking(90, gpus_of(H1, 0), until=1, slice="o"),),
        want_starts={1: at(1), 2: at(2)},
    ),
    "short low priority fills the gap before a start_after": PlanCase(
        (H1,),
        queue=(req(1, gpus=8, priority=300, start_after=2), req(2, gpus=8, priority=50, slice="b", hours=2)),
        want_starts={1: at(2), 2: NOW},
    ),
    "start_after in the future": PlanCase((H1,), queue=(req(1, start_after=2.5),), want_starts={1: at(2.5)}),
    "start_after in the past": PlanCase((H1,), queue=(req(1, start_after=-1),), want_starts={1: NOW}),
    "start_after while the GPUs are booked": PlanCase(
        (H1,),
        queue=(req(1, gpus=8, start_after=1),),
        bookings=(booking(90, gpus_of(H1, 0), until=2, slice="o"),),
        want_starts={1: at(2)},
    ),
    "one active GPR per slice by default": PlanCase(
        (H1,), queue=(req(1, hours=2), req(2)), want_starts={1: NOW, 2: at(2)}
    ),
    "max_active_gprs 2": PlanCase(
        (H1,),
        queue=(req(1, hours=2), req(2), req(3)),
        policies={"team": SlicePolicy(max_active_gprs=2)},
        want_starts={1: NOW, 2: NOW, 3: at(1)},
    ),
    "a booking of the slice counts as active": PlanCase(
        (H1,), queue=(req(1),), bookings=(booking(90, gpus_of(H1, 0), until=1.5),), want_starts={1: at(1.5)}
    ),
    "other slices do not count": PlanCase(
        (H1,),
        queue=(req(1),),
        bookings=(booking(90, gpus_of(H1, 0), until=1.5, slice="o"),),
        want_starts={1: NOW},
    ),
    "max_gpus at every instant": PlanCase(
        (H1,),
        queue=(req(1, gpus=3, hours=2), req(2, gpus=2), req(3, gpus=1)),
        policies={"team": SlicePolicy(max_gpus=4, max_active_gprs=3)},
        want_starts={1: NOW, 2: at(2), 3: NOW},
    ),
    "over max_gpus runs while the slice holds nothing else": PlanCase(
        (H1,),
        queue=(req(1, gpus=6),),
        bookings=(booking(90, gpus_of(H1, 7), until=1),),
        policies={"team": SlicePolicy(max_gpus=4, max_active_gprs=5)},
        want_starts={1: at(1)},
    ),
    "nodes request takes the shape its slice's quota allows": PlanCase(
        (node("a8", 8, "A100"), node("h4", 4, "H100"), L1),  # in shape order: A100 x8 first
        queue=(req(1, nodes=1),),
        bookings=(booking(90, L1.gpus, until=2),),
        policies={"team": SlicePolicy(max_gpus=8, max_active_gprs=2)},
        want_starts={1: NOW},
        want_nodes={1: ("h4",)},
    ),
    "releasing booking frees its GPUs just after now": PlanCase(
        (H1,),
        queue=(req(1, gpus=8),),
        bookings=(booking(90, H1.gpus, until=5, slice="o", releasing=True),),
        want_starts={1: JUST_AFTER_NOW},
    ),
    "a releasing booking on a cordoned node frees its slice's slot just after now": PlanCase(
        (H1, node("h9", schedulable=False)),
        queue=(req(1),),
        bookings=(booking(90, gpus_of(node("h9"), 0), until=5, releasing=True),),
        want_starts={1: JUST_AFTER_NOW},
    ),
    "overdue booking ends and frees its GPUs just after now": PlanCase(
        (H1,),
        queue=(req(1, gpus=8),),
        bookings=(booking(90, H1.gpus, until=-0.5, slice="o"),),
        want_starts={1: JUST_AFTER_NOW},
        want_ends=(90,),
    ),
    "ends: provisioned windows over by now, in end order": PlanCase(
        (H1,),
        bookings=(
            booking(91, gpus_of(H1, 0), since=-3, until=-1, slice="a"),
            booking(92, gpus_of(H1, 1), since=-3, until=-2, slice="b"),
            booking(93, gpus_of(H1, 2), since=-1, until=0, slice="c"),
            booking(94, gpus_of(H1, 3), since=-4, until=-3, slice="d", releasing=True),
            booking(95, gpus_of(H1, 4), until=1, slice="e"),
        ),
        want_ends=(92, 91, 93),
    ),
    "approvals in queue order, without estimates": PlanCase(
        (H1,),
        pending=(req(5, priority=50), req(6, priority=200, submitted=-1), req(7, priority=200, submitted=-2)),
        want_approvals=(7, 6, 5),
    ),
    "an unservable request blocks nobody": PlanCase(
        (H1,), queue=(req(1, gpus=16, priority=300), req(2, gpus=8, slice="b")), want_starts={1: None, 2: NOW}
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_plan(case: PlanCase):
    snapshot = snap(
        *case.nodes,
        bookings=case.bookings,
        queue=case.queue,
        pending=case.pending,
        policies=case.policies,
        unhealthy=case.unhealthy,
    )
    got = plan(snapshot, NOW)
    assert {gpr_id: e.start for gpr_id, e in got.estimates.items()} == case.want_starts
    by_position = sorted(got.estimates.values(), key=lambda e: e.position)
    assert [e.gpr_id for e in got.admits] == [e.gpr_id for e in by_position if e.start == NOW]
    assert [e.position for e in by_position] == list(range(1, len(case.queue) + 1))
    for gpr_id, nodes in case.want_nodes.items():
        assert got.estimates[gpr_id].placement.nodes == nodes, gpr_id
    for gpr_id, gpus in case.want_gpus.items():
        estimate = got.estimates[gpr_id]
        # Exact GPUs are chosen when a window starts; a later start names its nodes and count.
        assert estimate.placement.count == len(gpus), gpr_id
        assert estimate.placement.gpus == (gpus if estimate.start == NOW else ()), gpr_id
    for estimate in got.estimates.values():
        if estimate.start is None:
            assert (estimate.end, estimate.placement) == (None, None)
        else:
            assert (
                estimate.end
                == estimate.start + next(r for r in case.queue if r.gpr_id == estimate.gpr_id).spec.duration
            )
    assert got.ends == case.want_ends
    assert got.approvals == case.want_approvals


def test_a_request_for_whole_nodes_is_sized_by_the_gpus_it_would_hold():
    """Shortest first (queue.Order): one 8-GPU node for an hour is 8 GPU-hours, so at 600 s a
    GPU-hour a 1-GPU request submitted 6 minutes after it is served first; in the default order,
    by submit time."""
    busy = node("h1")
    snapshot = snap(
        busy,
        bookings=(booking(90, busy.gpus, until=1),),
        queue=(req(1, submitted=-0.1, nodes=1), req(2, submitted=0, gpus=1)),
    )
    by_size = plan(dataclasses.replace(snapshot, order=Order(size_s_per_gpu_hour=600)), NOW)
    assert [by_size.estimates[i].position for i in (1, 2)] == [2, 1]
    assert by_size.estimates[2].start == at(1) and by_size.estimates[1].start == at(2)
    by_submit = plan(snapshot, NOW)
    assert [by_submit.estimates[i].position for i in (1, 2)] == [1, 2]
