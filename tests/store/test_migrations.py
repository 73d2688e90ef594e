"""Alembic migrations: up from empty to head, matching the models, and back down."""

from datetime import datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from egs_hub.core import model as core
from egs_hub.store import db, queries
from egs_hub.store.models import Base

NOW = datetime(2026, 11, 22, 12, 0)  # naive UTC, as the columns store it


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


def test_later_migrations_give_existing_slices_the_default_policy_and_go_back_down(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine, "0001")
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO projects (id, name, created_at) VALUES (1, 'default', :now)"), {"now": NOW}
        )
        connection.execute(
            text(
                "INSERT INTO slices (project_id, name, display_name, group_name, owns_group, max_gpus, "
                "max_priority, max_active_gprs, restart_servers, created_at, updated_at) "
                "VALUES (1, 'old', '', 'old', true, 8, 300, 1, false, :now, :now)"
            ),
            {"now": NOW},
        )

    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    with sessions() as session:
        policy = queries.slice_policy(queries.get_slice(session, "old"))
    assert policy == core.SlicePolicy(max_gpus=8)  # the defaults of every field 0002 and 0003 add

    db.downgrade(engine, "0002")
    columns = {c["name"] for c in inspect(engine).get_columns("slices")}
    assert not columns & {"idle_timeout_s", "max_idle_timeout_s"}
    assert "alerts" not in inspect(engine).get_table_names()
    db.downgrade(engine, "0001")
    columns = {c["name"] for c in inspect(engine).get_columns("slices")}
    assert not columns & {"max_gpu_hours", "reject_over_limits", "eviction", "requeue_evicted", "share"}
    with engine.connect() as connection:
        assert connection.execute(text("SELECT max_gpus FROM slices WHERE name = 'old'")).scalar() == 8
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
