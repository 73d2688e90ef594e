"""Idempotency keys at the command and store level (issue 45, item 7): a key's record commits in the
transaction of what its create writes, or not at all, so a create committed just before a crash (its
answer lost) is what the retry finds, and a key another transaction committed undoes the create that
tries it again. On SQLite and PostgreSQL (``world``, ``db_url``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import IntegrityError

from egs_hub.core import model as core
from egs_hub.core.errors import InvalidRequest
from egs_hub.service.commands import Commands
from egs_hub.service.idempotency import (
    GPRS,
    KEEP,
    SLICES,
    Claim,
    KeyConflict,
    check_key,
    fingerprint_of,
)
from egs_hub.service.planning import Planning
from egs_hub.store import db
from egs_hub.store import idempotency as store
from egs_hub.store.db import transaction
from egs_hub.store.models import GPRRow, IdempotencyKeyRow

from ..service.test_reconcile import START, world  # noqa: F401

ALICE = ("user", "alice")
BODY = {"slice": "a", "gpus": 1, "duration": 600}


def spec() -> core.GPRSpec:
    return core.GPRSpec(slice="a", duration=timedelta(minutes=10), gpus=1)


def commands_of(sessions, clock) -> Commands:
    planning = Planning()
    planning.watch(sessions, timedelta(seconds=60))
    return Commands(sessions, planning, clock, max_start_after=timedelta(days=365))


def claim(sessions, clock, key: str | None = "k-1", body: object = BODY, create=GPRS, caller=ALICE) -> Claim:
    return Claim(sessions, clock, create, caller, key, fingerprint_of(body))


def gpr_count(sessions) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(GPRRow))


async def test_a_submits_key_commits_with_its_gpr_and_a_retry_after_the_answer_is_lost_finds_it(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    commits: list[int] = []
    event.listen(sessions, "after_commit", lambda session: commits.append(1))
    first = claim(sessions, clock)

    made = await commands_of(sessions, clock).submit(spec(), "alice", admin=False, also=first.record)

    assert len(commits) == 1  # the GPR, its event and the key: one transaction
    # The answer is lost (the service killed before it was sent); the retry, to a service started again
    # on the same store, finds what the first made.
    retry = claim(sessions, clock)
    assert retry.look_up() == made.gpr.id
    with sessions() as session:
        row = store.find(session, *ALICE, "k-1")
        assert (row.operation, row.made, row.created_at) == ("POST /gprs", made.gpr.id, clock.now)


async def test_a_key_committed_by_another_transaction_undoes_the_create_that_records_it_again(world):  # noqa: F811
    """The unique key: the second create with one key (another process's, past the in-process wait)
    fails as a whole, its GPR not written, and its retry finds the first's."""
    sessions, clock = world[0], world[1]
    commands = commands_of(sessions, clock)
    first = await commands.submit(spec(), "alice", admin=False, also=claim(sessions, clock).record)

    with pytest.raises(IntegrityError):
        await commands.submit(spec(), "alice", admin=False, also=claim(sessions, clock).record)

    assert gpr_count(sessions) == 1
    assert claim(sessions, clock).look_up() == first.gpr.id


async def test_a_create_that_fails_records_no_key(world):  # noqa: F811
    sessions, clock = world[0], world[1]
    refused = core.GPRSpec(slice="nope", duration=timedelta(minutes=10), gpus=1)
    with pytest.raises(Exception, match="no slice named 'nope'"):
        await commands_of(sessions, clock).submit(refused, "alice", admin=False, also=claim(sessions, clock).record)
    assert claim(sessions, clock).look_up() is None
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(IdempotencyKeyRow)) == 0


def test_a_record_of_another_body_or_operation_is_a_conflict_naming_the_header(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    with transaction(sessions) as session:
        store.add(session, *ALICE, "k-1", operation="POST /gprs", fingerprint=fingerprint_of(BODY), made=7, now=START)

    def clock():
        return START

    assert claim(sessions, clock, body={"duration": 600, "gpus": 1, "slice": "a"}).look_up() == 7  # key order
    for other in (claim(sessions, clock, body={**BODY, "gpus": 2}), claim(sessions, clock, create=SLICES)):
        with pytest.raises(KeyConflict, match="Idempotency-Key") as refused:
            other.look_up()
        assert refused.value.field == "Idempotency-Key"
    assert claim(sessions, clock, caller=("user", "bob")).look_up() is None  # another caller's key
    assert claim(sessions, clock, caller=("service", "alice")).look_up() is None
    engine.dispose()


def test_prune_deletes_a_few_records_older_than_a_day_and_keeps_the_rest(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    with transaction(sessions) as session:
        for i in range(5):
            at = START - KEEP - timedelta(minutes=5 - i)  # 5 past the day, oldest first
            store.add(session, *ALICE, f"old-{i}", operation="POST /gprs", fingerprint="f", made=i, now=at)
        store.add(session, *ALICE, "day", operation="POST /gprs", fingerprint="f", made=9, now=START - KEEP)

    with transaction(sessions) as session:
        assert store.prune(session, START - KEEP, most=3) == 3
    with transaction(sessions) as session:
        assert store.prune(session, START - KEEP, most=3) == 2
        assert store.prune(session, START - KEEP, most=3) == 0
    with sessions() as session:
        assert [r.key for r in session.scalars(select(IdempotencyKeyRow))] == ["day"]  # kept a whole day
    engine.dispose()


KEYS = {
    "a UUID": (["4f1c2a9e-5b7d-4e0f-9a3c-2d8e6f1b0a7c"], "4f1c2a9e-5b7d-4e0f-9a3c-2d8e6f1b0a7c"),
    "255 characters": (["~" * 255], "~" * 255),
    "inner spaces": (["a b"], "a b"),
    "no header": ([], None),
}
BAD_KEYS = {
    "empty": [""],
    "256 characters": ["k" * 256],
    "not ASCII": ["caf\u00e9"],
    "a tab": ["a\tb"],
    "DEL": ["\x7f"],
    "a control character": ["a\x01b"],
    "two headers": ["a", "b"],
}


@pytest.mark.parametrize("values, want", KEYS.values(), ids=KEYS.keys())
def test_check_key_takes_printable_ascii_up_to_255(values, want):
    assert check_key(values) == want


@pytest.mark.parametrize("values", BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_check_key_refuses_anything_else_naming_the_header(values):
    with pytest.raises(InvalidRequest) as refused:
        check_key(values)
    assert refused.value.field == "Idempotency-Key"


def test_a_fingerprint_is_the_json_value_not_its_spelling():
    assert fingerprint_of({"a": 1, "b": [1, 2]}) == fingerprint_of({"b": [1, 2], "a": 1})
    assert fingerprint_of({"a": 1}) != fingerprint_of({"a": 2})
    assert fingerprint_of({"a": [1, 2]}) != fingerprint_of({"a": [2, 1]})
