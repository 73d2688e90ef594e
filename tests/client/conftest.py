"""One real egs-hub (SQLite) for the client tests, and EGS clients of its admin and of new members."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from egs_hub.client import EGSClient, EGSError
from egs_hub.embedded import free_port

from ..service.hub import Hub, start_hub, stop_hub, wait_for

FINISHED = {"complete", "cancelled", "rejected", "failed"}


@pytest.fixture(scope="session")
def hub(tmp_path_factory) -> Iterator[Hub]:
    data_dir = tmp_path_factory.mktemp("client-hub")
    running = start_hub(str(data_dir), f"sqlite:///{data_dir}/egs.sqlite", free_port())
    yield running
    stop_hub(running)


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


def end_gprs(admin: EGSClient, slice_name: str) -> bool:
    """Cancel or release what is left; True once every GPR of the slice is finished."""
    gprs = admin.gprs(slice=slice_name)
    for gpr in gprs:
        try:
            if gpr.status in ("pending-approval", "queued"):
                admin.cancel_gpr(gpr.id)
            elif gpr.status in ("provisioning", "provisioned"):
                admin.release_gpr(gpr.id)
        except EGSError as e:
            if e.status != 409:  # 409: it moved on since the listing; the next round sees it
                raise
    return all(g.status in FINISHED for g in gprs)


def until_status(client: EGSClient, gpr_id: int, status: str, timeout: float = 15):
    """The GPR once it has ``status``."""
    return wait_for(lambda: (g := client.gpr(gpr_id)).status == status and g, timeout, f"GPR {gpr_id} to be {status}")
