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


def test_0011_to_0013_keep_the_data_of_the_schema_before_them(db_url):
    """A store at 0010 (before templates, cost and projects) with a slice and a provisioned GPR."""
    engine = db.make_engine(db_url)
    db.upgrade(engine, "0010")
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
        connection.execute(
            text(
                "INSERT INTO gprs (id, name, slice, requested_by, gpus, priority, duration_s, preemptible, status, "
                "status_reason, window_start, window_end, created_at, updated_at) VALUES "
                "(7, '', 'old', 'ann', 2, 101, 3600, true, 'provisioned', '', :now, :now, :now, :now)"
            ),
            {"now": NOW},
        )
        connection.execute(
            text(
                "INSERT INTO events (time, kind, actor, reason, gpr_id, slice, data) "
                "VALUES (:now, 'submitted', 'ann', '', 7, 'old', '{}')"
            ),
            {"now": NOW},
        )
        connection.execute(
            text("INSERT INTO slice_namespaces (slice_id, cluster, namespace) VALUES (1, 'east', 'old-ns')")
        )

    db.upgrade(engine)
    with db.make_sessions(engine)() as session:
        row = queries.get_slice(session, "old")
        assert (row.project.name, row.project.display_name, row.project.admin_group) == ("default", "", None)
        assert queries.slice_policy(row).max_cost_month is None
        gpr = queries.to_gpr(queries.get_gpr_row(session, 7))
        assert (gpr.spec.template, gpr.price_per_gpu_hour, gpr.status) == (None, None, core.Status.PROVISIONED)
        assert queries.templates(session) == [] and queries.prices(session) == {}

    db.downgrade(engine, "0010")
    assert not {"gpr_templates", "prices", "gpr_utilization"} & set(inspect(engine).get_table_names())
    with engine.connect() as connection:  # nothing that refers to gprs, slices or projects went with them
        assert connection.execute(text("SELECT slice FROM gprs WHERE id = 7")).scalar() == "old"
        assert connection.execute(text("SELECT count(*) FROM events WHERE gpr_id = 7")).scalar() == 1
        assert connection.execute(text("SELECT namespace FROM slice_namespaces")).scalar() == "old-ns"


def test_0013_makes_the_default_project_on_a_store_without_one(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT name FROM projects")).scalars().all() == ["default"]
