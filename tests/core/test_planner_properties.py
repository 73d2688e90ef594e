"""Invariants of plan() and wait_times() over random inventories, bookings and queues."""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.model import FAIR_SHARE_FIRST, PRIORITY_DEFAULT, GPRSpec, Node, Order, Shape, SlicePolicy
from egs_hub.core.planner import JUST_AFTER, place_arrival, plan, unservable_reason, wait_times
from egs_hub.core.snapshot import Booking, Plan, Request, Snapshot

from . import builders
from .builders import NOW, at, check_wait_times_match_plan, shape

# MIG shapes (core/sharing.py): 2 H100s split into 7 1g.10gb each, an A100 into 2 3g.20gb; and shares
SHAPES = [
    shape("H100", 8),
    shape("H100", 4),
    shape("A100", 4),
    shape("L4", 2, memory_gb=24),
    Shape("H100", 80, 14, "1g.10gb"),
    Shape("A100", 40, 2, "3g.20gb"),
    Shape("H100", 80, 8, replicas=4),  # 2 H100s time-sliced into 4 shares each
]
SLICES = ["a", "b", "c"]
SHAPE_WANTS = [None, None, "H100", "H100-80GB x4", "A100", "L4-24GB", "B200", "H100-80GB 1g.10gb", "A100 3g.20gb"]
HALF_HOURS = st.integers(min_value=-6, max_value=8).map(lambda n: at(n / 2))


@st.composite
def nodes(draw) -> tuple[Node, ...]:
    made = []
    for i in range(draw(st.integers(min_value=1, max_value=5))):
        node_shape = draw(st.sampled_from(SHAPES))
        name = f"n{i}"
        made.append(
            Node(
                name=name,
                cluster=draw(st.sampled_from(["c1", "c1", "c2"])),
                shape=node_shape,
                gpus=tuple(f"{name}-g{g}" for g in range(node_shape.gpus_per_node)),
                schedulable=draw(st.booleans().map(lambda b: b or draw(st.booleans()))),  # mostly schedulable
            )
        )
    return tuple(made)


@st.composite
def specs(draw) -> GPRSpec:
    whole_nodes = draw(st.booleans().map(lambda b: b and draw(st.booleans())))  # a quarter ask for nodes
    share = None if whole_nodes else draw(st.sampled_from([None] * 6 + [0.25, 0.5]))  # a share of a shared GPU
    return GPRSpec(
        slice=draw(st.sampled_from(SLICES)),
        duration=timedelta(minutes=30 * draw(st.integers(min_value=1, max_value=6))),
        gpus=1 if share else None if whole_nodes else draw(st.integers(min_value=1, max_value=12)),
        gpu_share=share,
        nodes=draw(st.integers(min_value=1, max_value=2)) if whole_nodes else None,
        priority=draw(st.sampled_from([50, 150, 150, 250])),
        shape=draw(st.sampled_from(SHAPE_WANTS)),
        cluster=draw(st.sampled_from([None, None, "c1", "c2"])),
        start_after=draw(st.none() | HALF_HOURS),
    )


@st.composite
def snapshots(draw, queued: tuple[int, int] = (0, 6)) -> Snapshot:
    """Between ``queued[0]`` and ``queued[1]`` queued requests."""
    inventory = draw(nodes())
    pool = [g for n in inventory for g in n.gpus]
    bookings = []
    for gpr_id in range(100, 100 + draw(st.integers(min_value=0, max_value=4))):
        if not pool:
            break
        taken = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=8, unique=True))
        pool = [g for g in pool if g not in taken]
        start = draw(st.integers(min_value=-6, max_value=0).map(lambda n: at(n / 2)))
        # Ends off the half hour by any number of microseconds, as real windows do: the windows
        # planned after them start there, on times a float sum does not always land on.
        end = start + timedelta(minutes=30 * draw(st.integers(min_value=1, max_value=10)))
        end += timedelta(microseconds=draw(st.integers(min_value=0, max_value=999_999)))
        bookings.append(Booking(gpr_id, draw(st.sampled_from(SLICES)), tuple(taken), start, end, draw(st.booleans())))
    # A quarter of the requests avoid a node or two (they failed its pre-checks once).
    avoids = st.lists(st.sampled_from([n.key for n in inventory]), max_size=2).map(frozenset)
    queue = tuple(
        Request(
            gpr_id,
            draw(specs()),
            draw(HALF_HOURS.filter(lambda t: t <= NOW)),
            draw(avoids) if draw(st.sampled_from([False, False, False, True])) else frozenset(),
        )
        for gpr_id in range(1, 1 + draw(st.integers(min_value=queued[0], max_value=queued[1])))
    )
    policies = {
        name: SlicePolicy(
            max_active_gprs=draw(st.integers(min_value=1, max_value=3)),
            max_gpus=draw(st.none() | st.integers(min_value=2, max_value=16)),
        )
        for name in draw(st.lists(st.sampled_from(SLICES), unique=True))
    }
    all_gpus = [g for n in inventory for g in n.gpus]
    unhealthy = draw(st.lists(st.sampled_from(all_gpus), max_size=2, unique=True))
    return Snapshot(
        nodes=inventory,
        bookings=tuple(bookings),
        queue=queue,
        policies=policies,
        unhealthy_gpus=frozenset(unhealthy),
    )


def held_until(b: Booking) -> datetime:
    """A releasing or overdue booking holds its GPUs until just after now, as far as planning goes."""
    return NOW + JUST_AFTER if b.releasing else max(b.end, NOW + JUST_AFTER)


def node_counts(estimate, nodes: dict[str, Node]) -> list[tuple[str, int]]:
    """GPUs an estimate takes per node: full nodes first, the remainder on the last."""
    width = estimate.placement.shape.gpus_per_node
    names = estimate.placement.nodes
    full = [(n, width) for n in names[:-1]]
    return [*full, (names[-1], estimate.placement.count - width * len(full))]


def windows(snapshot: Snapshot, planned: Plan) -> list[tuple[str, str, int, datetime, datetime]]:
    """(slice, node, GPUs, start, end) of every placed estimate, per node."""
    specs_by_id = {r.gpr_id: r.spec for r in snapshot.queue}
    nodes = {n.name: n for n in snapshot.nodes}
    return [
        (specs_by_id[e.gpr_id].slice, name, count, e.start, e.end)
        for e in planned.estimates.values()
        if e.start is not None
        for name, count in node_counts(e, nodes)
    ]


SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(snapshots())
def test_no_gpu_double_booked_at_any_instant(snapshot: Snapshot):
    """Per node and instant: planned GPUs plus bound-or-unhealthy GPUs fit the node; the exact
    GPUs of admissions are free, healthy and distinct."""
    planned = plan(snapshot, NOW)
    placed = windows(snapshot, planned)
    for node in snapshot.nodes:
        mine = [(count, start, end) for _, name, count, start, end in placed if name == node.name]
        for instant in {start for _, start, _ in mine}:
            unavailable = {g for g in node.gpus if g in snapshot.unhealthy_gpus}
            unavailable |= {g for b in snapshot.bookings if held_until(b) > instant for g in b.gpus if g in node.gpus}
            busy = sum(count for count, start, end in mine if start <= instant < end)
            assert busy + len(unavailable) <= len(node.gpus), (node.name, instant)
    exact = [g for a in planned.admits for g in a.placement.gpus]
    assert len(exact) == len(set(exact))
    assert not set(exact) & ({g for b in snapshot.bookings for g in b.gpus} | snapshot.unhealthy_gpus)
    for admit in planned.admits:
        assert len(admit.placement.gpus) == admit.placement.count


@SETTINGS
@given(snapshots())
def test_admits_start_now_with_an_estimate(snapshot: Snapshot):
    planned = plan(snapshot, NOW)
    for admit in planned.admits:
        assert admit.start == NOW
        assert planned.estimates[admit.gpr_id] == admit
    assert {e.gpr_id for e in planned.estimates.values() if e.start == NOW} == {a.gpr_id for a in planned.admits}
    assert set(planned.estimates) == {r.gpr_id for r in snapshot.queue}


@SETTINGS
@given(snapshots())
def test_plan_is_deterministic_and_leaves_the_snapshot_alone(snapshot: Snapshot):
    before = copy.deepcopy(snapshot)
    first = plan(snapshot, NOW)
    assert snapshot == before
    assert plan(snapshot, NOW) == first
    reordered = dataclasses.replace(
        snapshot, nodes=snapshot.nodes[::-1], bookings=snapshot.bookings[::-1], queue=snapshot.queue[::-1]
    )
    assert plan(reordered, NOW) == first


@SETTINGS
@given(snapshots(queued=(3, 10)))
def test_a_plan_made_again_with_its_own_estimates_as_promises_is_the_same(snapshot: Snapshot):
    """The service plans every pass with the last plan's estimates as promises: with nothing
    changed, the plan does not move (no swaps between passes)."""
    first = plan(snapshot, NOW)
    again = plan(dataclasses.replace(snapshot, previous=first.estimates), NOW)
    assert again.estimates == first.estimates
    assert again.admits == first.admits


@SETTINGS
@given(snapshots())
def test_estimates_start_after_now_and_start_after(snapshot: Snapshot):
    planned = plan(snapshot, NOW)
    for request in snapshot.queue:
        estimate = planned.estimates[request.gpr_id]
        usable = tuple(n for n in snapshot.nodes if n.key not in request.avoid)
        assert (estimate.start is None) == (
            unservable_reason(request.spec, usable, snapshot.unhealthy_gpus) is not None
        )
        if estimate.start is not None:
            assert estimate.start >= NOW
            assert estimate.start >= (request.spec.start_after or NOW)
            assert estimate.end == estimate.start + request.spec.duration


@SETTINGS
@given(snapshots())
def test_placements_respect_shape_cluster_and_health(snapshot: Snapshot):
    planned = plan(snapshot, NOW)
    by_name = {n.name: n for n in snapshot.nodes}
    for request in snapshot.queue:
        placement = planned.estimates[request.gpr_id].placement
        if placement is None:
            continue
        spec = request.spec
        placed = [by_name[name] for name in placement.nodes]
        assert all(n.schedulable and n.cluster == placement.cluster and n.shape == placement.shape for n in placed)
        assert placement.shape.serves(spec.shape, spec.gpu_share)
        assert spec.cluster in (None, placement.cluster)
        assert not set(placement.gpus) & snapshot.unhealthy_gpus
        assert set(placement.gpus) <= {g for n in placed for g in n.gpus}
        assert len(set(placement.nodes)) == len(placement.nodes)
        if spec.nodes is not None:
            assert len(placed) == spec.nodes
            assert placement.count == sum(len(n.gpus) for n in placed)
        else:
            assert placement.count == spec.gpus
            # packed onto as few nodes as possible; what fits one node is never split
            assert len(placed) == -(-spec.gpus // placement.shape.gpus_per_node)


@SETTINGS
@given(snapshots(queued=(1, 8)))
def test_no_request_is_placed_on_a_node_it_avoids(snapshot: Snapshot):
    planned = plan(snapshot, NOW)
    for request in snapshot.queue:
        placement = planned.estimates[request.gpr_id].placement
        if placement is not None:
            assert not {(placement.cluster, name) for name in placement.nodes} & request.avoid


@SETTINGS
@given(snapshots())
def test_slice_limits_hold_at_every_instant(snapshot: Snapshot):
    planned = plan(snapshot, NOW)
    fractions = {
        g: n.shape.equivalents for n in snapshot.nodes for g in n.gpus
    }  # GPU-equivalents: quotas count a MIG instance as its share of a GPU
    for estimate in planned.estimates.values():
        if estimate.start is None:
            continue
        slice_name = next(r.spec.slice for r in snapshot.queue if r.gpr_id == estimate.gpr_id)
        policy = snapshot.policies.get(slice_name, SlicePolicy())
        own = [
            (s, sum(fractions.get(g, 1) for g in b.gpus), b.start, held_until(b))
            for b in snapshot.bookings
            for s in [b.slice]
        ]
        own += [
            (
                s,
                e.placement.count * e.placement.shape.equivalents,
                e.start,
                e.end,
            )
            for e in planned.estimates.values()
            if e.start is not None
            for s in [next(r.spec.slice for r in snapshot.queue if r.gpr_id == e.gpr_id)]
        ]
        own = [w for w in own if w[0] == slice_name]
        points = [estimate.start] + [b for _, _, b, _ in own if estimate.start < b < estimate.end]
        for point in points:
            active = [n for _, n, b, e in own if b <= point < e]
            assert len(active) <= policy.max_active_gprs
            if policy.max_gpus is not None:
                placed = estimate.placement
                asked = placed.count * placed.shape.equivalents
                assert sum(active) <= max(policy.max_gpus, asked)


# The queue orders a snapshot may have (core/queue.py): the default, shortest first with aging,
# and the multifactor orders.
ORDERS = st.sampled_from(
    [
        FAIR_SHARE_FIRST,
        Order(size_s_per_gpu_hour=600),
        Order(fair_share_s=3600, size_s_per_gpu_hour=600),
        Order(fair_share_s=86400),
    ]
)


@SETTINGS
@given(snapshots(queued=(1, 12)), specs(), st.data())
def test_wait_times_match_plan(snapshot: Snapshot, wanted: GPRSpec, data):
    """Wherever the request sorts in its band (by fair share, from usage, then priority);
    half the time just ahead of a queued request: its slice, one more priority."""
    usage = data.draw(st.dictionaries(st.sampled_from(SLICES), st.floats(min_value=0, max_value=1e7)))
    if snapshot.queue and data.draw(st.booleans()):
        near = data.draw(st.sampled_from(snapshot.queue)).spec
        wanted = dataclasses.replace(wanted, slice=near.slice, priority=near.priority + 1)
    order = data.draw(ORDERS)
    check_wait_times_match_plan(dataclasses.replace(snapshot, usage=usage, order=order), wanted)


@SETTINGS
@given(snapshots(), st.lists(specs(), max_size=3), st.data())
def test_promises_hold_against_everything_not_ahead(snapshot: Snapshot, arrivals: list[GPRSpec], data):
    """Changed usage (fair share), early releases and arrivals never make an estimate later,
    except that of a request behind an arrival in the new queue order (in any order)."""
    snapshot = dataclasses.replace(snapshot, order=data.draw(ORDERS))
    first = plan(snapshot, NOW)
    newcomers = tuple(Request(1000 + i, spec, NOW) for i, spec in enumerate(arrivals))
    released = data.draw(st.lists(st.sampled_from(snapshot.bookings), unique=True)) if snapshot.bookings else []
    later = dataclasses.replace(
        snapshot,
        queue=snapshot.queue + newcomers,
        bookings=tuple(b for b in snapshot.bookings if b not in released),
        usage=data.draw(st.dictionaries(st.sampled_from(SLICES), st.floats(min_value=0, max_value=1e7))),
        previous=first.estimates,
    )
    second = plan(later, NOW)
    first_arrival = min((second.estimates[r.gpr_id].position for r in newcomers), default=None)
    for request in snapshot.queue:
        before, after = first.estimates[request.gpr_id], second.estimates[request.gpr_id]
        if before.start is not None and (first_arrival is None or after.position < first_arrival):
            assert after.start is not None and after.start <= before.start, request.gpr_id


@SETTINGS
@given(snapshots(), st.sampled_from([1, 5, 30, 60, 120]))
def test_an_outage_delays_an_estimate_by_at_most_its_length(snapshot: Snapshot, minutes: int):
    """The service was away for ``minutes`` right after a plan: nothing was admitted or ended
    meanwhile (windows due to end hold their GPUs until just after it comes back). The plan
    shifted by the outage is still feasible, so no queued request planned in queue order
    starts later than that (issue 18: one whose promise no longer fit was planned behind the
    promises after it). A backfilled request (planned to start before one ahead of it) may
    lose its gap to the outage, and wait for those ahead of it."""
    first = plan(snapshot, NOW)
    by_id = {r.gpr_id: r for r in snapshot.queue}
    booked = tuple(
        Booking(a.gpr_id, by_id[a.gpr_id].spec.slice, a.placement.gpus, a.start, a.end) for a in first.admits
    )
    admitted = {a.gpr_id for a in first.admits}
    outage = timedelta(minutes=minutes)
    back = NOW + outage
    later = dataclasses.replace(
        snapshot,
        bookings=snapshot.bookings + booked,
        queue=tuple(r for r in snapshot.queue if r.gpr_id not in admitted),
        previous=first.estimates,
    )
    second = plan(later, back)
    in_order, latest = set(), NOW
    for estimate in sorted(first.estimates.values(), key=lambda e: e.position):
        if estimate.start is not None and estimate.start >= latest:
            in_order.add(estimate.gpr_id)
            latest = estimate.start
    for request in later.queue:
        before, after = first.estimates[request.gpr_id].start, second.estimates[request.gpr_id].start
        if request.gpr_id in in_order:
            assert after is not None and after <= max(before, back) + outage + 2 * JUST_AFTER, request.gpr_id


@SETTINGS
@given(snapshots(queued=(1, 10)), st.sampled_from([0.0002, 1, 5, 30, 120]))
def test_promises_left_late_by_an_outage_move_by_at_most_its_length(snapshot: Snapshot, minutes: float):
    """The service was away for ``minutes`` right after a plan, before it admitted anything:
    what was to start then starts late, and so would everything planned after it on its GPUs.
    Every promise of the plan moved as much later is still feasible, so no request, backfilled
    or not, starts later than its estimate plus the outage (and a microsecond or two where a
    window ends at the instant it comes back). One band: across bands, a late start of a lower
    band's request does not push a higher band's promise (the bands are planned in order), so
    it may wait for it, and those behind it in its band for it."""
    one_band = tuple(
        dataclasses.replace(r, spec=dataclasses.replace(r.spec, priority=PRIORITY_DEFAULT)) for r in snapshot.queue
    )
    snapshot = dataclasses.replace(snapshot, queue=one_band)
    first = plan(snapshot, NOW)
    outage = timedelta(minutes=minutes)
    second = plan(dataclasses.replace(snapshot, previous=first.estimates), NOW + outage)
    for request in snapshot.queue:
        before, after = first.estimates[request.gpr_id].start, second.estimates[request.gpr_id].start
        if before is not None:
            assert after is not None and after <= before + outage + 2 * JUST_AFTER, request.gpr_id


def admitted_late(snapshot: Snapshot, first: Plan, late: timedelta) -> Snapshot:
    """``snapshot`` after ``first``'s admits were written ``late`` after its ``now`` (the service writes
    a window when it admits it, after the plan was made): each window starts and ends that much later."""
    by_id = {r.gpr_id: r for r in snapshot.queue}
    booked = tuple(
        Booking(a.gpr_id, by_id[a.gpr_id].spec.slice, a.placement.gpus, a.start + late, a.end + late)
        for a in first.admits
    )
    admitted = {a.gpr_id for a in first.admits}
    return dataclasses.replace(
        snapshot,
        bookings=snapshot.bookings + booked,
        queue=tuple(r for r in snapshot.queue if r.gpr_id not in admitted),
        previous=first.estimates,
    )


@SETTINGS
@given(snapshots(), st.sampled_from([0.001, 0.05, 0.5, 2]))
def test_windows_admitted_late_move_promises_by_as_much(snapshot: Snapshot, seconds: float):
    """Admitted windows written ``seconds`` after the plan's now end that much later: the promises
    planned after them on their GPUs are held that much later (planner.SLIP_S), none is dropped, so
    a backfilled request keeps its gap too."""
    first = plan(snapshot, NOW)
    late = timedelta(seconds=seconds)
    second = plan(admitted_late(snapshot, first, late), NOW + late)
    for estimate in second.estimates.values():
        before = first.estimates[estimate.gpr_id].start
        if before is not None:
            assert estimate.start is not None and estimate.start <= before + late, estimate.gpr_id


def test_a_backfilled_promise_keeps_its_gap_when_the_window_before_it_was_admitted_late():
    """A 5-s gap before an 8-GPU request: the 4-GPU request backfilled into it after a window
    admitted 50 ms late is held 50 ms later, not planned behind the 8-GPU one (issue 18's lost gap)."""
    second = 1 / 3600
    n = builders.node("n1")
    other = Booking(9, "f", n.gpus[4:], NOW - timedelta(hours=1), NOW + timedelta(seconds=10))
    queue = (
        Request(1, builders.spec(gpus=4, hours=5 * second, slice="a"), NOW - timedelta(minutes=3)),
        Request(2, builders.spec(gpus=8, hours=30 * second, slice="b"), NOW - timedelta(minutes=2)),
        Request(3, builders.spec(gpus=4, hours=5 * second, slice="c"), NOW - timedelta(minutes=1)),
    )
    snapshot = Snapshot(nodes=(n,), bookings=(other,), queue=queue)
    first = plan(snapshot, NOW)
    assert [a.gpr_id for a in first.admits] == [1]
    assert first.estimates[3].start == NOW + timedelta(seconds=5)  # backfilled before request 2
    late = timedelta(milliseconds=50)
    second_plan = plan(admitted_late(snapshot, first, late), NOW + late)
    assert second_plan.estimates[3].start == NOW + timedelta(seconds=5) + late
    assert second_plan.estimates[2].start == NOW + timedelta(seconds=10) + late


@SETTINGS
@given(snapshots())
def test_estimates_equal_actual_starts_when_nothing_changes(snapshot: Snapshot):
    """Replay the plan: at each next start or window end, end what is due, book what is
    admitted, plan again with the previous plan's promises; everything starts as first estimated."""
    now = NOW
    current = plan(snapshot, now)
    promised = {gpr_id: e.start for gpr_id, e in current.estimates.items()}
    started: dict[int, datetime] = {}
    state = snapshot
    for _ in range(20):
        by_id = {r.gpr_id: r for r in state.queue}
        booked = tuple(
            Booking(a.gpr_id, by_id[a.gpr_id].spec.slice, a.placement.gpus, a.start, a.end) for a in current.admits
        )
        started.update((a.gpr_id, a.start) for a in current.admits)
        admitted = {a.gpr_id for a in current.admits}
        bookings = tuple(b for b in state.bookings if not b.releasing and b.end > now) + booked
        queue = tuple(r for r in state.queue if r.gpr_id not in admitted)
        upcoming = [e.start for e in current.estimates.values() if e.start is not None and e.start > now]
        upcoming += [b.end for b in bookings if b.end > now]
        if not queue or not upcoming:
            break
        now = min(upcoming)
        state = dataclasses.replace(
            state,
            bookings=tuple(b for b in bookings if b.end > now),
            queue=queue,
            previous=current.estimates,
        )
        current = plan(state, now)
    for gpr_id, start in started.items():
        assert start == promised[gpr_id], gpr_id


@SETTINGS
@given(snapshots(queued=(1, 12)), specs(), st.data())
def test_an_arrival_placed_on_the_last_plan_gets_the_start_the_next_plan_gives(
    snapshot: Snapshot, arrival: GPRSpec, data
):
    """The service places a GPR just submitted on the last plan (place_arrival), after queries of
    wait times on it: its estimate is the start the next plan (made with the estimates as
    promises) gives it, wherever it sorts in its band."""
    usage = data.draw(st.dictionaries(st.sampled_from(SLICES), st.floats(min_value=0, max_value=1e7)))
    snapshot = dataclasses.replace(snapshot, usage=usage, order=data.draw(ORDERS))
    current = plan(snapshot, NOW)
    request = Request(1000, arrival, NOW)
    wait_times(snapshot, arrival, NOW, current=current)  # a query builds the rewinds first
    current.estimates[request.gpr_id] = place_arrival(current, request, NOW)
    later = dataclasses.replace(snapshot, queue=(*snapshot.queue, request), previous=current.estimates)
    assert plan(later, NOW).estimates[request.gpr_id].start == current.estimates[request.gpr_id].start


@SETTINGS
@given(snapshots(queued=(4, 12)), st.lists(specs(), min_size=2, max_size=6), st.data())
def test_rewinds_patched_with_arrivals_answer_as_rewinds_made_again(snapshot: Snapshot, arrivals: list[GPRSpec], data):
    """A band's rewind (what wait-time queries and arrivals are placed on) is made once per plan;
    windows placed since are patched in per query. Its answers are those of a rewind made again
    after every arrival. Most arrivals sort just ahead of a queued request (its slice, one more
    priority), so that they are placed, and asked about, inside their band."""
    usage = data.draw(st.dictionaries(st.sampled_from(SLICES), st.floats(min_value=0, max_value=1e7)))
    snapshot = dataclasses.replace(snapshot, usage=usage)
    patched, made_again = plan(snapshot, NOW), plan(snapshot, NOW)
    for i, spec in enumerate(arrivals):
        if data.draw(st.integers(min_value=0, max_value=3)):
            near = data.draw(st.sampled_from(snapshot.queue)).spec
            spec = dataclasses.replace(spec, slice=near.slice, priority=near.priority + 1)
        for query in (*arrivals[:i], spec):
            asked = wait_times(snapshot, query, NOW, current=patched)
            made_again.views.rewinds.clear()
            assert asked == wait_times(snapshot, query, NOW, current=made_again)
        request = Request(1000 + i, spec, NOW)
        made_again.views.rewinds.clear()
        assert place_arrival(patched, request, NOW) == place_arrival(made_again, request, NOW)
