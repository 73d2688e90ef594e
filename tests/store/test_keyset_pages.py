"""Keyset pages of alerts on SQLite and PostgreSQL: newest first by (raised_at, id), equal
times split by id, every alert exactly once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from egs_hub.service import cursors
from egs_hub.store import db, queries
from egs_hub.store.db import transaction
from egs_hub.store.models import AlertRow

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_alert_pages_cover_every_alert_once_newest_first(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    # Three alerts at the same instant, so that only the id tells them apart.
    raised = [NOW, NOW + timedelta(minutes=1), NOW + timedelta(minutes=1), NOW + timedelta(minutes=1), NOW]
    with transaction(sessions) as session:
        for i, at in enumerate(raised):
            session.add(AlertRow(kind="xid", gpu_uuid=f"GPU-{i}", slice="team-a", message="m", raised_at=at))
    with sessions() as session:
        whole = queries.alert_rows(session, slices=None, since=None, active=None, limit=100)
        found, before = [], None
        while True:
            rows = queries.alert_rows(session, slices=["team-a"], since=None, active=None, limit=3, before=before)
            page, cursor = cursors.ALERTS.page(rows, 2, key=lambda r: (r.raised_at, r.id))
            found.append([r.id for r in page])
            if cursor is None:
                break
            before = cursors.ALERTS.after(cursor)
    assert [len(p) for p in found] == [2, 2, 1]
    assert [i for p in found for i in p] == [r.id for r in whole]
    assert [(r.raised_at, r.id) for r in whole] == sorted(((r.raised_at, r.id) for r in whole), reverse=True)
