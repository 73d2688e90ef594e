"""Fixtures shared by every test: databases on SQLite and PostgreSQL.

PostgreSQL comes from --postgres-url (or $EGS_TEST_POSTGRES_URL); each run
creates its own databases there and drops them after. If PostgreSQL cannot be
reached the tests that need it fail, saying so: nothing is skipped.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator

import psycopg
import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url

from egs_hub.embedded import free_port

from .service.hub import Hub, start_hub, stop_hub

# Examples are bounded by their count, not timed: beside the churn soak and the other worker a 2-core
# machine may take longer than hypothesis's 200 ms deadline for one example, which proves nothing.
settings.register_profile("egs", deadline=None)
settings.load_profile("egs")

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
DATABASES = ["sqlite", "postgresql"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--postgres-url",
        default=os.environ.get("EGS_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="PostgreSQL server (any database on it) where tests create their own databases",
    )
    parser.addoption(
        "--k8s-context",
        default=None,
        help="run tests/k8s against this context of $KUBECONFIG instead of the API emulator",
    )


class PostgresDatabases:
    """Creates throw-away databases on one PostgreSQL server."""

    def __init__(self, url: str):
        self.url = make_url(url)
        self.created: list[str] = []

    def _admin(self) -> psycopg.Connection:
        try:
            return psycopg.connect(
                self.url.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
            )
        except psycopg.OperationalError as e:
            pytest.fail(f"PostgreSQL at {self.url.render_as_string()} is unreachable ({e}); pass --postgres-url")

    def create(self) -> str:
        name = f"egs_test_{secrets.token_hex(6)}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return self.url.set(drivername="postgresql", database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self._admin() as conn:
            for name in self.created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres(request: pytest.FixtureRequest) -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases(request.config.getoption("--postgres-url"))
    yield databases
    databases.drop_all()


def new_db_url(kind: str, directory, postgres: PostgresDatabases) -> str:
    if kind == "sqlite":
        return f"sqlite:///{directory}/egs-{secrets.token_hex(4)}.sqlite"
    return postgres.create()


@pytest.fixture(params=DATABASES)
def db_url(request: pytest.FixtureRequest, tmp_path, postgres: PostgresDatabases) -> str:
    """An empty database, once on SQLite and once on PostgreSQL."""
    return new_db_url(request.param, tmp_path, postgres)


@pytest.fixture(scope="session")
def running_hubs(tmp_path_factory, postgres) -> Iterator[Callable[[str], Hub]]:
    """One egs-hub per database kind, started when first asked for and kept for the worker's whole run.

    tests/service/conftest.py's ``hub`` is parametrized by database kind, and pytest keeps one instance
    of a parametrized fixture at a time: a hub made there was stopped and started again at every module
    (10-18 s each)."""
    running: dict[str, Hub] = {}

    def get(kind: str) -> Hub:
        if kind not in running:
            data_dir = tmp_path_factory.mktemp(f"hub-{kind}")
            running[kind] = start_hub(str(data_dir), new_db_url(kind, data_dir, postgres), free_port())
        return running[kind]

    yield get
    for started in running.values():
        stop_hub(started)
