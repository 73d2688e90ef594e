"""Inference endpoints end to end on this host: the ``command`` runtime serving a real HTTP server (the
test's endpoint_server.py) through the hub's proxy, its replicas' GPRs, scaling with load and to zero."""

from __future__ import annotations

import os
import re
import sys
import threading

import pytest
import requests

from .hub import Client, Hub, restart_service, wait_for

SERVER = os.path.join(os.path.dirname(__file__), "endpoint_server.py")
LIVE = {"pending-approval", "queued", "provisioning", "provisioned"}


def endpoint_body(slice_name: str, name: str = "echo", **fields) -> dict:
    return {
        "slice": slice_name,
        "name": name,
        "runtime": "command",
        "command": [sys.executable, SERVER, "{port}"],
        "duration": "1h",
        "idle_timeout": 600,
        **fields,
    }


class Caller:
    """Requests at an endpoint's path at the hub, with a hub token."""

    def __init__(self, hub: Hub, path: str, token: str | None):
        self.base = hub.url + path
        self.headers = {"Authorization": f"token {token}"} if token else {}

    def __call__(self, method: str, path: str = "", **kw) -> requests.Response:
        return requests.request(
            method, self.base + path, headers=self.headers, timeout=120, allow_redirects=False, **kw
        )


def gprs_of(client: Client, slice_name: str) -> list[dict]:
    return client.get_all(f"gprs?slice={slice_name}&limit=100", "gprs")


def endpoint(client: Client, slice_name: str, name: str = "echo") -> dict:
    return client.get(f"endpoints/{slice_name}/{name}", expect=200)


@pytest.fixture
def member(user, make_slice):
    name, client = user("ep")
    made = make_slice(members=(name,), policy={"max_active_gprs": 5})
    return name, client, made["name"]


def test_an_endpoint_serves_through_the_hub_and_scales(hub: Hub, member, user, admin):
    name, client, slice_name = member
    made = client.post(
        "endpoints", endpoint_body(slice_name, min_replicas=0, max_replicas=2, target_concurrency=2), expect=202
    )
    # a new endpoint starts one replica (then scales to min_replicas once idle)
    assert made["status"] == "pending" and made["url"] == f"/services/egs/endpoints/{slice_name}/echo/"
    assert made["gprs"] == [] and made["created_by"] == name and made["wanted_replicas"] == 1
    token = hub.user_token(name)
    call = Caller(hub, made["url"], token)

    # a request waits for its server, and passes through with the path and query
    answer = call("POST", "v1/completions?x=1", data=b'{"prompt": "hi"}')
    assert answer.status_code == 200, answer.text
    served = answer.json()
    assert served["path"] == "/v1/completions" and served["query"] == "x=1" and served["method"] == "POST"
    assert served["body"] == '{"prompt": "hi"}'
    assert served["authorization"] is None and served["cookie"] is None and served["token"] is None
    (gpr,) = [g for g in gprs_of(client, slice_name) if g["status"] in LIVE]
    assert served["gprs"] == str(gpr["id"]) and served["gpus"]  # bound to its GPR's GPUs
    assert gpr["requested_by"] == name and gpr["name"] == "endpoint echo" and gpr["status"] == "provisioned"
    now = endpoint(client, slice_name)
    assert now["status"] == "ready" and now["replicas"] == 1 and now["gprs"] == [gpr["id"]]
    assert now["replica_states"][0]["state"] == "ready" and now["requests_per_second"] > 0

    streamed = call("GET", "stream", stream=True)
    assert streamed.headers["Content-Type"] == "text/event-stream"
    assert [line for line in streamed.iter_lines() if line] == [b"data: 0", b"data: 1", b"data: 2"]

    scraped = requests.get(
        f"{hub.url}/services/egs/metrics", headers={"Authorization": f"Bearer {hub.admin_token}"}, timeout=30
    ).text
    labels = f'endpoint="echo",slice="{slice_name}"'
    assert f'egs_endpoint_replicas{{{labels},state="ready"}} 1.0' in scraped
    assert re.search(rf"^egs_endpoint_requests_total\{{{labels}\}} [1-9]", scraped, re.MULTILINE), scraped[-2000:]
    assert f'egs_endpoint_latency_seconds{{endpoint="echo",quantile="0.95",slice="{slice_name}"}}' in scraped

    # who may call it: the slice's members only
    assert Caller(hub, made["url"], None)("GET").status_code in (401, 403)
    stranger_name, _ = user("other")
    stranger_token = hub.user_token(stranger_name)
    refused = Caller(hub, made["url"], stranger_token)("GET")
    missing = f"no endpoint named 'echo' in slice '{slice_name}'"  # as if it did not exist
    assert refused.status_code == 404 and refused.json()["message"] == missing
    assert Caller(hub, f"/services/egs/endpoints/{slice_name}/nope/", token)("GET").status_code == 404

    # concurrent requests need a second replica (two requests in flight per replica)
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            call("GET", "slow?sleep=0.5")

    workers = [threading.Thread(target=load) for _ in range(6)]
    for worker in workers:
        worker.start()
    try:
        wait_for(lambda: endpoint(client, slice_name)["replicas"] == 2, 60, "a second ready replica")
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    scaled = endpoint(client, slice_name)
    assert len(scaled["gprs"]) == 2 and scaled["wanted_replicas"] == 2
    events = admin.get(f"events?slice={slice_name}&limit=100", expect=200)["events"]
    kinds = [e["kind"] for e in events]
    assert "endpoint-scaled" in kinds and "endpoint-ready" in kinds and "endpoint-created" in kinds

    # idle: to zero, its GPRs given back; a request brings it back
    client.call("PATCH", f"endpoints/{slice_name}/echo", {"idle_timeout": 2}, expect=200)
    wait_for(lambda: endpoint(client, slice_name)["status"] == "scaled-to-zero", 60, "the endpoint to scale to zero")
    assert not [g for g in gprs_of(client, slice_name) if g["status"] in LIVE]
    kept = admin.call("DELETE", f"slices/{slice_name}", expect=409)
    assert f"slice {slice_name!r} has endpoints (echo)" in kept["message"]
    assert call("GET", "again").status_code == 200
    assert endpoint(client, slice_name)["replicas"] == 1

    client.call("DELETE", f"endpoints/{slice_name}/echo", expect=204)
    wait_for(lambda: not [g for g in gprs_of(client, slice_name) if g["status"] in LIVE], 30, "its GPRs to end")
    client.get(f"endpoints/{slice_name}/echo", expect=404)


def test_a_change_restarts_its_servers_and_a_scale_holds(hub: Hub, member):
    name, client, slice_name = member
    made = client.post("endpoints", endpoint_body(slice_name, "greet", min_replicas=1, max_replicas=2), expect=202)
    call = Caller(hub, made["url"], hub.user_token(name))
    wait_for(lambda: endpoint(client, slice_name, "greet")["status"] == "ready", 60, "the endpoint to be ready")
    first = call("GET").json()
    assert first["greeting"] is None
    client.call("PATCH", f"endpoints/{slice_name}/greet", {"env": {"GREETING": "hello"}}, expect=200)
    wait_for(lambda: call("GET").json()["greeting"] == "hello", 60, "the server to restart with the new environment")

    scaled = client.post(f"endpoints/{slice_name}/greet/scale", {"replicas": 2}, expect=202)
    assert scaled["wanted_replicas"] == 2
    wait_for(lambda: endpoint(client, slice_name, "greet")["replicas"] == 2, 60, "two ready replicas")
    refused = client.post(f"endpoints/{slice_name}/greet/scale", {"replicas": 3}, expect=422)
    assert refused["field"] == "replicas" and "max_replicas" in refused["message"]
    client.call("DELETE", f"endpoints/{slice_name}/greet", expect=204)


def test_bad_endpoints_are_refused_naming_the_field(hub: Hub, member, user):
    _, client, slice_name = member
    no_command = client.post("endpoints", {"slice": slice_name, "name": "x", "runtime": "command"}, expect=400)
    assert no_command["field"] == "command"
    bad_env = client.post("endpoints", endpoint_body(slice_name, "x", env={"1X": "y"}), expect=400)
    assert bad_env["field"] == "env.1X"
    bounds = client.post("endpoints", endpoint_body(slice_name, "x", min_replicas=3, max_replicas=2), expect=400)
    assert bounds["field"] == "min_replicas"
    kserve = client.post("endpoints", {"slice": slice_name, "name": "x", "runtime": "kserve", "model": "m"}, expect=422)
    assert kserve["field"] == "runtime" and "Kubernetes" in kserve["message"]
    elsewhere = client.post("endpoints", endpoint_body(slice_name, "x", cluster="gke"), expect=422)
    assert elsewhere["field"] == "cluster"
    _, stranger = user("other")
    stranger.post("endpoints", endpoint_body(slice_name, "x"), expect=404)
    client.post("endpoints", endpoint_body(slice_name, "x"), expect=202)
    client.post("endpoints", endpoint_body(slice_name, "x"), expect=409)
    assert [e["name"] for e in client.get(f"endpoints?slice={slice_name}", expect=200)["endpoints"]] == ["x"]
    stranger.get(f"endpoints/{slice_name}/x", expect=404)
    client.call("DELETE", f"endpoints/{slice_name}/x", expect=204)


def test_a_server_that_keeps_exiting_fails_the_endpoint_saying_why(hub: Hub, member):
    _, client, slice_name = member
    crash = [sys.executable, "-c", "import sys; print('no model at /data/m'); sys.exit(3)"]
    client.post("endpoints", endpoint_body(slice_name, "crash", command=crash, min_replicas=1), expect=202)
    failed = wait_for(
        lambda: (e := endpoint(client, slice_name, "crash"))["status"] == "failed" and e, 60, "the endpoint to fail"
    )
    assert "exited with status 3" in failed["message"] and "no model at /data/m" in failed["message"]
    assert failed["replica_states"][0]["state"] == "failed" and failed["replica_states"][0]["restarts"] >= 3
    client.call("DELETE", f"endpoints/{slice_name}/crash", expect=204)


def test_a_long_wait_for_gpus_is_a_503_with_retry_after(hub: Hub, user, make_slice, admin):
    name, client = user("ep")
    slice_name = make_slice(members=(name,))["name"]  # one GPR at a time
    held = client.post("gprs", {"slice": slice_name, "gpus": 1, "duration": "1h"}, expect=201)
    wait_for(lambda: client.get(f"gprs/{held['id']}")["status"] == "provisioned", 30, "the first GPR")
    made = client.post("endpoints", endpoint_body(slice_name, "later"), expect=202)
    answer = Caller(hub, made["url"], hub.user_token(name))("GET", "v1/models")
    assert answer.status_code == 503, answer.text
    assert 3000 < int(answer.headers["Retry-After"]) <= 3600
    assert "waits for GPUs" in answer.json()["message"]
    waiting = endpoint(client, slice_name, "later")
    assert waiting["status"] == "pending" and waiting["replica_states"][0]["state"] == "waiting"
    assert waiting["replica_states"][0]["estimated_start"] is not None
    client.call("DELETE", f"endpoints/{slice_name}/later", expect=204)


def test_a_restarted_service_starts_the_servers_again(hub: Hub, member):
    name, client, slice_name = member
    made = client.post("endpoints", endpoint_body(slice_name, "kept", min_replicas=1), expect=202)
    call = Caller(hub, made["url"], hub.user_token(name))
    wait_for(lambda: endpoint(client, slice_name, "kept")["status"] == "ready", 60, "the endpoint to be ready")
    before = call("GET").json()["pid"]
    restart_service(hub)
    wait_for(lambda: not os.path.exists(f"/proc/{before}"), 15, "the old server to stop with the service")
    after = call("GET")
    assert after.status_code == 200 and after.json()["pid"] != before
    client.call("DELETE", f"endpoints/{slice_name}/kept", expect=204)


def test_requests_waiting_in_the_runtimes_queue_add_a_replica(hub: Hub, member):
    _, client, slice_name = member
    body = endpoint_body(slice_name, "queue", min_replicas=1, max_replicas=2, metrics_path="/metrics")
    client.post("endpoints", {**body, "env": {"QUEUED": "3"}}, expect=202)
    scaled = wait_for(
        lambda: (e := endpoint(client, slice_name, "queue"))["replicas"] == 2 and e, 60, "a second replica"
    )
    assert scaled["queued"] >= 3 and scaled["in_flight"] == 0 and scaled["metrics_path"] == "/metrics"
    client.call("DELETE", f"endpoints/{slice_name}/queue", expect=204)


def scoped_token(hub: Hub, name: str, token: str, *scopes: str) -> str:
    """A token that hub user ``name`` makes for themself with their ``token``, holding only ``scopes``."""
    made = requests.post(
        f"{hub.url}/hub/api/users/{name}/tokens",
        json={"scopes": list(scopes), "note": "endpoint only"},
        headers={"Authorization": f"token {token}"},
        timeout=60,
    )
    assert made.status_code == 201, made.text
    return made.json()["token"]


def test_a_token_with_the_endpoint_scope_calls_its_endpoint_and_nothing_else(hub: Hub, member, make_slice, user):
    name, client, slice_name = member
    group = client.get(f"slices/{slice_name}", expect=200)["group"]
    made = client.post("endpoints", endpoint_body(slice_name, "scoped"), expect=202)
    other = client.post("endpoints", endpoint_body(slice_name, "other"), expect=202)
    token = hub.user_token(name)
    scope = f"custom:egs:endpoints!server={slice_name}/scoped"
    only = scoped_token(hub, name, token, scope)
    held = requests.get(f"{hub.url}/hub/api/user", headers={"Authorization": f"token {only}"}, timeout=30).json()
    assert scope in held["scopes"] and "access:services!service=egs" not in held["scopes"]

    # the endpoint it names passes, as for the member's ordinary token
    answer = Caller(hub, made["url"], only)("POST", "v1/completions", data=b"{}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["path"] == "/v1/completions" and answer.json()["token"] is None
    assert Caller(hub, made["url"], token)("GET").status_code == 200

    # any other path of the service: 401, as a token without the service's access scope gets
    for path in ("gprs", f"endpoints/{slice_name}/scoped", "slices"):
        assert "does not reach" in Client(hub.api, only).call("GET", path, expect=401)["message"]
    # another endpoint, even of the same slice, or one that does not exist: 401 too, not 403, since
    # it is the token that does not reach it (its owner may), and not 404 (the token learns nothing)
    for url in (other["url"], f"/services/egs/endpoints/{slice_name}/nope/"):
        assert Caller(hub, url, only)("GET").status_code == 401

    # the slice's group: every endpoint of the slice, still nothing else
    slice_wide = scoped_token(hub, name, token, f"custom:egs:endpoints!group={group}")
    assert Caller(hub, other["url"], slice_wide)("GET").status_code == 200
    assert Caller(hub, made["url"], slice_wide)("GET").status_code == 200
    Client(hub.api, slice_wide).call("GET", "gprs", expect=401)
    elsewhere = make_slice()["name"]
    assert Caller(hub, f"/services/egs/endpoints/{elsewhere}/scoped/", slice_wide)("GET").status_code == 401

    # the scope never widens who may call: a non-member's token naming the endpoint gets the 404 of a missing one
    stranger, _ = user("other")
    theirs = scoped_token(hub, stranger, hub.user_token(stranger), scope)
    refused = Caller(hub, made["url"], theirs)("GET")
    assert refused.status_code == 404 and refused.json()["message"].startswith("no endpoint named")

    client.call("DELETE", f"endpoints/{slice_name}/other", expect=204)
    client.call("DELETE", f"endpoints/{slice_name}/scoped", expect=204)
