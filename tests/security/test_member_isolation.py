"""Issue 45: a member's code never runs with the service's rights (isolation system-users, egs-hub up as root).

The attack: a member deploys ``python3 -m http.server {port}`` as a ``command`` endpoint and downloads,
through the endpoint's own URL, the service's hub token, the hub's cookie secret and the databases from
the service's data directory (the server's working directory), or reads them by absolute path from
their code; their JupyterLab server could read them too. Here every member's code runs as their own
system account, in its own home, and cannot read the data directory, which only the service's user may
enter.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from egs_hub.core.system_names import system_username
from egs_hub.embedded import free_port

from ..conftest import DATABASES, new_db_url
from ..service.conftest import end_gprs
from ..service.hub import Hub, start_hub, start_server, stop_hub, wait_for
from ..service.test_endpoints import Caller
from .accounts import MEMBER_PREFIX, endpoint_pid, identity, member_python, open_directory, remove_account, run_as

HERE = os.path.dirname(__file__)
CONFIG = os.path.join(HERE, "hub_isolation_config.py")
STATE = ("egs_service_token", "jupyterhub_cookie_secret", "jupyterhub.sqlite", "egs.sqlite")
SERVICE_VARIABLES = {"EGS_DB_URL", "EGS_DATA_DIR", "EGS_COOKIE_SECRET", "EGS_CONFIG_FILE"}
# A JupyterLab server has a hub token of its own in these; an endpoint's server has none.
HUB_CLIENT_VARIABLES = {
    "JUPYTERHUB_API_TOKEN",
    "JPY_API_TOKEN",
    "JUPYTERHUB_CLIENT_ID",
    "JUPYTERHUB_OAUTH_CALLBACK_URL",
}
ENDPOINT_FORBIDDEN = SERVICE_VARIABLES | HUB_CLIENT_VARIABLES
# A member's server that reads what it is asked for by absolute path: ?path=FILE (or DIR/ to list it).
READER = r"""
import http.server, os, sys, urllib.parse
class Reader(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        asked = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("path")
        try:
            if not asked:
                body = b"ready"
            elif asked[0].endswith("/"):
                body = "\n".join(os.listdir(asked[0])).encode()
            else:
                with open(asked[0], "rb") as f:
                    body = f.read()
            status = 200
        except OSError as e:
            body, status = type(e).__name__.encode(), 403
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Reader).serve_forever()
"""


@pytest.fixture(scope="module")
def python() -> Iterator[str]:
    root = open_directory()
    try:
        yield member_python(root)
    finally:
        shutil.rmtree(root)


@pytest.fixture(scope="module", params=DATABASES)
def isolated_hub(request, postgres, python) -> Iterator[Hub]:
    """egs-hub up as root with isolation system-users, its data directory made open to others first
    (0755, in a directory others may enter): egs-hub up must close it."""
    root = open_directory()
    data_dir = os.path.join(root, "data")
    os.mkdir(data_dir)
    os.chmod(data_dir, 0o755)
    db_url = new_db_url(request.param, data_dir, postgres)
    hub = start_hub(data_dir, db_url, free_port(), config=CONFIG, env={"EGS_TEST_MEMBER_PYTHON": python})
    try:
        yield hub
    finally:
        stop_hub(hub)
        shutil.rmtree(root)


@pytest.fixture
def member(request, isolated_hub: Hub) -> Iterator[tuple[str, object, str]]:
    """A hub user (``isotest-<param><hex>``) in a new slice: (name, their client, slice). After the test its
    endpoints, server, GPRs and slice are gone, and its system account is removed."""
    hub, admin = isolated_hub, isolated_hub.admin()
    name = f"{MEMBER_PREFIX}-{getattr(request, 'param', '')}{secrets.token_hex(3)}"
    client = hub.client(hub.user_token(name))
    slice_name = f"iso-{secrets.token_hex(3)}"
    admin.post("slices", {"name": slice_name, "members": [name], "policy": {"max_active_gprs": 5}}, expect=201)
    try:
        yield name, client, slice_name
    finally:
        for made in admin.get(f"endpoints?slice={slice_name}", expect=200)["endpoints"]:
            admin.call("DELETE", f"endpoints/{slice_name}/{made['name']}", expect=204)
        hub.hub_api("DELETE", f"users/{quote(name)}/server", expect=(202, 204, 400))
        wait_for(lambda: not hub.hub_api("GET", f"users/{quote(name)}")["servers"], 60, f"{name}'s server to stop")
        wait_for(lambda: end_gprs(admin, slice_name), 60, f"slice {slice_name}'s GPRs to finish")
        admin.call("DELETE", f"slices/{slice_name}", expect=204)
        remove_account(name)


def state_files(hub: Hub) -> dict[str, bytes]:
    """The service's state in its data directory, as the test (root) reads it."""
    found = {}
    for name in STATE:
        path = os.path.join(hub.data_dir, name)
        if os.path.exists(path):  # egs.sqlite on SQLite only
            with open(path, "rb") as f:
                found[name] = f.read()
    assert {"egs_service_token", "jupyterhub_cookie_secret", "jupyterhub.sqlite"} <= set(found)
    return found


def command_endpoint(slice_name: str, name: str, command: list[str]) -> dict:
    return {
        "slice": slice_name,
        "name": name,
        "runtime": "command",
        "command": command,
        "health_path": "/",
        "duration": "1h",
        "idle_timeout": 600,
    }


def answering(call: Caller, what: str) -> None:
    wait_for(lambda: call("GET").status_code == 200, 90, what)


def assert_runs_as(pid: int, account: str, token: str, forbidden: set[str] = SERVICE_VARIABLES) -> None:
    """Process ``pid`` runs as system account ``account`` only, in its home (0700, its own), with its
    HOME and USER, and none of the ``forbidden`` variables, nor one holding the service's token."""
    who = identity(pid)
    assert os.geteuid() not in who.uids, f"pid {pid} runs as the service's user (uids {who.uids})"
    entry = pwd.getpwnam(account)
    assert who.uids == (entry.pw_uid,) * 4, f"pid {pid} runs as uid {who.uids}, not {account}'s {entry.pw_uid}"
    assert who.gids == (entry.pw_gid,) * 4 and who.groups == set(os.getgrouplist(account, entry.pw_gid))
    assert 0 not in who.groups and entry.pw_uid != 0
    assert who.cwd == entry.pw_dir == f"/home/{account}"
    home = os.stat(entry.pw_dir)
    assert home.st_uid == entry.pw_uid and stat.S_IMODE(home.st_mode) == 0o700
    assert who.environ["HOME"] == entry.pw_dir and who.environ["USER"] == account
    leaked = sorted(k for k, v in who.environ.items() if k in forbidden or token in v)
    assert not leaked, f"pid {pid} got the service's {leaked}"


def test_a_members_http_server_endpoint_serves_nothing_of_the_service(isolated_hub: Hub, member, python):
    hub = isolated_hub
    name, client, slice_name = member
    state = state_files(hub)
    token = state["egs_service_token"].decode().strip()
    server = [python, "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
    made = client.post("endpoints", command_endpoint(slice_name, "files", server), expect=202)
    call = Caller(hub, made["url"], hub.user_token(name))
    answering(call, "the member's http.server")

    data_dir = hub.data_dir.lstrip("/")
    for file, content in state.items():
        # the working directory, above it, and the data directory by absolute path
        for path in (file, f"%2e%2e/{file}", f"..%2f..%2f..%2f{data_dir}/{file}", f"{data_dir}/{file}"):
            answer = call("GET", path)
            assert answer.status_code == 404, f"GET {path}: {answer.status_code} {answer.content[:80]!r}"
            assert content not in answer.content
    assert_runs_as(endpoint_pid(slice_name, "files"), system_username(name), token, ENDPOINT_FORBIDDEN)


def test_a_members_endpoint_code_cannot_read_the_data_directory(isolated_hub: Hub, member, python):
    hub = isolated_hub
    name, client, slice_name = member
    state = state_files(hub)
    made = client.post(
        "endpoints", command_endpoint(slice_name, "reader", [python, "-c", READER, "{port}"]), expect=202
    )
    read = Caller(hub, made["url"], hub.user_token(name))
    answering(read, "the member's reader")

    for path in (hub.data_dir + "/", *(os.path.join(hub.data_dir, file) for file in state)):
        answer = read("GET", params={"path": path})
        assert (answer.status_code, answer.text) == (403, "PermissionError"), f"{path}: {answer.content[:80]!r}"
    home = pwd.getpwnam(system_username(name)).pw_dir
    own = read("GET", params={"path": home + "/"})
    assert own.status_code == 200, own.text  # what it may read, it reads: the 403s are the kernel's
    token = state["egs_service_token"].decode().strip()
    assert_runs_as(endpoint_pid(slice_name, "reader"), system_username(name), token, ENDPOINT_FORBIDDEN)


@pytest.mark.parametrize("member", ["ünï-"], indirect=True)  # a name that is hashed into its account's
def test_a_members_jupyterlab_server_runs_as_their_account(isolated_hub: Hub, member, python):
    hub = isolated_hub
    name, _, slice_name = member
    account = system_username(name)
    assert re.fullmatch(r"egs-isotest-un--[0-9a-f]{16}", account), account
    start_server(hub, name, slice_name)
    pid = hub.hub_api("GET", f"users/{quote(name)}")["servers"][""]["state"]["pid"]
    token_path = os.path.join(hub.data_dir, "egs_service_token")
    with open(token_path) as f:
        token = f.read().strip()
    assert_runs_as(pid, account, token)

    # what the server's code may do, its account may do: it cannot open the service's token
    probe = run_as(account, [python, "-c", f"open({token_path!r}).read()"])
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stdout + probe.stderr
    hub.hub_api("DELETE", f"users/{quote(name)}/server", expect=(202, 204))


def test_the_data_directory_is_closed_to_all_but_the_service(isolated_hub: Hub):
    mode = stat.S_IMODE(os.stat(isolated_hub.data_dir).st_mode)
    assert mode == 0o700, f"the data directory is {mode:o}"
    assert f"the data directory {isolated_hub.data_dir} was open to other users (mode 755)" in isolated_hub.log()


def test_the_dashboard_says_nothing_of_unisolated_members_when_they_are_isolated(isolated_hub: Hub):
    page = requests.get(
        f"{isolated_hub.url}/services/egs/admin/",
        headers={"Authorization": f"token {isolated_hub.admin_token}"},
        timeout=30,
    )
    assert page.status_code == 200 and "<h1>Dashboard</h1>" in page.text
    assert 'id="isolation-notice"' not in page.text
