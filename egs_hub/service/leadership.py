"""Which replica of the service leads: plans, binds and answers the API. The others stand by.

Several replicas of the service may run on one database (the chart's ``egs.replicas``, on
PostgreSQL). One at a time holds the *lock* and is the *leader*; the others are *standbys*
(standby.py): they answer /health and forward every other request to the leader's URL,
and one of them takes the lock when the leader lets go of it. The lock goes with the
leader's process, so a leader killed with ``kill -9`` lets go of it at once:

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) on a connection of
  its own, which the server lets go of when the connection ends (TCP keepalives, set on the
  session, find within about 11 s a leader whose node vanished);
- SQLite: a file lock (``flock``) beside the database file, for replicas on one host; an
  in-memory database has one replica, which leads.

A *term* counts the leaders: the replica that takes the lock adds one to the ``leader`` row's
term and writes its URL there. Each write transaction of the leader checks, before it
commits and under a share lock of that row, that the term is still its own (``fence``): a
leader that lost its lock without knowing yet (its lock's connection broke) commits nothing
once the next one has begun, so no GPU is bound by two leaders. A leader checks its lock
every ``poll`` seconds (``hold``) and the service exits when it is lost; its supervisor starts
it again, as a standby.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import socket
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import create_engine, event, select, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from ..core.errors import Unavailable
from ..store.db import make_engine, make_sessions, normalize_url, transaction
from ..store.models import LeaderRow

log = logging.getLogger(__name__)

LOCK_KEY = 0x65677368  # "egsh": the advisory lock's key, the same for every replica of one database
_WROTE = "egs_fence_wrote"  # Session.info key: this transaction wrote something
# TCP keepalives on the lock's connection, both ways: the server ends the session of a leader whose
# node vanished (and lets go of its lock) within about 11 s, and the leader finds a server that vanished.
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "options": "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3",
}


class NotLeader(Unavailable):
    """A write of a replica that no longer leads: nothing of it was committed."""


class Lock(Protocol):
    def try_take(self) -> bool:
        """Take the lock if it is free; whether this process holds it now."""

    def held(self) -> bool:
        """Whether this process still holds the lock it took."""


class AdvisoryLock:
    """PostgreSQL's session-level advisory lock ``LOCK_KEY``, on a connection that stays open while held."""

    def __init__(self, url: str):
        self.engine = create_engine(url, poolclass=NullPool, connect_args=_KEEPALIVES)
        self._connection = None

    def try_take(self) -> bool:
        try:
            if self._connection is None:
                self._connection = self.engine.connect()
            taken = self._connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": LOCK_KEY}).scalar()
            self._connection.commit()
            return bool(taken)
        except Exception as e:
            log.warning("could not try the leader's lock: %s", e)
            self._drop()
            return False

    def held(self) -> bool:
        if self._connection is None:
            return False
        try:
            held = self._connection.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
                    "AND classid = 0 AND objid = :key AND granted"
                ),
                {"key": LOCK_KEY},
            ).scalar()
            self._connection.commit()
            return held == 1
        except Exception as e:
            log.error("the leader's lock is lost: its connection failed: %s", e)
            self._drop()
            return False

    def _drop(self) -> None:
        if self._connection is not None:
            try:
                self._connection.invalidate()
                self._connection.close()
            except Exception:  # already broken: nothing to give back
                pass
            self._connection = None


class FileLock:
    """An exclusive ``flock`` on ``path``, held while this process has the file open."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    def try_take(self) -> bool:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def held(self) -> bool:
        return self._fd is not None  # a flock is let go of only with the file


class Alone:
    """An in-memory database: no other replica can share it, so this one leads."""

    def try_take(self) -> bool:
        return True

    def held(self) -> bool:
        return True


def lock_for(db_url: str) -> Lock:
    url = make_url(normalize_url(db_url))
    if url.get_backend_name() == "postgresql":
        return AdvisoryLock(url.render_as_string(hide_password=False))
    if not url.database or url.database == ":memory:":
        return Alone()
    return FileLock(os.path.abspath(url.database) + ".leader")


class Leadership:
    """This replica's part in who leads (module doc): ``take`` the lock (waiting for it), ``hold`` it,
    ``fence`` the service's writes with the term it took; ``leader_url`` for a standby."""

    def __init__(self, db_url: str, url: str, poll: float = 1.0, lock: Lock | None = None):
        """``url``: where this replica serves when it leads (what the standbys forward to)."""
        self.url = url
        self.poll = poll
        self.lock = lock or lock_for(db_url)
        self.engine: Engine = make_engine(db_url)
        self.sessions = make_sessions(self.engine)
        self.term: int | None = None  # the term this replica leads in; None while it stands by
        self.holder = f"{socket.gethostname()}:{os.getpid()}"

    async def try_take(self) -> bool:
        """Lead if the lock is free; whether this replica leads now."""
        if self.term is None and await asyncio.to_thread(self.lock.try_take):
            self.term = await asyncio.to_thread(self._begin_term)
            log.info("this replica (%s) leads, term %d", self.holder, self.term)
        return self.term is not None

    async def take(self) -> int:
        """Wait for the lock; the term this replica leads in."""
        while not await self.try_take():
            await asyncio.sleep(self.poll)
        return self.term

    def _begin_term(self) -> int:
        with transaction(self.sessions) as session:
            row = session.scalar(select(LeaderRow).where(LeaderRow.id == 1).with_for_update())
            if row is None:
                row = LeaderRow(id=1, term=0)
                session.add(row)
            row.term += 1
            row.url, row.holder, row.since = self.url, self.holder, datetime.now(UTC)
            return row.term

    async def hold(self) -> None:
        """Return when this replica has lost the lock it leads with (checked every ``poll`` seconds)."""
        while await asyncio.to_thread(self.lock.held):
            await asyncio.sleep(self.poll)
        log.error("this replica (%s) lost the leader's lock (term %d)", self.holder, self.term)

    def leader_url(self) -> str | None:
        """Where the leader serves, as the last replica that took the lock wrote it; None before any did."""
        with self.sessions() as session:
            return session.scalar(select(LeaderRow.url).where(LeaderRow.id == 1))

    def database_answers(self) -> bool:
        try:
            with self.sessions() as session:
                session.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    def fence(self, sessions: sessionmaker[Session]) -> None:
        """Refuse (NotLeader) to commit a transaction of ``sessions`` that wrote, once another replica
        has taken a later term."""
        event.listen(sessions, "after_flush", _wrote)
        event.listen(sessions, "do_orm_execute", _executed)
        event.listen(sessions, "after_rollback", _forget)
        event.listen(sessions, "before_commit", self._check_term)

    def _check_term(self, session: Session) -> None:
        if session.new or session.dirty or session.deleted:
            session.flush()
        if not session.info.pop(_WROTE, False):
            return
        term = session.scalar(select(LeaderRow.term).where(LeaderRow.id == 1).with_for_update(read=True))
        if term != self.term:
            raise NotLeader(
                f"this replica ({self.holder}) no longer leads: it took term {self.term}, another replica took "
                f"term {term}; nothing was written, send the request again"
            )


def _wrote(session: Session, _context) -> None:
    session.info[_WROTE] = True


def _executed(state) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        state.session.info[_WROTE] = True


def _forget(session: Session) -> None:
    session.info.pop(_WROTE, None)
