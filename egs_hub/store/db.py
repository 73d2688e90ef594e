"""Engines, sessions and migrations.

SQLite (the default, a file in the data directory, in WAL mode) or PostgreSQL
by URL. The schema is Alembic's: ``egs-hub db upgrade`` brings a database to
the revision this code expects, and the service refuses any other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker


class DatabaseError(Exception):
    """The database URL or its schema cannot be used; the message says what to do."""


def default_db_url(data_dir: str) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(data_dir, 'egs.sqlite'))}"


def normalize_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` for the psycopg 3 driver we ship."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"{url!r} is not a database URL; use sqlite:///PATH or postgresql://HOST/DB") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise DatabaseError(f"unsupported database {parsed.drivername!r}: use SQLite or PostgreSQL")
    return parsed.render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        path = make_url(url).database
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def _alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("egs_hub.store") / "migrations"))
    config.attributes["engine"] = engine
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(_alembic_config(None)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(_alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    command.downgrade(_alembic_config(engine), revision)


def check_schema(engine: Engine) -> None:
    """Raise DatabaseError unless the database is at the revision this code expects."""
    current, head = current_revision(engine), head_revision()
    if current != head:
        raise DatabaseError(
            f"the database {engine.url.render_as_string(hide_password=True)} is at schema "
            f"revision {current or 'none (empty)'}, this egs-hub expects {head}: "
            "run `egs-hub db upgrade` with the same --db-url"
        )


@contextlib.contextmanager
def transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    with sessions() as session, session.begin():
        yield session
