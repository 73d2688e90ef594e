"""The README walkthrough through the REST API, against a real JupyterHub and proxy.

An admin creates a slice and adds a member; the member asks for wait times,
submits a GPR, sees it provisioned, starts a server whose environment has the
bound GPU UUIDs, and releases early; the server is restarted without them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .hub import server_environment, start_server, wait_for


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def test_admin_creates_a_slice_and_a_member_uses_its_gpus(hub, admin, make_slice, user):
    alice, as_alice = user("alice")

    # The admin creates the slice; its members are a hub group, visible in the hub too.
    team = make_slice(display_name="Team A", quota={"max_gpus": 8})
    admin.call("PUT", f"slices/{team['name']}/members/{alice}", expect=200)
    assert alice in hub.hub_api("GET", f"groups/{team['group']}")["users"]
    assert [s["name"] for s in as_alice.get("slices", expect=200)["slices"]] == [team["name"]]

    # Wait times for every shape that can serve 2 GPUs; this cluster has two.
    waits = as_alice.post("wait-times", {"slice": team["name"], "gpus": 2, "duration": "30m"}, expect=200)
    shapes = {o["shape"]["name"] for o in waits["options"]}
    assert {"H100-80GB x8", "A100-40GB x4"} <= shapes
    assert waits["needs_approval"] == []

    # Submit on one shape: estimated start is now; it is provisioned within seconds.
    gpr = as_alice.post(
        "gprs",
        {"slice": team["name"], "gpus": 2, "duration": "30m", "shape": "H100", "name": "train"},
        expect=201,
    )
    assert gpr["requested_by"] == alice and gpr["status"] in ("queued", "provisioning", "provisioned")
    gpr = wait_for(lambda: (g := as_alice.get(f"gprs/{gpr['id']}"))["status"] == "provisioned" and g, 10, "provisioned")
    assert len(gpr["bound_gpus"]) == 2 and gpr["bound_nodes"][0].startswith("h100-")
    assert parse(gpr["window_end"]) - parse(gpr["window_start"]) == timedelta(minutes=30)
    assert as_alice.get(f"slices/{team['name']}")["gpus"] == gpr["bound_gpus"]

    # Alice's server sees exactly the bound GPUs.
    start_server(hub, alice, team["name"])
    env = server_environment(hub, alice)
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(gpr["bound_gpus"])
    assert env["EGS_SLICE"] == team["name"]

    # Early release: the GPR completes and her server is restarted without the GPUs.
    released = as_alice.post(f"gprs/{gpr['id']}/release", {"reason": "done early"}, expect=200)
    assert released["status"] in ("releasing", "complete")
    done = wait_for(
        lambda: (g := as_alice.get(f"gprs/{gpr['id']}"))["status"] == "complete" and g,
        120,
        "complete",
        interval=0.5,
    )
    assert done["end_reason"] == "released-early"
    start_server_ready = wait_for(
        lambda: (hub.hub_api("GET", f"users/{alice}")["servers"].get("") or {}).get("ready"), 120, "restart"
    )
    assert start_server_ready
    assert server_environment(hub, alice)["CUDA_VISIBLE_DEVICES"] == ""
    kinds = [e["kind"] for e in as_alice.get(f"events?gpr={gpr['id']}")["events"]]
    assert kinds[:4] == ["submitted", "admitted", "provisioned", "released-early"]
    assert "server-restarted" in kinds and kinds[-1] == "complete"
    hub.hub_api("DELETE", f"users/{alice}/server", expect=(202, 204))


def test_non_members_find_a_slice_and_its_gprs_as_if_they_did_not_exist(hub, make_slice, user):
    """Another workspace answers exactly as a missing one (issue 45): 404 on its paths, the 422 of a
    missing slice where a body names it."""
    alice, as_alice = user("alice")
    mallory, as_mallory = user("mallory")
    team = make_slice(members=(alice,))
    name = team["name"]
    gpr = as_alice.post("gprs", {"slice": name, "gpus": 1, "duration": 600}, expect=201)
    no_gpr = (404, f"no GPR with id {gpr['id']}")
    no_slice = (404, f"no slice named {name!r}")
    no_slice_in_body = (422, f"no slice named {name!r}; GET /slices lists yours")

    for method, path, body, (status, message) in [
        ("GET", f"gprs/{gpr['id']}", None, no_gpr),
        ("GET", f"gprs?slice={name}", None, no_slice),
        ("POST", "gprs", {"slice": name, "gpus": 1, "duration": 600}, no_slice_in_body),
        ("POST", f"gprs/{gpr['id']}/release", None, no_gpr),
        ("DELETE", f"gprs/{gpr['id']}", None, no_gpr),
        ("POST", "wait-times", {"slice": name, "gpus": 1, "duration": 600}, no_slice_in_body),
        ("GET", f"slices/{name}", None, no_slice),
    ]:
        assert as_mallory.call(method, path, body, expect=status)["message"] == message, (method, path)
    assert name not in [s["name"] for s in as_mallory.get("slices")["slices"]]
    assert all(g["slice"] != name for g in as_mallory.get("gprs")["gprs"])
    as_mallory.call("POST", "slices", {"name": "mine"}, expect=403)
    as_mallory.call("PUT", f"slices/{name}/members/{mallory}", expect=404)


def test_requests_without_a_token_are_refused_but_health_is_open(hub):
    anonymous = hub.client(None)
    assert anonymous.get("health", expect=200)["status"] == "ok"
    assert anonymous.get("openapi.json", expect=200)["openapi"].startswith("3.1")
    error = anonymous.get("gprs", expect=401)
    assert "token" in error["message"]
    hub.client("not-a-token").get("slices", expect=401)


def test_members_of_the_hub_group_egs_admins_are_egs_admins(hub, user):
    bob, as_bob = user("bob")
    as_bob.post("slices", {"name": "bobs"}, expect=403)
    hub.hub_api("POST", "groups/egs-admins/users", {"users": [bob]})
    # A new token: the service caches what the hub said about the old one for identity_cache_seconds.
    as_admin_bob = hub.client(hub.user_token(bob))
    try:
        created = as_admin_bob.post("slices", {"name": f"by-{bob}"}, expect=201)
        as_admin_bob.call("DELETE", f"slices/{created['name']}", expect=204)
    finally:
        hub.hub_api("DELETE", "groups/egs-admins/users", {"users": [bob]})
