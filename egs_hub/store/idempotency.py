"""Idempotency keys in the store: the ``idempotency_keys`` rows (service/idempotency.py says what they mean)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from .models import IdempotencyKeyRow


def find(session: Session, caller_kind: str, caller: str, key: str) -> IdempotencyKeyRow | None:
    """The record of ``key`` sent by the caller, if a create with it committed."""
    query = select(IdempotencyKeyRow).where(
        IdempotencyKeyRow.caller_kind == caller_kind, IdempotencyKeyRow.caller == caller, IdempotencyKeyRow.key == key
    )
    return session.scalars(query).one_or_none()


def add(
    session: Session,
    caller_kind: str,
    caller: str,
    key: str,
    *,
    operation: str,
    fingerprint: str,
    made: int,
    now: datetime,
) -> None:
    """Record ``key`` in the session's transaction; flushed, so that a key another transaction committed (or
    holds uncommitted, on PostgreSQL: this waits for it) fails here with an IntegrityError."""
    session.add(
        IdempotencyKeyRow(
            caller_kind=caller_kind,
            caller=caller,
            key=key,
            operation=operation,
            fingerprint=fingerprint,
            made=made,
            created_at=now,
        )
    )
    session.flush()


def prune(session: Session, before: datetime, most: int) -> int:
    """Delete at most ``most`` of the keys recorded before ``before``, oldest first; how many went.

    Rows another transaction is deleting are skipped (PostgreSQL's SKIP LOCKED), so two prunes at once
    neither wait for nor deadlock with each other."""
    old = (
        select(IdempotencyKeyRow.id)
        .where(IdempotencyKeyRow.created_at < before)
        .order_by(IdempotencyKeyRow.created_at)
        .limit(most)
        .with_for_update(skip_locked=True)
    )
    ids = list(session.scalars(old))
    if ids:
        session.execute(delete(IdempotencyKeyRow).where(IdempotencyKeyRow.id.in_(ids)))
    return len(ids)
