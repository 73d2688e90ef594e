"""One replica leads at a time; a replica that lost the lock commits nothing once another took it (the fence)."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from egs_hub.service.leadership import AdvisoryLock, Leadership, NotLeader
from egs_hub.store.db import make_engine, make_sessions, transaction, upgrade
from egs_hub.store.models import EventRow, LeaderRow


@pytest.fixture
def migrated(db_url):
    engine = make_engine(db_url)
    upgrade(engine)
    engine.dispose()
    return db_url


def event_row(message: str) -> EventRow:
    return EventRow(time=datetime.now(UTC), kind="note", actor="test", reason=message)


def let_go(leadership: Leadership) -> None:
    """The lock goes as when the leader's connection broke (PostgreSQL) or its process ended (SQLite),
    while the replica goes on running without knowing yet."""
    lock = leadership.lock
    if isinstance(lock, AdvisoryLock):
        lock._drop()
    else:
        os.close(lock._fd)
        lock._fd = None


async def test_one_replica_leads_and_the_next_takes_over_with_a_later_term(migrated):
    first = Leadership(migrated, "http://first:1", poll=0.05)
    second = Leadership(migrated, "http://second:1", poll=0.05)
    assert await first.try_take()
    assert first.term == 1
    assert not await second.try_take(), "two replicas lead at once"
    assert second.leader_url() == "http://first:1"
    waiting = asyncio.ensure_future(second.take())
    await asyncio.sleep(0.2)
    assert not waiting.done()
    let_go(first)
    assert await asyncio.wait_for(waiting, 5) == 2
    assert second.leader_url() == "http://second:1"
    await asyncio.wait_for(first.hold(), 5)  # the first finds it lost the lock


async def test_a_replica_that_lost_the_lock_commits_nothing_once_another_leads(migrated):
    first = Leadership(migrated, "http://first:1", poll=0.05)
    sessions = make_sessions(make_engine(migrated))
    first.fence(sessions)
    assert await first.try_take()
    with transaction(sessions) as session:
        session.add(event_row("while it leads"))
    let_go(first)
    second = Leadership(migrated, "http://second:1", poll=0.05)
    assert await second.try_take()
    with (
        pytest.raises(NotLeader, match="took term 1, another replica took term 2"),
        transaction(sessions) as session,
    ):
        session.add(event_row("after the next took over"))
    with sessions() as session:  # a read still works; a transaction that wrote nothing commits
        messages = set(session.scalars(select(EventRow.reason)))
        session.commit()
    assert messages == {"while it leads"}
    with sessions() as session:
        assert session.scalar(select(LeaderRow.term)) == 2
