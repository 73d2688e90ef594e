"""A restarted service keeps the estimates it gave (the planner's promises are in the database).

The scenario needs a promise to matter: slice b used the node first, then slice a holds
it; a queues X, b queues Y behind X (b used more lately). While a's holder runs, a's
usage overtakes b's and fair share alone would now put Y ahead; but a fair-share change
does not move a promise, so X keeps its start and Y follows. A service that forgot its
promises would plan afresh and move X later, behind Y.
"""

# ruff: noqa: F811  (the fixture world is imported from the module that defines it)
from __future__ import annotations

from datetime import timedelta

from egs_hub.core import model as core
from egs_hub.service.exporter import Exporter
from egs_hub.service.planning import Planning
from egs_hub.service.reconcile import Reconciler
from egs_hub.store import queries
from egs_hub.store.models import EventRow

from .test_exporter import scrape, values
from .test_reconcile import START, settle, status, submit, submit_spec, world  # noqa: F401


def starts(planning: Planning, sessions, now, *gpr_ids: int) -> list:
    with sessions() as session:
        plan = planning.plan_now(session, now)[1]
    return [plan.estimates[gpr_id].start for gpr_id in gpr_ids]


async def test_a_restarted_service_keeps_its_promises(world):
    sessions, clock, backend, reconciler = world
    earlier = submit(sessions, "b", 4, 10, clock.now)
    await settle(reconciler)
    clock.advance(minutes=10)
    await settle(reconciler)
    assert status(sessions, earlier).status is core.Status.COMPLETE
    holder = submit(sessions, "a", 4, 60, clock.now)
    await settle(reconciler)
    assert status(sessions, holder).status is core.Status.PROVISIONED
    x = submit(sessions, "a", 4, 30, clock.now)
    await reconciler.tick()
    clock.advance(minutes=1)
    y = submit(sessions, "b", 4, 30, clock.now)
    await reconciler.tick()
    clock.advance(minutes=20)
    await reconciler.tick()
    promised = [START + timedelta(minutes=70), START + timedelta(minutes=100)]
    assert starts(reconciler.planning, sessions, clock.now, x, y) == promised

    restarted = Reconciler(sessions, {backend.cluster: backend}, clock, retry_interval=5, planning=Planning())
    with sessions() as session:
        restarted.planning.restore(session)
    await restarted.tick()
    assert starts(restarted.planning, sessions, clock.now, x, y) == promised
    assert restarted.planning.first_start(x) == promised[0]

    # Without them, fair share alone orders the band: X would move later, behind Y.
    assert starts(Planning(), sessions, clock.now, x, y) == promised[::-1]


def stored(sessions) -> list[int]:
    with sessions() as session:
        return [estimate.gpr_id for estimate, _, _ in queries.load_promises(session)]


async def test_promises_of_gprs_no_longer_queued_are_dropped(world):
    sessions, clock, _, reconciler = world
    holder = submit(sessions, "a", 4, 60, clock.now)
    queued = submit(sessions, "b", 4, 30, clock.now)
    await settle(reconciler)
    assert status(sessions, holder).status is core.Status.PROVISIONED
    assert stored(sessions) == [queued]

    clock.advance(minutes=60)
    await settle(reconciler)
    assert status(sessions, queued).status is core.Status.PROVISIONED
    assert stored(sessions) == []


def moves(sessions, gpr_id: int) -> list[tuple[str, dict]]:
    with sessions() as session:
        rows = session.query(EventRow).filter_by(gpr_id=gpr_id, kind="estimate-moved").order_by(EventRow.id)
        return [(row.reason, row.data) for row in rows]


async def test_a_broken_promise_says_why_in_the_gprs_events(world):
    """Higher-priority work takes the window X was promised: X's estimate moves 30 min later, and an
    ``estimate-moved`` event on X says by how much, to when and why; a move within a minute says nothing."""
    sessions, clock, _, reconciler = world
    reconciler.exporter = Exporter(sessions, list)
    holder = submit(sessions, "a", 4, 60, clock.now)
    x = submit(sessions, "b", 4, 30, clock.now)
    await settle(reconciler)
    assert status(sessions, holder).status is core.Status.PROVISIONED
    assert starts(reconciler.planning, sessions, clock.now, x) == [START + timedelta(minutes=60)]
    assert moves(sessions, x) == []

    urgent = core.GPRSpec(slice="a", duration=timedelta(minutes=30), gpus=4, priority=250)
    submit_spec(sessions, urgent, clock.now)
    await settle(reconciler)
    assert starts(reconciler.planning, sessions, clock.now, x) == [START + timedelta(minutes=90)]
    [(reason, data)] = moves(sessions, x)
    assert data == {
        "from": (START + timedelta(minutes=60)).isoformat(),
        "to": (START + timedelta(minutes=90)).isoformat(),
        "by_s": 1800.0,
        "cause": "taken",
    }
    assert reason.startswith("estimated start moved 30m later") and "higher-priority work" in reason, reason
    moved = values(scrape(reconciler.exporter), "egs_estimates_moved_total", "cause")
    assert moved[("taken",)] == 1 and sum(moved.values()) == 1

    # Told the new start, X is not told again while it holds.
    clock.advance(minutes=5)
    await settle(reconciler)
    assert len(moves(sessions, x)) == 1
