"""The planner's state in memory (service/state.py) and arrivals placed on the last plan
(Planning.place_arrivals), on both databases.

The state must equal what a full load of the store gives after any write, while reading
only what the write changed; a submit must answer the estimate the next full plan gives
when nothing else changes, also when the plan was being made while it arrived.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import timedelta

import pytest
from sqlalchemy import event

from egs_hub.core import lifecycle
from egs_hub.core import model as core
from egs_hub.core.errors import PolicyViolation
from egs_hub.service.commands import Commands
from egs_hub.service.planning import _FEW_ARRIVALS, Planning
from egs_hub.store import queries
from egs_hub.store.db import transaction

from .test_reconcile import NODE, SHAPE, START, submit, world  # noqa: F401

REUSE = timedelta(seconds=60)


def watching(sessions) -> Planning:
    planning = Planning()
    planning.watch(sessions, REUSE)
    return planning


def in_memory(planning: Planning, sessions, now):
    with sessions() as session:
        snapshot = planning.snapshot(session, now)
        planning.state.refresh_usage(session, now)  # the reconcile pass's job; compared here too
        return dataclasses.replace(snapshot, usage=planning.state.usage)


def loaded(sessions, now):
    with sessions() as session:
        return queries.load_snapshot(session, now)


def test_the_state_follows_every_kind_of_write(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    assert in_memory(planning, sessions, START) == loaded(sessions, START)
    a = submit(sessions, "a", 2, 30, START)
    b = submit(sessions, "b", 4, 60, START)
    c = submit(sessions, "a", 1, 30, START)
    assert in_memory(planning, sessions, START) == loaded(sessions, START)
    with transaction(sessions) as session:  # admitted and bound
        row = queries.get_gpr_row(session, a, lock=True)
        gpr = queries.apply(session, row, lifecycle.admit(queries.to_gpr(row), NODE.gpus[:2], ("n1",), START))
        queries.bind(session, gpr)
    with transaction(sessions) as session:  # cancelled
        row = queries.get_gpr_row(session, c, lock=True)
        queries.apply(session, row, lifecycle.cancel(queries.to_gpr(row), "alice", "no", START))
    with transaction(sessions) as session:  # a policy
        row = queries.get_slice(session, "b")
        queries.write_slice_policy(row, core.SlicePolicy(max_gpus=8, max_active_gprs=2))
    later = START + timedelta(minutes=5)
    gpus = [
        core.GPU(uuid=u, index=i, node="n1", cluster="local", model="H100", memory_mib=81920, healthy=i != 3)
        for i, u in enumerate(NODE.gpus)
    ]
    with transaction(sessions) as session:  # the inventory: a GPU unhealthy
        queries.sync_inventory(session, "local", "local", [NODE], gpus, later)
    with transaction(sessions) as session:  # releasing, then ended
        row = queries.get_gpr_row(session, a, lock=True)
        change = lifecycle.begin_release(queries.to_gpr(row), core.EndReason.RELEASED_EARLY, "alice", "", later)
        queries.apply(session, row, change)
    assert in_memory(planning, sessions, later) == loaded(sessions, later)
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, a, lock=True)
        queries.apply(session, row, lifecycle.complete(queries.to_gpr(row), "double", later))
        queries.unbind(session, a)
    with transaction(sessions) as session:  # a transaction rolled back changes nothing
        row = queries.get_gpr_row(session, b, lock=True)
        queries.apply(session, row, lifecycle.cancel(queries.to_gpr(row), "alice", "no", later))
        session.rollback()
    snapshot = in_memory(planning, sessions, later)
    assert snapshot == loaded(sessions, later)
    assert [r.gpr_id for r in snapshot.queue] == [b] and snapshot.unhealthy_gpus == {NODE.gpus[3]}
    assert snapshot.policies["b"].max_gpus == 8
    del clock


@pytest.mark.parametrize("stored", [10, 200])
def test_a_snapshot_after_a_write_reads_what_it_changed_not_the_store(world, stored):  # noqa: F811
    sessions = world[0]
    for _ in range(stored):
        submit(sessions, "a", 1, 30, START)
    planning = watching(sessions)
    in_memory(planning, sessions, START)  # the load at start
    submit(sessions, "b", 1, 30, START)
    statements: list[str] = []
    engine = sessions.kw["bind"]

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        with sessions() as session:
            snapshot = planning.snapshot(session, START)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(snapshot.queue) == stored + 1
    # The new GPR and its allocations, by id: the same two statements whatever the store holds.
    assert len(statements) == 2, statements
    assert all("WHERE gprs.id IN" in s or "allocations" in s for s in statements), statements


def commands_of(sessions, clock, planning: Planning) -> Commands:
    return Commands(sessions, planning, clock, max_start_after=timedelta(days=365))


def spec(slice_name: str, gpus: int, minutes: int, priority: int = 100) -> core.GPRSpec:
    return core.GPRSpec(slice=slice_name, duration=timedelta(minutes=minutes), gpus=gpus, priority=priority)


# Each case: GPRs queued before, then the submits, one after the other; every answer must be the
# start the next full plan gives (want: the same). Slices "a" and "b" have equal shares, so fair
# share orders them by use: none here.
ARRIVALS = {
    "one slice, one band": (
        [spec("a", 4, 60), spec("a", 2, 30)],
        [spec("a", 2, 30), spec("a", 4, 10), spec("a", 1, 5)],
    ),
    "a higher band arrives": ([spec("a", 4, 60), spec("b", 4, 60)], [spec("a", 4, 30, priority=250)]),
    "another slice": ([spec("a", 4, 60)], [spec("b", 2, 30), spec("b", 2, 30)]),
    "lower band behind all": ([spec("a", 4, 60, priority=250)], [spec("b", 1, 20, priority=50), spec("a", 3, 20)]),
}


@pytest.mark.parametrize("queued, arrivals", ARRIVALS.values(), ids=ARRIVALS.keys())
async def test_each_submit_answers_the_start_the_next_plan_gives(world, queued, arrivals):  # noqa: F811
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    for s in queued:
        await commands.submit(s, "alice", admin=False)
    for s in arrivals:
        with sessions() as session:
            planning.plan_now(session, clock.now, fresh=True)  # what the reconcile pass does
        answered = (await commands.submit(s, "alice", admin=False)).estimate
        with sessions() as session:
            replanned = planning.plan_now(session, clock.now, fresh=True).plan.estimates[answered.gpr_id]
        assert (answered.start, answered.placement.nodes) == (replanned.start, replanned.placement.nodes)


async def test_submits_in_a_row_of_one_slice_and_band_answer_the_next_plan(world):  # noqa: F811
    """No plan between them: each is placed on the last plan with the ones before it."""
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    answers = [
        (await commands.submit(spec("a", g, m), "alice", admin=False)).estimate
        for g, m in [(4, 30), (2, 20), (2, 40), (3, 10), (1, 5)]
    ]
    with sessions() as session:
        replanned = planning.plan_now(session, clock.now, fresh=True).plan.estimates
    assert [(e.start, e.end) for e in answers] == [
        (replanned[e.gpr_id].start, replanned[e.gpr_id].end) for e in answers
    ]
    assert len({e.start for e in answers}) > 1  # they wait for each other


async def test_a_submit_during_a_plan_is_placed_on_the_new_plan(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    first = (await commands.submit(spec("a", 4, 60), "alice", admin=False)).gpr
    with sessions() as session:
        taken = planning.take(session, clock.now, fresh=True)  # the reconcile pass's snapshot
    during = await commands.submit(spec("a", 4, 30), "alice", admin=False)  # placed on the last plan
    made = planning.decide(taken)  # the pass's plan, without it
    assert during.gpr.id not in made.estimates
    adopted = planning.adopt(taken, made)
    assert adopted.plan.estimates[during.gpr.id].start == during.estimate.start
    with sessions() as session:
        reread = planning.plan_now(session, clock.now).plan  # reads reuse it: only an arrival was written
        assert reread is adopted.plan
        fresh = planning.plan_now(session, clock.now, fresh=True).plan
    assert fresh.estimates[during.gpr.id].start == during.estimate.start
    assert first.id in fresh.estimates


async def test_submits_arriving_together_share_one_commit_and_each_gets_its_answer(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    commits: list[int] = []
    event.listen(sessions, "after_commit", lambda session: commits.append(1))
    asked = [spec("a", 1, 30), spec("nope", 1, 30), spec("a", 99, 30), spec("b", 2, 10), spec("a", 4, 60)]
    answers = await asyncio.gather(*(commands.submit(s, "alice", admin=False) for s in asked), return_exceptions=True)
    assert isinstance(answers[1], PolicyViolation) and answers[1].field == "slice"
    assert isinstance(answers[2], PolicyViolation) and answers[2].field == "gpus"
    made = [a for a in answers if not isinstance(a, Exception)]
    assert [a.gpr.spec for a in made] == [asked[0], asked[3], asked[4]]
    assert len(commits) == 1  # one transaction for the group; the placement reads and writes nothing
    with sessions() as session:
        stored = {r.id for r in queries.gpr_rows(session)}
        replanned = planning.plan_now(session, clock.now, fresh=True).plan.estimates
    assert stored == {a.gpr.id for a in made}  # the refused ones wrote nothing
    assert [a.estimate.start for a in made] == [replanned[a.gpr.id].start for a in made]


async def test_while_a_plan_is_made_aside_reads_use_the_last_one(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    gpr = (await commands.submit(spec("a", 4, 60), "alice", admin=False)).gpr
    with sessions() as session:
        last = planning.plan_now(session, clock.now)
    aside = asyncio.ensure_future(planning.fresh(sessions, clock.now))
    await asyncio.sleep(0)  # it took its snapshot and went to its thread
    commands.cancel(gpr.id, "alice", "changed my mind")  # a write: reads would plan again
    with sessions() as session:
        assert planning.plan_now(session, clock.now) is last
    made = await aside
    with sessions() as session:
        again = planning.plan_now(session, clock.now)  # the write came after that plan's snapshot
    assert again is not made and gpr.id in made.plan.estimates and gpr.id not in again.plan.estimates


async def test_the_next_plan_moves_what_an_arrival_ahead_displaced(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    first = await commands.submit(spec("a", 4, 60, priority=101), "alice", admin=False)
    behind = await commands.submit(spec("b", 4, 60, priority=101), "alice", admin=False)
    ahead = await commands.submit(spec("b", 4, 30, priority=180), "alice", admin=False)  # same band, sorts first
    assert ahead.estimate.start == first.estimate.start == clock.now  # it took the window promised to the first
    with sessions() as session:
        read = planning.plan_now(session, clock.now, fresh=True).plan  # the reconcile pass's plan
    assert read.estimates[ahead.gpr.id].start == ahead.estimate.start
    positions = [read.estimates[s.gpr.id].position for s in (ahead, first, behind)]
    assert positions == [1, 2, 3]
    assert read.estimates[first.gpr.id].start == clock.now + timedelta(minutes=30)


async def test_submits_while_a_plan_is_made_aside_are_placed_on_it_in_its_thread(world):  # noqa: F811
    """More than a few arrivals while a plan is made aside are placed on it in its thread, not on the event
    loop when it is adopted; each gets there the start it was answered with."""
    sessions, clock = world[0], world[1]
    planning = watching(sessions)
    commands = commands_of(sessions, clock, planning)
    await commands.submit(spec("a", 4, 60), "alice", admin=False)
    threads: list[str] = []
    place_on = planning._place_on

    def placing(current, gprs, now):
        threads.extend(threading.current_thread().name for gpr in gprs if gpr.id not in current.estimates)
        place_on(current, gprs, now)

    planning._place_on = placing
    decided, decide = threading.Event(), planning.decide
    planning.decide = lambda taken: decided.wait(10) and decide(taken)
    aside = asyncio.ensure_future(planning.fresh(sessions, clock.now))
    await asyncio.sleep(0)  # it took its snapshot and went to its thread
    during = []  # placed on the last plan, on the event loop
    for _ in range(_FEW_ARRIVALS + 1):
        during.append(await commands.submit(spec("a", 4, 30), "alice", admin=False))
    decided.set()
    made = await aside
    for submitted in during:
        assert made.plan.estimates[submitted.gpr.id].start == submitted.estimate.start
    main = threading.main_thread().name
    assert threads.count(main) == len(during) and len(threads) == 2 * len(during)  # and again in the plan's thread
    with sessions() as session:
        fresh = planning.plan_now(session, clock.now, fresh=True).plan
    for submitted in during:
        assert fresh.estimates[submitted.gpr.id].start == submitted.estimate.start


SHORTEST_FIRST = core.Order(size_s_per_gpu_hour=600)


@pytest.mark.parametrize(
    ("order", "want"), [(core.FAIR_SHARE_FIRST, ["big", "small"]), (SHORTEST_FIRST, ["small", "big"])]
)
def test_the_service_plans_its_queue_in_the_order_it_is_configured_with(world, order, want):  # noqa: F811
    """EGSService.queue_size_s_per_gpu_hour (and queue_fair_share_s) reach the planner: a GPR for one
    GPU submitted a minute after one for the whole node (8 GPU-hours) goes ahead of it at 600 s a
    GPU-hour; in the default order it waits behind it."""
    sessions = world[0]
    planning = Planning(order=order)
    planning.watch(sessions, REUSE)
    submit(sessions, "a", 4, 60, START)  # starts now on the node
    first = planning.decide(taken(planning, sessions, START))
    planning.adopt(taken(planning, sessions, START), first)
    gprs = {
        "big": submit(sessions, "a", 4, 120, START),
        "small": submit(sessions, "a", 1, 10, START + timedelta(minutes=1)),
    }
    made = planning.decide(taken(planning, sessions, START + timedelta(minutes=1)))
    assert sorted(gprs, key=lambda name: made.estimates[gprs[name]].position) == want


def taken(planning: Planning, sessions, now):
    with sessions() as session:
        return planning.take(session, now, fresh=True)
