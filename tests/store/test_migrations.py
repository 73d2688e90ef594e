"""Alembic migrations: up from empty to head, matching the models, and back down."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from egs_hub.store import db
from egs_hub.store.models import Base


def test_upgrade_from_empty_matches_models(db_url):
    engine = db.make_engine(db_url)
    assert db.current_revision(engine) is None

    db.upgrade(engine)

    assert db.current_revision(engine) == db.head_revision()
    db.check_schema(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_downgrade_to_empty_and_up_again(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    db.downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()


def test_service_refuses_a_database_behind_the_code(db_url):
    with pytest.raises(db.DatabaseError, match="egs-hub db upgrade"):
        db.check_schema(db.make_engine(db_url))


def test_urls_are_normalised_and_bad_ones_named():
    assert db.normalize_url("postgresql://u@h/d").startswith("postgresql+psycopg://")
    assert db.normalize_url("postgres://u@h/d").startswith("postgresql+psycopg://")
    with pytest.raises(db.DatabaseError, match="not a database URL"):
        db.normalize_url("not a url")
    with pytest.raises(db.DatabaseError, match="use SQLite or PostgreSQL"):
        db.normalize_url("mysql://u@h/d")


def test_sqlite_runs_in_wal_mode(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path}/egs.sqlite")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
