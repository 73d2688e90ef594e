"""Signup invites of the embedded login: one-use links that let one user name sign up at once.

Vocabulary: an *invite* lets one user name (normalised, as the hub keeps it) sign up at
``/hub/signup?invite=TOKEN`` and log in without waiting for an admin at /hub/authorize. An
admin makes it at /hub/invite (authenticator.py). Its *token* is shown once, in the link, and
stored only as its SHA-256 hash; it *expires* a lifetime after it was made (7 days unless
configured); it is *used* by the signup it authorized, and a newer invite for the same name
replaces an unused older one. An *open* invite is neither used nor expired.

A name is *reserved* while it has an open invite, or while it is a hub user (an admin added it to a
workspace, say) that nobody has signed up as: a signup without the invite is refused for it, so that
no stranger signs up first and takes the invite's name or the member's workspaces (issues 25, 45).
Any other signup waits for an admin at /hub/authorize.

Invites live in the hub's database, in their own table (``egs_signup_invites``), beside
NativeAuthenticator's ``users_info``. Times are naive UTC, as JupyterHub stores them.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import DateTime, String, Unicode, delete, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

INVITE_LIFETIME = timedelta(days=7)


class InviteBase(DeclarativeBase):
    pass


class SignupInvite(InviteBase):
    __tablename__ = "egs_signup_invites"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(Unicode(255), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[str] = mapped_column(Unicode(255))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    used_at: Mapped[datetime | None] = mapped_column(DateTime, default=None)


def create_invite_table(engine: Engine) -> None:
    InviteBase.metadata.create_all(engine, checkfirst=True)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def make_invite(
    db: Session, username: str, created_by: str, now: datetime, lifetime: timedelta
) -> tuple[str, datetime]:
    """A new invite for ``username`` (normalised), replacing its unused ones; (token, expires_at). Commits."""
    db.execute(delete(SignupInvite).where(SignupInvite.username == username, SignupInvite.used_at.is_(None)))
    token = secrets.token_urlsafe(32)
    invite = SignupInvite(
        username=username,
        token_hash=token_hash(token),
        created_by=created_by,
        created_at=now,
        expires_at=now + lifetime,
    )
    db.add(invite)
    db.commit()
    return token, invite.expires_at


def find_invite(db: Session, token: str) -> SignupInvite | None:
    return db.scalar(select(SignupInvite).where(SignupInvite.token_hash == token_hash(token)))


def open_invite(db: Session, username: str, now: datetime) -> SignupInvite | None:
    """The open invite for ``username`` (normalised), if it has one."""
    return db.scalar(
        select(SignupInvite).where(
            SignupInvite.username == username, SignupInvite.used_at.is_(None), SignupInvite.expires_at > now
        )
    )


def invited_names(db: Session, usernames: Collection[str]) -> set[str]:
    """Those of ``usernames`` that signed up through an invite (used one)."""
    if not usernames:
        return set()
    found = select(SignupInvite.username).where(
        SignupInvite.username.in_(list(usernames)), SignupInvite.used_at.is_not(None)
    )
    return set(db.scalars(found))


def invite_problem(invite: SignupInvite | None, now: datetime, username: str | None = None) -> str | None:
    """Why ``invite`` cannot sign ``username`` up, None when it can; without ``username``, why it cannot
    sign anyone up."""
    if invite is None:
        return (
            "This invitation link is not valid: it may be mistyped, or replaced by a newer one. "
            "Ask an admin for a new link, or sign up without one and wait for an admin to authorize you."
        )
    if invite.used_at is not None:
        return (
            f"This invitation was used already, to sign up {invite.username} on {invite.used_at:%Y-%m-%d %H:%M} UTC. "
            "Log in instead, or ask an admin for a new link."
        )
    if now >= invite.expires_at:
        return f"This invitation expired on {invite.expires_at:%Y-%m-%d %H:%M} UTC. Ask an admin for a new link."
    if username is not None and username != invite.username:
        return f"This invitation is for the user name {invite.username}, not {username}. Sign up as {invite.username}."
    return None
