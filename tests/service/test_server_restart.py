"""A member's real server: its JupyterLab extension reaches the service as its owner and restarts it.

One egs-hub (SQLite) for the module. Alice's server is spawned by
SliceLocalSpawner; the extension (enabled by the venv's jupyter config) uses
the server's own $JUPYTERHUB_API_TOKEN, which must carry access to the EGS
service and let it read alice's groups. ``POST server-restarts/{user}``
restarts a server for its owner (here: the owner's server asking for it
through ``/egs/restart``) and refuses anyone else. Spawning takes seconds,
so the test restarts once.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from .hub import Hub, sqlite_hub, wait_for


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("restart-hub")) as running:
        yield running


def server_model(hub: Hub, user: str) -> dict | None:
    return hub.hub_api("GET", f"users/{quote(user)}")["servers"].get("")


def ready_since(hub: Hub, user: str, after: str | None = None) -> str:
    """When the user's default server started, once it is ready and started after ``after``."""
    return wait_for(
        lambda: (s := server_model(hub, user)) and s["ready"] and s["started"] != after and s["started"],
        120,
        f"{user}'s server to be ready",
        interval=0.5,
    )


def through_server(hub: Hub, user: str, token: str, method: str, path: str) -> requests.Response:
    """A request to the user's own server through the hub's proxy, as a script with a hub token would."""
    return requests.request(
        method, f"{hub.url}/user/{quote(user)}/{path}", headers={"Authorization": f"token {token}"}, timeout=30
    )


def restart_events(admin, slice_name: str, user: str) -> list[tuple[str, str]]:
    events = admin.get(f"events?slice={slice_name}", expect=200)["events"]
    return [(e["kind"], e["actor"]) for e in events if e["data"].get("user") == user and "restart" in e["kind"]]


def test_the_extension_acts_as_the_servers_owner_and_restarts_it(hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    _, as_bob = user("bob")
    team = make_slice(members=(alice,))
    alice_token = as_alice.token
    hub.hub_api("POST", f"users/{alice}/server", {"slice": team["name"]}, expect=(201, 202))
    try:
        started = ready_since(hub, alice)

        # The extension answers on her server, and reaches the service as alice with the server's token.
        config = through_server(hub, alice, alice_token, "GET", "egs/config")
        assert config.status_code == 200, config.text
        assert config.json() == {"user": alice, "server": "", "slice": team["name"], "service_configured": True}
        slices = through_server(hub, alice, alice_token, "GET", "egs/api/slices")
        assert slices.status_code == 200, slices.text
        assert [s["name"] for s in slices.json()["slices"]] == [team["name"]]
        assert through_server(hub, alice, alice_token, "GET", "egs/api/no-such-thing").status_code == 404

        # Nobody else restarts her server; the server itself (her token) does, through the extension.
        error = as_bob.post(f"server-restarts/{alice}", expect=403)
        assert alice in error["message"]
        restart = through_server(hub, alice, alice_token, "POST", "egs/restart")
        assert (restart.status_code, restart.json()) == (202, {"restarting": True})
        ready_since(hub, alice, after=started)
        wait_for(
            lambda: (
                restart_events(admin, team["name"], alice)
                == [("server-restart-requested", alice), ("server-restarted", alice)]
            ),
            30,
            "the restart's events",
        )

        # Her own token passes the owner check too; a server that is not running is a 404.
        error = as_alice.post(f"server-restarts/{alice}/{secrets.token_hex(3)}", expect=404)
        assert "no running server" in error["message"]
    finally:
        hub.hub_api("DELETE", f"users/{alice}/server", expect=(202, 204))
