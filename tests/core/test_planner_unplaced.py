"""Issue 25: a request the planner cannot place never stops planning.

The pass leaves it out (the plan is exactly the plan without it) and names it in
``Plan.unplaced`` with the reason; no time the planner computes overflows, whatever
a stored GPR's ``start_after`` and ``duration`` are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.planner import place_arrival, plan, wait_times
from egs_hub.core.snapshot import Booking, Request, Snapshot
from egs_hub.core.units import LATEST_TIME

from .builders import NOW, at, booking, gpus_of, node, req, snap, view_state

FAR = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
N1 = node("n1", 8)
THE_ISSUES_REASON = (
    "its window would end after 9000-01-01T00:00:00Z, the latest time planned "
    "(start_after 9999-12-31T23:59:59Z, duration 1h)"
)


def odd(gpr_id: int, *, start_after: datetime | None = FAR, duration=timedelta(hours=1), **fields) -> Request:
    """A queued request with a start_after and duration no API call makes any more (an old row)."""
    made = req(gpr_id, **fields)
    return dataclasses.replace(made, spec=dataclasses.replace(made.spec, start_after=start_after, duration=duration))


@dataclass(frozen=True)
class Case:
    queue: list[Request]
    want_unplaced: dict[int, str]  # GPR id -> a piece of its reason, in the order they were found
    bookings: list[Booking] = field(default_factory=list)
    backfill: str = "conservative"


CASES = {
    "the issue's GPR between two others": Case([req(1, gpus=2), odd(2), req(3, gpus=6)], {2: THE_ISSUES_REASON}),
    "alone in the queue": Case([odd(1)], {1: THE_ISSUES_REASON}),
    "ahead of everything, in the high band": Case(
        [req(1, gpus=8), odd(2, priority=250), req(3, gpus=1, priority=50)], {2: "9000-01-01T00:00:00Z"}
    ),
    "behind a booking": Case(
        [odd(1, gpus=8), req(2, gpus=8)], {1: "9000-01-01T00:00:00Z"}, [booking(9, gpus_of(N1), until=2)]
    ),
    "ends just after the latest time": Case(
        [odd(1, start_after=LATEST_TIME - timedelta(minutes=30))],
        {1: "(start_after 8999-12-31T23:30:00Z, duration 1h)"},
    ),
    "ends at the latest time: placed": Case([odd(1, start_after=LATEST_TIME - timedelta(hours=1))], {}),
    "a duration no time can hold from now": Case(
        [req(1), odd(2, start_after=None, duration=timedelta(days=999_999_999))],
        {2: "its window would end after 9000-01-01T00:00:00Z, the latest time planned (duration 999999999d)"},
    ),
    "a start_after without a time zone (an error nobody foresaw)": Case(
        [req(1), odd(2, start_after=datetime(2026, 3, 2, 12))],
        {2: "TypeError: can't subtract offset-naive and offset-aware datetimes"},
    ),
    "two of them": Case([odd(1), req(2), odd(3, priority=50)], {1: "9000", 3: "9000"}),
    "easy backfill": Case([req(1, gpus=8), odd(2), req(3)], {2: THE_ISSUES_REASON}, backfill="easy"),
    "no backfill": Case([odd(1), req(2)], {1: THE_ISSUES_REASON}, backfill="none"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_request_that_cannot_be_placed_is_left_out(case: Case):
    snapshot = snap(N1, bookings=case.bookings, queue=case.queue)
    planned = plan(snapshot, NOW, backfill=case.backfill)
    assert [u.gpr_id for u in planned.unplaced] == list(case.want_unplaced)
    for unplaced in planned.unplaced:
        assert case.want_unplaced[unplaced.gpr_id] in unplaced.reason
        assert unplaced.error.__traceback__ is not None  # for the service's log
    without = dataclasses.replace(
        snapshot, queue=tuple(r for r in snapshot.queue if r.gpr_id not in case.want_unplaced)
    )
    alone = plan(without, NOW, backfill=case.backfill)
    assert alone.unplaced == ()
    assert planned == dataclasses.replace(alone, unplaced=planned.unplaced)
    assert set(planned.estimates) == {r.gpr_id for r in without.queue}


def test_a_promise_kept_for_a_request_now_out_of_range_does_not_hold_it():
    """A queued GPR had an estimate, then its row got a far start_after (an old service, a hand edit)."""
    first = plan(snap(N1, queue=[req(1, gpus=8), req(2, gpus=8)]), NOW)
    assert first.estimates[2].start == at(1)
    edited = snap(N1, queue=[req(1, gpus=8), odd(2, gpus=8), req(3, gpus=8)])
    planned = plan(dataclasses.replace(edited, previous=first.estimates), NOW)
    assert [u.gpr_id for u in planned.unplaced] == [2]
    assert planned.estimates[3].start == at(1)  # in the window GPR 2 was promised


def test_wait_times_and_arrivals_past_the_latest_time_get_no_window():
    snapshot = snap(N1, queue=[req(1, gpus=2)])
    current = plan(snapshot, NOW)
    before = view_state(current.views)
    assert wait_times(snapshot, odd(9).spec, NOW, current=current) == []
    estimate = place_arrival(current, odd(9), NOW)
    assert (estimate.start, estimate.end, estimate.placement) == (None, None, None)
    assert view_state(current.views) == before


TIMES = st.one_of(
    st.none(),
    st.integers(min_value=-4, max_value=8).map(lambda n: at(n / 2)),
    st.datetimes(min_value=datetime(8990, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)),
)
DURATIONS = st.one_of(
    st.integers(min_value=1, max_value=8).map(lambda n: timedelta(minutes=30 * n)),
    st.integers(min_value=1, max_value=10 * 365).map(lambda n: timedelta(days=n)),
)


@st.composite
def snapshots(draw) -> Snapshot:
    nodes = [node(f"n{i}", draw(st.sampled_from([2, 4, 8]))) for i in range(draw(st.integers(1, 3)))]
    queue = [
        odd(
            gpr_id,
            start_after=draw(TIMES),
            duration=draw(DURATIONS),
            gpus=draw(st.integers(min_value=1, max_value=8)),
            priority=draw(st.sampled_from([50, 150, 250])),
            slice=draw(st.sampled_from(["a", "b"])),
        )
        for gpr_id in range(1, 1 + draw(st.integers(min_value=1, max_value=6)))
    ]
    return snap(*nodes, queue=queue)


@settings(max_examples=150, deadline=None)
@given(snapshots(), st.sampled_from(["conservative", "easy", "none"]))
def test_no_time_overflows_and_each_request_is_planned_or_left_out(snapshot: Snapshot, backfill: str):
    planned = plan(snapshot, NOW, backfill=backfill)
    unplaced = {u.gpr_id for u in planned.unplaced}
    assert unplaced.isdisjoint(planned.estimates)
    assert unplaced | set(planned.estimates) == {r.gpr_id for r in snapshot.queue}
    for u in planned.unplaced:
        assert "the latest time planned" in u.reason
    for request in snapshot.queue:
        if (request.spec.start_after or NOW) > LATEST_TIME - request.spec.duration:
            # It cannot start before its start_after, where it can be served at all.
            assert request.gpr_id in unplaced or planned.estimates[request.gpr_id].start is None
    for estimate in planned.estimates.values():
        assert estimate.end is None or estimate.end <= LATEST_TIME
    without = dataclasses.replace(snapshot, queue=tuple(r for r in snapshot.queue if r.gpr_id not in unplaced))
    assert planned == dataclasses.replace(plan(without, NOW, backfill=backfill), unplaced=planned.unplaced)
