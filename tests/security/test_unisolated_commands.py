"""Issue 45 where egs-hub cannot isolate members (isolation none: egs-hub up run as a normal user, or told
so): every member's code runs as the service's own OS user and could read its tokens and databases, so
``command`` endpoints are refused unless an admin allows them, and egs-hub says so at start and on the
admin's dashboard."""

from __future__ import annotations

import html
import os
import pwd
import re
import secrets
from collections.abc import Iterator

import pytest
import requests

from egs_hub.embedded import free_port

from ..conftest import DATABASES, new_db_url
from ..service.hub import Hub, start_hub, stop_hub

CONFIG = os.path.join(os.path.dirname(__file__), "hub_unisolated_config.py")
NOTICE = re.compile(r'<div id="isolation-notice"[^>]*>(.*?)</div>', re.S)


@pytest.fixture(scope="module", params=DATABASES)
def unisolated_hub(request, tmp_path_factory, postgres) -> Iterator[Hub]:
    data_dir = tmp_path_factory.mktemp(f"unisolated-{request.param}")
    hub = start_hub(str(data_dir), new_db_url(request.param, data_dir, postgres), free_port(), config=CONFIG)
    try:
        yield hub
    finally:
        stop_hub(hub)


def test_a_command_endpoint_is_refused_naming_runtime_and_the_option(unisolated_hub: Hub):
    hub, admin = unisolated_hub, unisolated_hub.admin()
    name = f"u-{secrets.token_hex(3)}"
    client = hub.client(hub.user_token(name))
    slice_name = f"t-{secrets.token_hex(3)}"
    admin.post("slices", {"name": slice_name, "members": [name]}, expect=201)
    body = {
        "slice": slice_name,
        "name": "files",
        "runtime": "command",
        "command": ["python3", "-m", "http.server", "{port}"],
        "duration": "1h",
    }
    refused = client.post("endpoints", body, expect=422)
    assert refused["field"] == "runtime"
    user = pwd.getpwuid(os.geteuid()).pw_name
    assert f"as the OS user running egs-hub ({user})" in refused["message"]
    assert "c.EGSService.allow_unisolated_commands = True" in refused["message"]
    # and nothing was made
    assert client.get(f"endpoints?slice={slice_name}", expect=200)["endpoints"] == []
    kinds = [e["kind"] for e in admin.get(f"events?slice={slice_name}&limit=100", expect=200)["events"]]
    assert not [kind for kind in kinds if kind.startswith("endpoint-")]
    admin.call("DELETE", f"slices/{slice_name}", expect=204)


def test_egs_hub_says_at_start_and_on_the_dashboard_that_members_run_as_its_user(unisolated_hub: Hub):
    hub = unisolated_hub
    user = pwd.getpwuid(os.geteuid()).pw_name
    said = f"every member's code (JupyterLab servers, endpoints) runs as the OS user running egs-hub ({user})"
    assert said in hub.log()
    page = requests.get(
        f"{hub.url}/services/egs/admin/", headers={"Authorization": f"token {hub.admin_token}"}, timeout=30
    )
    assert page.status_code == 200
    found = NOTICE.search(page.text)
    assert found, "the dashboard has no isolation notice"
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())
    assert said in text and "trusted members only" in text and "allow_unisolated_commands" in text
