"""The clients follow the service's cursor pages: list methods answer every item, in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from egs_hub.client import AsyncEGSClient

from ..service.hub import Hub

LATER = datetime.now(UTC) + timedelta(days=5)


def submit_later(client, team: str, count: int) -> list[int]:
    """``count`` GPRs that wait for a start a few days away (queued, not holding GPUs)."""
    return [
        client.create_gpr(team, "1h", gpus=1, start_after=LATER + timedelta(hours=count - i)).id for i in range(count)
    ]


def test_lists_follow_next_cursor_to_the_end(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice, policy={"max_active_gprs": 10})
    made = submit_later(as_alice, team, 5)
    every_event = as_alice.events(slice=team)
    every_queued = [q.id for q in as_alice.queue()]

    as_alice.page_limit = 2  # pages of 2: three pages for five GPRs
    assert [g.id for g in as_alice.gprs(slice=team)] == made
    assert [q.id for q in as_alice.queue()] == every_queued
    paged_events = as_alice.events(slice=team)
    assert [e.id for e in paged_events] == [e.id for e in every_event] and len(paged_events) >= 5
    assert [e.time for e in paged_events] == sorted(e.time for e in paged_events)  # oldest first
    assert [e.id for e in as_alice.events(slice=team, limit=3)] == [e.id for e in every_event][-3:]  # the newest 3


async def test_the_async_client_follows_next_cursor_too(hub: Hub, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice, policy={"max_active_gprs": 10})
    made = submit_later(as_alice, team, 3)
    async with AsyncEGSClient(hub.api, hub.user_token(alice)) as client:
        client.page_limit = 1
        assert [g.id for g in await client.gprs(slice=team)] == made
        assert [e.id for e in await client.events(slice=team)] == [e.id for e in as_alice.events(slice=team)]
