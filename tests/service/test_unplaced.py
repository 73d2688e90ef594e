"""Issue 25 in the service, on both databases: a start_after past the horizon is refused
by the commands, and a GPR in the store that the planner cannot place (written before
the bound existed) is failed by the reconcile pass with the reason, logged with its
traceback, while every read answers and the other GPRs are admitted.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core import lifecycle, planner
from egs_hub.core import model as core
from egs_hub.core.errors import InvalidRequest
from egs_hub.service.commands import Commands
from egs_hub.service.planning import Planning
from egs_hub.store import queries
from egs_hub.store.db import transaction
from egs_hub.store.models import EventRow

from .test_reconcile import START, kinds, settle, status, submit, world  # noqa: F401

FAR = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
REASON = (
    "the planner could not place this GPR: its window would end after 9000-01-01T00:00:00Z, "
    "the latest time planned (start_after 9999-12-31T23:59:59Z, duration 30m)"
)


def store_start_after(sessions, gpr_id: int, start_after: datetime) -> None:
    """What an older service left in the store: no check stands in the way."""
    with transaction(sessions) as session:
        queries.get_gpr_row(session, gpr_id, lock=True).start_after = start_after


def commands_of(world, horizon: timedelta) -> Commands:  # noqa: F811
    sessions, clock = world[0], world[1]
    return Commands(sessions, Planning(), clock, max_start_after=horizon)


async def test_a_stored_gpr_the_planner_cannot_place_is_failed_and_the_others_admitted(world, caplog):  # noqa: F811
    sessions, clock, backend, reconciler = world
    bad = submit(sessions, "a", 1, 30, clock.now)
    store_start_after(sessions, bad, FAR)
    good = submit(sessions, "a", 2, 30, clock.now)  # the same slice: one GPR of it holds GPUs at a time
    other = submit(sessions, "b", 1, 30, clock.now)

    with sessions() as session:  # what every read plans with: the GPR is left out, nothing raises
        snapshot, plan, planned_at = reconciler.planning.plan_now(session, clock.now)
    assert [u.gpr_id for u in plan.unplaced] == [bad]
    assert set(plan.estimates) == {good, other}
    assert planner.wait_times(snapshot, core.GPRSpec(slice="a", duration=timedelta(hours=1), gpus=1), planned_at)

    with caplog.at_level(logging.ERROR, logger="egs_hub.service.reconcile"):
        await settle(reconciler)
    failed = status(sessions, bad)
    assert (failed.status, failed.status_reason, failed.ended_at) == (core.Status.FAILED, REASON, START)
    assert kinds(sessions, bad) == ["submitted", "failed"]
    with sessions() as session:
        event = session.query(EventRow).filter_by(gpr_id=bad, kind="failed").one()
        assert (event.actor, event.reason, event.from_status, event.to_status) == (
            "planner",
            REASON,
            "queued",
            "failed",
        )
    assert status(sessions, good).status is core.Status.PROVISIONED
    assert status(sessions, other).status is core.Status.PROVISIONED
    assert sorted(backend.binds) == sorted([good, other])
    (logged,) = [r for r in caplog.records if f"GPR {bad}: the planner could not place it" in r.getMessage()]
    assert logged.exc_info is not None and logged.exc_info[0] is planner.TooLate
    assert "Traceback" in caplog.text and "window_times" in caplog.text

    caplog.clear()
    await settle(reconciler)  # failed once: the next passes plan without it and log nothing
    assert kinds(sessions, bad) == ["submitted", "failed"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("horizon", "start_after", "want_message"),
    [
        (timedelta(days=365), FAR, "start_after must be within 365 days from now (before 2027-11-22T12:00:00Z)"),
        (timedelta(days=1), START + timedelta(days=2), "within 1 day from now (before 2026-11-23T12:00:00Z)"),
    ],
)
async def test_submit_and_edit_refuse_a_start_after_past_the_horizon(world, horizon, start_after, want_message):  # noqa: F811
    sessions = world[0]
    commands = commands_of(world, horizon)
    spec = core.GPRSpec(slice="a", duration=timedelta(minutes=30), gpus=1, start_after=start_after)
    with pytest.raises(InvalidRequest) as raised:
        await commands.submit(spec, "alice", admin=True)  # admins too: the planner's horizon is everyone's
    assert raised.value.field == "start_after" and want_message in str(raised.value)
    with sessions() as session:
        assert queries.gpr_rows(session) == []

    near = START + timedelta(hours=1)
    made = (await commands.submit(dataclasses.replace(spec, start_after=near), "alice", admin=False)).gpr
    with pytest.raises(InvalidRequest) as raised:
        commands.edit(made.id, lambda s: dataclasses.replace(s, start_after=start_after), "alice", admin=False)
    assert raised.value.field == "start_after" and want_message in str(raised.value)
    assert status(sessions, made.id).spec.start_after == near


def test_an_arrival_that_cannot_be_placed_is_answered_without_an_estimate(world, caplog):  # noqa: F811
    """A submit is committed before it is placed on the last plan: whatever placing it raises, it
    is answered (without an estimate), and the other arrivals are placed."""
    sessions, clock = world[0], world[1]
    planning = Planning()
    planning.watch(sessions, timedelta(seconds=60))
    with sessions() as session:
        planning.plan_now(session, clock.now)  # the last plan, which the arrivals are placed on
    with transaction(sessions) as session:
        gprs = []
        for name in ("a", "b"):
            spec = core.GPRSpec(slice=name, duration=timedelta(minutes=30), gpus=1)
            row = queries.new_gpr_row(session, spec, "alice", clock.now)
            gprs.append(queries.apply(session, row, lifecycle.submit(row.id, spec, "alice", [], clock.now)))
        Planning.mark_arrivals(session)
    unplaceable = dataclasses.replace(gprs[0].spec, start_after=datetime(2026, 11, 22, 13))  # no time zone
    arrivals = [dataclasses.replace(gprs[0], spec=unplaceable), gprs[1]]
    with sessions() as session, caplog.at_level(logging.ERROR, logger="egs_hub.service.planning"):
        estimates = planning.place_arrivals(session, arrivals, clock.now)
    assert list(estimates) == [gprs[1].id] and estimates[gprs[1].id].start == clock.now
    assert f"GPR {gprs[0].id} could not be placed on the plan" in caplog.text and "TypeError" in caplog.text
