"""Reads reuse the last plan while the store is unchanged, for at most ``reuse_for``.

Planning.watch hooks the service's sessions: a commit that wrote something, a
dropped promise, or a plan older than ``reuse_for`` (or from a later clock)
makes the next read plan again; a commit that wrote nothing the planner reads (an
event, say), or a transaction rolled back, does not. Without watch every read plans. On the event loop
(``current``, ``fresh``) a plan is made in a worker thread, one at a time, and
shared by everyone who waits for it.
"""

# ruff: noqa: F811  (the fixture world is imported from the module that defines it)
from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from egs_hub.core import model as core
from egs_hub.service.planning import Planning
from egs_hub.service.reconcile import Reconciler
from egs_hub.store import queries
from egs_hub.store.db import transaction

from .test_reconcile import START, settle, status, submit, world  # noqa: F401

REUSE = timedelta(seconds=1)


def planned(planning: Planning, sessions, now, **kw):
    with sessions() as session:
        return planning.plan_now(session, now, **kw)


def watching(sessions) -> Planning:
    planning = Planning()
    planning.watch(sessions, REUSE)
    return planning


def test_a_read_within_reuse_for_of_an_unchanged_store_gets_the_same_plan(world):
    sessions = world[0]
    planning = watching(sessions)
    first = planned(planning, sessions, START)
    assert planned(planning, sessions, START + timedelta(milliseconds=500)) is first
    assert planned(planning, sessions, START + REUSE) is first
    assert first.now == START  # answers built on it use the time it was made at
    with transaction(sessions) as session:  # a commit that wrote nothing
        queries.all_slices(session)
    assert planned(planning, sessions, START + REUSE) is first
    with transaction(sessions) as session:  # a write that is not the planner's input: an event
        queries.add_event(session, core.Event("note", "alice", "a note", START, slice="a"))
    assert planned(planning, sessions, START + REUSE) is first
    later = planned(planning, sessions, START + REUSE + timedelta(microseconds=1))
    assert later is not first and later.now == START + REUSE + timedelta(microseconds=1)
    assert planned(planning, sessions, START) is not later  # a clock set back never reuses


def test_a_write_a_dropped_promise_or_fresh_plans_again(world):
    sessions = world[0]
    planning = watching(sessions)
    first = planned(planning, sessions, START)
    gpr_id = submit(sessions, "a", 2, 30, START)
    second = planned(planning, sessions, START)
    assert second is not first
    assert [e.gpr_id for e in second.plan.admits] == [gpr_id]  # the new GPR is in it
    assert planned(planning, sessions, START) is second
    planning.forget([gpr_id])
    third = planned(planning, sessions, START)
    assert third is not second
    assert planned(planning, sessions, START, fresh=True) is not third


def test_a_rolled_back_write_does_not_count(world):
    sessions = world[0]
    planning = watching(sessions)
    first = planned(planning, sessions, START)
    with pytest.raises(RuntimeError), transaction(sessions) as session:
        queries.get_slice(session, "a").display_name = "renamed"
        session.flush()
        raise RuntimeError("changed my mind")
    assert planned(planning, sessions, START) is first


def test_without_a_watched_store_every_read_plans(world):
    sessions = world[0]
    planning = Planning()
    first = planned(planning, sessions, START)
    assert planned(planning, sessions, START) is not first


def counting(planning: Planning) -> list[int]:
    """Count the plans ``planning`` makes."""
    made: list[int] = []
    decide = planning.decide

    def counted(taken):
        made.append(1)
        return decide(taken)

    planning.decide = counted
    return made


async def test_after_a_write_one_plan_is_made_in_a_worker_thread_and_shared(world):
    sessions = world[0]
    planning = watching(sessions)
    first = await planning.current(sessions, START)
    made = counting(planning)
    assert await planning.current(sessions, START) is first and not made
    gpr_id = submit(sessions, "a", 2, 30, START)
    read, fresh, meanwhile = await asyncio.gather(
        planning.current(sessions, START), planning.fresh(sessions, START), planning.current(sessions, START)
    )
    assert len(made) == 1 and fresh is read
    assert [e.gpr_id for e in read.plan.admits] == [gpr_id]
    assert meanwhile is first  # while the plan was made, the last one served
    threads: list[str] = []
    decide = planning.decide
    planning.decide = lambda taken: threads.append(threading.current_thread().name) or decide(taken)
    await planning.fresh(sessions, START)
    assert threads and threads[0] != threading.main_thread().name


async def test_a_fresh_plan_saw_every_write_before_it_was_asked_for(world):
    sessions = world[0]
    planning = watching(sessions)
    await planning.current(sessions, START)
    before = asyncio.ensure_future(planning.fresh(sessions, START))
    await asyncio.sleep(0)  # its snapshot is taken: it is being made in its thread
    gpr_id = submit(sessions, "a", 2, 30, START)
    after = await planning.fresh(sessions, START)  # waits for that one, then makes another
    assert gpr_id not in {e.gpr_id for e in (await before).plan.admits}
    assert [e.gpr_id for e in after.plan.admits] == [gpr_id]


async def test_a_failed_plan_fails_only_those_who_asked_for_it_and_the_next_ask_plans_again(world):
    sessions = world[0]
    planning = watching(sessions)
    decide = planning.decide

    def broken(taken):
        raise RuntimeError("the planner broke")

    planning.decide = broken
    with pytest.raises(RuntimeError, match="the planner broke"):
        await planning.fresh(sessions, START)
    planning.decide = decide
    assert (await planning.fresh(sessions, START)).now == START


async def test_the_reconcile_pass_plans_only_after_a_change_or_when_something_planned_is_due(world):
    """n1 has 4 GPUs: a GPR of 4 holds them for an hour, one of 4 waits. With nothing written and
    nothing due, a pass only drives the backends and the plan counts as current; a write, a plan
    made by a read (which nobody acted on), or the hour's end makes the next pass plan."""
    sessions, clock, backend, _ = world
    planning = watching(sessions)
    reconciler = Reconciler(sessions, {backend.cluster: backend}, clock, planning=planning)
    holding = submit(sessions, "a", 4, 60, START)
    await reconciler.tick()  # admits it
    await settle(reconciler)  # bound
    waiting = submit(sessions, "b", 4, 30, START)
    await reconciler.tick()
    made = counting(planning)
    clock.advance(minutes=10)
    await reconciler.tick()
    assert not made
    assert planning.plan_now(None, clock.now) is planning.plan_now(None, clock.now)  # reused, not older
    submit(sessions, "b", 1, 30, clock.now)  # a write
    await reconciler.tick()
    assert len(made) == 1
    await planning.fresh(sessions, clock.now)  # a read's plan: the pass acts on a plan of its own
    await reconciler.tick()
    assert len(made) == 3
    clock.advance(minutes=50)  # the first window ends, the waiting GPR's start is due
    await reconciler.tick()
    assert len(made) == 4
    assert status(sessions, holding).status is core.Status.RELEASING
    await settle(reconciler)
    assert status(sessions, waiting).status is core.Status.PROVISIONED
