"""Signup invites (egs_hub/invites.py) on an in-memory database: stored hashed, one per name, and why one is refused."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from egs_hub.invites import SignupInvite, create_invite_table, find_invite, invite_problem, make_invite

NOW = datetime(2030, 1, 1, 12, 0)
WEEK = timedelta(days=7)


@pytest.fixture
def db() -> Iterator[Session]:
    engine = create_engine("sqlite://")
    create_invite_table(engine)
    create_invite_table(engine)  # a second start finds the table there
    with Session(engine) as session:
        yield session
    engine.dispose()


def test_the_token_is_stored_only_as_its_hash(db):
    token, expires_at = make_invite(db, "alice", "admin", NOW, WEEK)
    assert expires_at == NOW + WEEK
    stored = db.scalars(select(SignupInvite)).one()
    assert stored.username == "alice" and stored.created_by == "admin"
    assert token not in (stored.token_hash, stored.username) and len(stored.token_hash) == 64
    assert find_invite(db, token) is stored
    assert find_invite(db, token[:-1]) is None


def test_a_new_invite_replaces_the_unused_one_but_not_a_used_one(db):
    first, _ = make_invite(db, "bob", "admin", NOW, WEEK)
    second, _ = make_invite(db, "bob", "admin", NOW, WEEK)
    assert find_invite(db, first) is None
    used = find_invite(db, second)
    used.used_at = NOW
    db.commit()
    third, _ = make_invite(db, "bob", "admin", NOW, WEEK)
    assert find_invite(db, second) is used and find_invite(db, third) is not None


@dataclass(frozen=True)
class Case:
    invite: SignupInvite | None
    now: datetime = NOW
    username: str | None = None  # who signs up; None: only opening the link
    want: str | None = None  # a piece of the refusal; None: accepted


def invite_for(name: str, *, used_at: datetime | None = None) -> SignupInvite:
    return SignupInvite(
        username=name, token_hash="x", created_by="admin", created_at=NOW, expires_at=NOW + WEEK, used_at=used_at
    )


CASES = {
    "valid, opened": Case(invite_for("carol")),
    "valid, its name": Case(invite_for("carol"), username="carol"),
    "a minute before it expires": Case(invite_for("carol"), now=NOW + WEEK - timedelta(minutes=1), username="carol"),
    "unknown": Case(None, want="This invitation link is not valid"),
    "another name": Case(
        invite_for("carol"), username="dave", want="This invitation is for the user name carol, not dave."
    ),
    "used": Case(
        invite_for("carol", used_at=NOW),
        username="carol",
        want="used already, to sign up carol on 2030-01-01 12:00 UTC",
    ),
    "used, another name": Case(invite_for("carol", used_at=NOW), username="dave", want="used already"),
    "expired": Case(invite_for("carol"), now=NOW + WEEK, username="carol", want="expired on 2030-01-08 12:00 UTC"),
    "expired, opened": Case(invite_for("carol"), now=NOW + WEEK + timedelta(days=1), want="expired"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_invite_problem(case: Case):
    problem = invite_problem(case.invite, case.now, case.username)
    if case.want is None:
        assert problem is None
    else:
        assert problem is not None and case.want in problem
