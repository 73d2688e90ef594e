"""End-to-end fixtures: one real egs-hub per database kind, shared by the tests of a module run."""

from __future__ import annotations

import secrets

import pytest

from ..conftest import DATABASES
from .hub import Client, Hub, wait_for

FINISHED = {"complete", "cancelled", "rejected", "failed"}


@pytest.fixture(scope="session", params=DATABASES)
def hub(request, running_hubs) -> Hub:
    """The run's egs-hub on each database kind (running_hubs, tests/conftest.py)."""
    return running_hubs(request.param)


@pytest.fixture
def admin(hub: Hub) -> Client:
    return hub.admin()


@pytest.fixture
def make_slice(hub: Hub, admin: Client):
    """Create slices with unique names; at teardown end their GPRs and delete them."""
    made: list[str] = []

    def make(members: tuple[str, ...] = (), **body) -> dict:
        name = body.pop("name", f"t-{secrets.token_hex(3)}")
        created = admin.post("slices", {"name": name, "members": list(members), **body}, expect=201)
        made.append(name)
        return created

    yield make
    for name in made:
        wait_for(lambda n=name: end_gprs(admin, n), 60, f"slice {name}'s GPRs to finish")
        admin.call("DELETE", f"slices/{name}", expect=204)


def end_gprs(admin: Client, slice_name: str) -> bool:
    """Cancel or release what is left; True once every GPR of the slice is finished.

    Called until it holds: a queued GPR may be admitted between the listing and the cancel.
    """
    gprs = admin.get_all(f"gprs?slice={slice_name}&limit=1000", "gprs")
    for gpr in gprs:
        if gpr["status"] in ("pending-approval", "queued"):
            admin.call("DELETE", f"gprs/{gpr['id']}")
        elif gpr["status"] in ("provisioning", "provisioned"):
            admin.post(f"gprs/{gpr['id']}/release")
    return all(g["status"] in FINISHED for g in gprs)


@pytest.fixture
def user(hub: Hub):
    """A hub user with a unique name and an API token: ``user() -> (name, Client)``."""

    def make(prefix: str = "u") -> tuple[str, Client]:
        name = f"{prefix}-{secrets.token_hex(3)}"
        return name, hub.client(hub.user_token(name))

    return make
