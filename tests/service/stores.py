"""An upgraded SQLite store holding one slice with namespaces, for the in-process service tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from egs_hub.core.model import SlicePolicy
from egs_hub.store import db, queries
from egs_hub.store.db import transaction
from egs_hub.store.models import Slice


def store_with_slice(
    directory, name: str, namespaces: Mapping[str, tuple[str, ...]], policy: SlicePolicy | None = None
) -> sessionmaker[Session]:
    """Sessions of ``directory``/egs.sqlite, where slice ``name`` (hub group of the same name) has ``namespaces``."""
    engine = db.make_engine(f"sqlite:///{directory}/egs.sqlite")
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    now = datetime.now(UTC)
    with transaction(sessions) as session:
        row = Slice(name=name, group_name=name, project_id=queries.project_id(session, now))
        row.created_at = row.updated_at = now
        queries.write_slice_policy(row, policy or SlicePolicy())
        session.add(row)
        session.flush()
        queries.set_namespaces(session, row, namespaces)
    return sessions
