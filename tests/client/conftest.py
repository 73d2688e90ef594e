"""One real egs-hub (SQLite) for the client tests, and EGS clients of its admin and of new members."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from egs_hub.client import EGSClient

from ..service.hub import Hub, sqlite_hub, wait_for
from .helpers import end_gprs


@pytest.fixture(scope="session")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("client-hub")) as running:
        yield running


@pytest.fixture(scope="session")
def admin(hub: Hub) -> Iterator[EGSClient]:
    with EGSClient(hub.api, hub.admin_token) as client:
        yield client


@pytest.fixture
def member(hub: Hub):
    """``member() -> (name, EGSClient)``: a new hub user with a token (in no slice yet)."""
    clients: list[EGSClient] = []

    def make(prefix: str = "u") -> tuple[str, EGSClient]:
        name = f"{prefix}-{secrets.token_hex(3)}"
        clients.append(EGSClient(hub.api, hub.user_token(name)))
        return name, clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def make_slice(admin: EGSClient):
    """Create slices with unique names; at teardown end their GPRs and delete them."""
    made: list[str] = []

    def make(*members: str, **options) -> str:
        name = f"c-{secrets.token_hex(3)}"
        admin.create_slice(name, members=list(members), **options)
        made.append(name)
        return name

    yield make
    for name in made:
        wait_for(lambda n=name: end_gprs(admin, n), 60, f"slice {name}'s GPRs to finish")
        admin.delete_slice(name)
