"""On the JupyterHub the chart ships (issue 46, item 1): Zero to JupyterHub 4.3.2's hub image holds
JupyterHub 5.4.3.

Found: the hub settings gave every user the service's access scope through ``extra_user_scopes``,
which JupyterHub 6.0 added; 5.4 ignores it with a warning, and every non-admin got 403 at the service
and at the portal. Here the embedded default runs on JupyterHub 5.4.3, which ``make install-test``
puts in ``.cache/jupyterhub-5.4.3`` (the rest of the test environment's packages serve it) and which
goes first on the hub's and the service's ``PYTHONPATH``: a member who is no admin reaches the API with
a token and the portal after logging in, and the sidebar's server extension in the member's spawned
server reaches the service with the server's own token. The rest of the suite runs on the newest 6.x.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from egs_hub.embedded import free_port

from .hub import Hub, PageSession, invite, start_hub, start_server, stop_hub

VERSION = "5.4.3"
JUPYTERHUB_5_4 = os.path.join(os.path.dirname(__file__), "..", "..", ".cache", f"jupyterhub-{VERSION}")
PASSWORD = "a-long-enough-password"


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    if not os.path.isdir(os.path.join(JUPYTERHUB_5_4, "jupyterhub")):
        pytest.fail(f"JupyterHub {VERSION} is not in {os.path.abspath(JUPYTERHUB_5_4)}: run make install-test")
    data_dir = tmp_path_factory.mktemp("hub-5.4")
    path = os.pathsep.join(p for p in (os.path.abspath(JUPYTERHUB_5_4), os.environ.get("PYTHONPATH")) if p)
    running = start_hub(str(data_dir), f"sqlite:///{data_dir}/egs.sqlite", free_port(), env={"PYTHONPATH": path})
    yield running
    stop_hub(running)


def test_the_hub_is_jupyterhub_5_4(hub: Hub):
    assert hub.hub_api("GET", "")["version"] == VERSION


def test_a_member_reaches_the_api_with_a_token(hub: Hub):
    name = f"mia-{secrets.token_hex(3)}"
    member = hub.client(hub.user_token(name))
    team = hub.admin().post("slices", {"name": f"t-{secrets.token_hex(3)}", "members": [name]}, expect=201)["name"]
    assert [s["name"] for s in member.get("slices", expect=200)["slices"]] == [team]
    member.post("gprs", {"slice": team, "gpus": 1, "duration": "1h"}, expect=201)


def test_a_member_opens_the_portal_after_logging_in(hub: Hub):
    name = f"noa-{secrets.token_hex(3)}"
    hub.admin().post("slices", {"name": f"t-{secrets.token_hex(3)}", "members": [name]}, expect=201)
    link = invite(hub.admin_pages(), name)
    member = PageSession(hub.url)
    member.sign_up(name, PASSWORD, link)
    assert member.log_in(name, PASSWORD).status_code == 302
    portal = member.session.get(f"{hub.url}/services/egs/", timeout=30)
    assert portal.status_code == 200 and portal.url.startswith(f"{hub.url}/services/egs/"), portal.url
    api = member.session.get(f"{hub.url}/services/egs/api/v1/slices", timeout=30)
    assert api.status_code == 200 and [s["name"] for s in api.json()["slices"]], api.text


def test_a_members_server_extension_reaches_the_service(hub: Hub):
    """The sidebar's requests: the member's server forwards them with its $JUPYTERHUB_API_TOKEN, whose
    scopes JupyterHub 5.4 takes from the role ``server``."""
    name = f"ada-{secrets.token_hex(3)}"
    token = hub.user_token(name)
    team = hub.admin().post("slices", {"name": f"t-{secrets.token_hex(3)}", "members": [name]}, expect=201)["name"]
    start_server(hub, name, team)
    try:
        server = f"{hub.url}/user/{quote(name)}"
        headers = {"Authorization": f"token {token}"}
        config = requests.get(f"{server}/egs/config", headers=headers, timeout=30)
        assert config.status_code == 200 and config.json()["service_configured"], config.text
        slices = requests.get(f"{server}/egs/api/slices", headers=headers, timeout=30)
        assert slices.status_code == 200, slices.text
        assert [s["name"] for s in slices.json()["slices"]] == [team]
    finally:
        hub.hub_api("DELETE", f"users/{name}/server", expect=(202, 204))
