"""The jupyter-server extension against a real egs-hub: forwarding, errors, config, auth.

One egs-hub (SQLite) serves the module; the extension in pytest-jupyter's server
is configured with alice's hub token, as a hub-spawned server is with its own.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests
from tornado.httpclient import HTTPClientError
from traitlets import TraitError

from egs_hub.embedded import free_port
from egs_hub.lab.proxy import BadServicePath, service_target
from egs_hub.lab.server import EGSExtension

from ..service.hub import Client, Hub, sqlite_hub

MEMBER, SLICE, OTHER_SLICE = "alice", "team-a", "team-b"
UNREACHABLE = f"http://127.0.0.1:{free_port()}/services/egs/api/v1/"


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("lab-hub")) as running:
        admin = running.admin()
        admin.post("slices", {"name": SLICE, "members": [MEMBER]}, expect=201)
        admin.post("slices", {"name": OTHER_SLICE}, expect=201)
        yield running


@pytest.fixture(scope="module")
def member_token(hub: Hub) -> str:
    return hub.user_token(MEMBER)


@pytest.fixture
def as_member(hub: Hub, member_token: str) -> Client:
    """The service straight, as the member: what the extension must answer unchanged."""
    return hub.client(member_token)


@pytest.fixture
def egs_extension_config(hub: Hub, member_token: str) -> dict:
    return {"service_url": hub.api, "token": member_token}


@pytest.fixture
def egs_server_env() -> dict[str, str]:
    return {"JUPYTERHUB_USER": MEMBER, "JUPYTERHUB_SERVER_NAME": "", "EGS_SLICE": SLICE}


def body_of(response) -> dict:
    return json.loads(response.body)


async def fetch_error(jp_fetch, *parts, **kwargs) -> HTTPClientError:
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch(*parts, **kwargs)
    return caught.value


def later(hours: int) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).isoformat()


# --- forwarding -----------------------------------------------------------------------------


async def test_get_with_a_query_answers_what_the_service_answers(jp_fetch, as_member):
    response = await jp_fetch("egs", "api", "slices")
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert [s["name"] for s in body_of(response)["slices"]] == [SLICE]

    response = await jp_fetch("egs", "api", "events", params={"slice": SLICE, "limit": "2"})
    assert body_of(response) == as_member.get(f"events?slice={SLICE}&limit=2", expect=200)


async def test_post_patch_and_delete_with_bodies_act_as_the_member(jp_fetch, hub):
    gpr = {"slice": SLICE, "gpus": 1, "duration": "1h", "start_after": later(24), "name": "via-lab"}
    response = await jp_fetch("egs", "api", "gprs", method="POST", body=json.dumps(gpr))
    assert response.code == 201
    created = body_of(response)

    seen = hub.admin().get(f"gprs/{created['id']}", expect=200)
    assert (seen["requested_by"], seen["name"], seen["status"]) == (MEMBER, "via-lab", "queued")

    response = await jp_fetch("egs", "api", "gprs", str(created["id"]), method="PATCH", body='{"name": "renamed"}')
    assert body_of(response)["name"] == "renamed" == hub.admin().get(f"gprs/{created['id']}")["name"]

    reason = {"reason": "changed my mind"}
    response = await jp_fetch(
        "egs",
        "api",
        "gprs",
        str(created["id"]),
        method="DELETE",
        body=json.dumps(reason),
        allow_nonstandard_methods=True,
    )
    assert body_of(response)["status"] == "cancelled"
    events = hub.admin().get(f"events?gpr={created['id']}", expect=200)["events"]
    assert (events[-1]["kind"], events[-1]["actor"], events[-1]["reason"]) == ("cancelled", MEMBER, "changed my mind")


async def test_a_creates_idempotency_key_reaches_the_service(jp_fetch, hub):
    """The sidebar's retry of a create sends its key again through the extension: the service makes one GPR
    (issue 45)."""
    gpr = json.dumps({"slice": SLICE, "gpus": 1, "duration": "1h", "start_after": later(24), "name": "keyed"})
    key = {"Idempotency-Key": f"lab-{free_port()}-{datetime.now(UTC).timestamp()}"}
    first = await jp_fetch("egs", "api", "gprs", method="POST", body=gpr, headers=dict(key))
    again = await jp_fetch("egs", "api", "gprs", method="POST", body=gpr, headers=dict(key))
    assert (first.code, again.code) == (201, 201)
    assert body_of(again)["id"] == body_of(first)["id"]
    keyed = [g for g in hub.admin().get_all(f"gprs?slice={SLICE}&limit=1000", "gprs") if g["name"] == "keyed"]
    assert [g["id"] for g in keyed] == [body_of(first)["id"]]
    await jp_fetch(
        "egs", "api", "gprs", str(body_of(first)["id"]), method="DELETE", body="{}", allow_nonstandard_methods=True
    )


async def test_an_empty_answer_stays_empty(jp_fetch):
    # The spawner's call to forget a stopped server: 204, no body (alice has no server registered).
    response = await jp_fetch("egs", "api", "servers", MEMBER, method="DELETE")
    assert (response.code, response.body) == (204, b"")


@pytest.mark.parametrize(
    ("method", "path", "body", "want_status"),
    [
        ("GET", f"slices/{OTHER_SLICE}", None, 404),
        ("POST", "gprs", {"slice": SLICE, "gpus": "two", "duration": "1h"}, 400),
        ("GET", "gprs/999999", None, 404),
        ("GET", "no/such/route", None, 404),
    ],
    ids=["not a member", "bad field", "unknown GPR", "unknown route"],
)
async def test_service_errors_come_back_unchanged(jp_fetch, as_member, method, path, body, want_status):
    error = await fetch_error(
        jp_fetch, "egs", "api", *path.split("/"), method=method, body=None if body is None else json.dumps(body)
    )
    assert error.code == want_status
    assert error.response.headers["Content-Type"].startswith("application/json")
    assert body_of(error.response) == as_member.call(method, path, body, expect=want_status)


async def test_dot_segments_never_reach_the_service(jp_fetch):
    error = await fetch_error(jp_fetch, "egs", "api", "..", "..", "hub", "api", "users")
    assert error.code == 400
    assert "'..'" in body_of(error.response)["message"]


UNREADABLE = {
    "path not UTF-8": ("egs/api/slices/%ED%A0%80", "GET", None, "path", "the URL path is not valid UTF-8"),
    "path with NUL": ("egs/api/gprs/1%00/release", "POST", b"{}", "path", "NUL"),
    # what the extension forwards unread, the service answers
    "query not UTF-8": ("egs/api/gprs?slice=%FF", "GET", None, "slice", "slice is not valid UTF-8"),
    "body nested 100000 deep": ("egs/api/gprs", "POST", b"[" * 100_000 + b"]" * 100_000, "body", "nests deeper"),
    "lone surrogate in a body": ("egs/api/wait-times", "POST", b'{"slice": "\\ud800"}', "slice", "lone surrogate"),
}


@pytest.mark.parametrize("case", UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_unreadable_input_is_a_400_naming_it(http_server_client, jp_base_url, jp_auth_header, case):
    path, method, body, want_field, want_message = case
    response = await http_server_client.fetch(
        jp_base_url + path, method=method, body=body, headers=jp_auth_header, raise_error=False
    )
    assert response.code == 400, response.body[:300]
    assert response.headers["Content-Type"].startswith("application/json")
    error = body_of(response)
    assert error["status"] == 400 and error["field"] == want_field, error
    assert want_message in error["message"]


SERVICE_TARGETS = {
    "plain": ("gprs/3/release", "", "https://h/services/egs/api/v1/gprs/3/release"),
    "query kept": ("gprs", "slice=a&status=queued", "https://h/services/egs/api/v1/gprs?slice=a&status=queued"),
    "encoding kept": ("slices/a%2Fb/members/x%40y", "", "https://h/services/egs/api/v1/slices/a%2Fb/members/x%40y"),
    "dot-dot": ("../hub/api/users", "", None),
    "encoded dot-dot": ("gprs/%2e%2E/x", "", None),
    "dot": ("./gprs", "", None),
    "absolute": ("/hub/api/users", "", None),
}


@pytest.mark.parametrize("case", SERVICE_TARGETS.values(), ids=SERVICE_TARGETS.keys())
def test_service_target(case):
    path, query, want = case  # want: the URL, or None for refused
    if want is None:
        with pytest.raises(BadServicePath):
            service_target("https://h/services/egs/api/v1/", path, query)
    else:
        assert service_target("https://h/services/egs/api/v1/", path, query) == want


# --- no service -----------------------------------------------------------------------------


@pytest.mark.parametrize("egs_extension_config", [{"service_url": "", "token": ""}])
async def test_without_a_service_api_answers_503_saying_how_to_configure_it(jp_fetch):
    for method in ("GET", "POST"):
        error = await fetch_error(jp_fetch, "egs", "api", "gprs", method=method, body=None if method == "GET" else "{}")
        assert error.code == 503
        body = body_of(error.response)
        assert body["status"] == 503 and "c.EGSExtension.service_url" in body["message"]
    config = body_of(await jp_fetch("egs", "config"))
    assert config == {"user": MEMBER, "server": "", "slice": SLICE, "service_configured": False}
    assert (await fetch_error(jp_fetch, "egs", "restart", method="POST", body="")).code == 503


@pytest.mark.parametrize("egs_extension_config", [{"service_url": UNREACHABLE, "token": "some-token"}])
async def test_an_unreachable_service_is_a_502(jp_fetch):
    error = await fetch_error(jp_fetch, "egs", "api", "slices")
    assert error.code == 502
    body = body_of(error.response)
    assert body["status"] == 502 and UNREACHABLE in body["message"] and "some-token" not in body["message"]


# --- config and restart ---------------------------------------------------------------------


async def test_config_says_who_and_where_without_the_token(jp_fetch, member_token):
    response = await jp_fetch("egs", "config")
    assert body_of(response) == {"user": MEMBER, "server": "", "slice": SLICE, "service_configured": True}
    assert member_token not in response.body.decode()


@pytest.mark.parametrize("egs_server_env", [{}])
async def test_config_outside_a_hub(jp_fetch):
    config = body_of(await jp_fetch("egs", "config"))
    assert config == {"user": None, "server": "", "slice": None, "service_configured": True}
    error = await fetch_error(jp_fetch, "egs", "restart", method="POST", body="")
    assert error.code == 409 and "JUPYTERHUB_USER" in body_of(error.response)["message"]


async def test_restart_of_a_server_that_is_not_running_is_the_services_404(jp_fetch, as_member):
    error = await fetch_error(jp_fetch, "egs", "restart", method="POST", body="")
    assert error.code == 404
    assert body_of(error.response) == as_member.call("POST", f"server-restarts/{MEMBER}", expect=404)


# --- auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "parts"),
    [("GET", ("egs", "config")), ("GET", ("egs", "api", "slices")), ("POST", ("egs", "restart"))],
)
async def test_requests_without_a_login_are_refused(jp_fetch, method, parts):
    error = await fetch_error(
        jp_fetch, *parts, method=method, body=None if method == "GET" else "", headers={"Authorization": ""}
    )
    assert error.code == 403


async def test_cookie_logins_need_the_xsrf_token_to_post(jp_fetch, jp_serverapp, jp_base_url, http_server_port):
    base = f"http://127.0.0.1:{http_server_port[1]}{jp_base_url}"
    session = requests.Session()
    # As a browser: the token in a URL leaves a login cookie, a page leaves the _xsrf cookie.
    login = await in_thread(session.get, f"{base}api/status?token={jp_serverapp.identity_provider.token}")
    page = await in_thread(session.get, f"{base}login")
    assert login.status_code == page.status_code == 200 and "_xsrf" in session.cookies
    gpr = json.dumps({"slice": SLICE, "gpus": 1, "duration": "1h", "start_after": later(48)})

    refused = await in_thread(session.post, f"{base}egs/api/gprs", data=gpr)
    assert refused.status_code == 403 and "_xsrf" in refused.text

    headers = {"X-XSRFToken": session.cookies["_xsrf"]}
    created = await in_thread(session.post, f"{base}egs/api/gprs", data=gpr, headers=headers)
    assert created.status_code == 201, created.text
    await in_thread(session.delete, f"{base}egs/api/gprs/{created.json()['id']}", headers=headers)


async def in_thread(function, *args, **kwargs):
    """A blocking client call, run beside the loop that serves the jupyter server."""
    return await asyncio.to_thread(function, *args, timeout=30, **kwargs)


# --- configuration defaults -----------------------------------------------------------------


DEFAULTS = {
    "in a hub": (
        {"EGS_API_URL": "http://127.0.0.1:1/services/egs/api/v1/", "JUPYTERHUB_API_TOKEN": "server-token"},
        ("http://127.0.0.1:1/services/egs/api/v1/", "server-token"),
    ),
    "EGS_API_TOKEN wins": (
        {"EGS_API_URL": "https://h/api/v1", "EGS_API_TOKEN": "mine", "JUPYTERHUB_API_TOKEN": "server-token"},
        ("https://h/api/v1/", "mine"),
    ),
    "nothing set": ({}, ("", "")),
}


@pytest.mark.parametrize("case", DEFAULTS.values(), ids=DEFAULTS.keys())
def test_service_url_and_token_default_to_the_environment(monkeypatch, case):
    env, (want_url, want_token) = case
    for name in ("EGS_API_URL", "EGS_API_TOKEN", "JUPYTERHUB_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    extension = EGSExtension()
    assert (extension.service_url, extension.token) == (want_url, want_token)


def test_a_service_url_that_is_not_http_is_refused():
    with pytest.raises(TraitError, match="must be an http:// or https:// URL"):
        EGSExtension(service_url="hub.example.org/services/egs/api/v1/")


def test_importing_the_package_imports_neither_the_server_nor_the_widgets():
    script = (
        "import sys, egs_hub.lab as lab; "
        "assert not {'jupyter_server', 'ipywidgets'} & set(sys.modules), 'imported too early'; "
        "from egs_hub.lab import widgets; "
        "assert lab.RequestForm is widgets.RequestForm and lab.GpuMonitor is widgets.GpuMonitor; "
        "assert [p['app'].__name__ for p in lab._jupyter_server_extension_points()] == ['EGSExtension']"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
