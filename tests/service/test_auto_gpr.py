"""Auto-GPR through the live service: a slice policy's ``auto_gpr`` template, a server's registration
asking for GPUs (PUT servers/...), and a real server started through the hub by SliceLocalSpawner."""

from __future__ import annotations

import secrets
from urllib.parse import quote

import pytest

from .hub import wait_for


@pytest.fixture
def template(admin):
    """Make templates; deleted at teardown (ask for it before make_slice: a slice's auto_gpr holds its own)."""
    made: list[str] = []

    def make(**body) -> str:
        name = f"auto-{secrets.token_hex(3)}"
        made.append(admin.post("templates", {"name": name, **body}, expect=201)["name"])
        return name

    yield make
    for name in made:
        admin.call("DELETE", f"templates/{name}")


def test_the_policy_names_a_template_the_slice_may_use(admin, template, make_slice):
    team = make_slice()["name"]
    other = make_slice()["name"]
    theirs = template(slice=other, gpus=1, duration="1h")
    ours = template(gpus=1, duration="30m")

    missing = admin.call("PATCH", f"slices/{team}", {"policy": {"auto_gpr": "no-such-template"}}, expect=422)
    assert missing["field"] == "policy.auto_gpr" and "no-such-template" in missing["message"]
    scoped = admin.call("PATCH", f"slices/{team}", {"policy": {"auto_gpr": theirs}}, expect=422)
    assert scoped["field"] == "policy.auto_gpr" and f"slice {other}" in scoped["message"]
    made = admin.post("slices", {"name": f"t-{secrets.token_hex(3)}", "policy": {"auto_gpr": "nope"}}, expect=422)
    assert made["field"] == "policy.auto_gpr"

    policy = admin.call("PATCH", f"slices/{team}", {"policy": {"auto_gpr": ours}}, expect=200)["policy"]
    assert (policy["auto_gpr"], policy["home_volume_size"], policy["home_volume_class"]) == (ours, "10Gi", None)
    refused = admin.call("DELETE", f"templates/{ours}", expect=409)
    assert team in refused["message"] and "auto_gpr" in refused["message"]
    admin.call("PATCH", f"slices/{team}", {"policy": {"auto_gpr": None}}, expect=200)


def test_a_start_asking_for_gpus_files_one_gpr_from_the_template_and_later_starts_wait_for_it(
    admin, template, make_slice, user
):
    alice, as_alice = user("alice")
    bob, as_bob = user("bob")
    pair = template(gpus=1, duration="30m", shape="H100-80GB")
    team = make_slice(members=(alice, bob), policy={"auto_gpr": pair, "auto_approve_max_gpus": 1})["name"]

    # Asking for nothing, or for nothing the slice could ever get, files nothing.
    none = as_alice.call("PUT", f"servers/{alice}", {"slice": team, "gpus": 0}, expect=200)
    assert (none["gpus"], none["auto_gpr"], none["auto_gpr_problem"]) == ([], None, None)
    huge = as_alice.call("PUT", f"servers/{alice}", {"slice": team, "gpus": 64}, expect=200)
    assert huge["auto_gpr"] is None and f"template {pair!r}" in huge["auto_gpr_problem"]
    assert admin.get(f"gprs?slice={team}")["gprs"] == []
    wrong = as_alice.call("PUT", f"servers/{alice}", {"slice": team, "gpus": 1, "cluster": "nowhere"}, expect=400)
    assert wrong["field"] == "cluster"

    # Two GPUs are over the slice's auto-approval: the GPR filed waits for an admin, and so do later starts.
    first = as_alice.call("PUT", f"servers/{alice}", {"slice": team, "gpus": 2}, expect=200)
    auto = first["auto_gpr"]
    assert (auto["filed"], auto["status"], auto["template"], first["gpus"]) == (True, "pending-approval", pair, [])
    gpr = admin.get(f"gprs/{auto['id']}")
    assert (gpr["requested_by"], gpr["gpus"], gpr["template"], gpr["shape"]) == (alice, 2, pair, "H100-80GB")
    assert gpr["name"] == f"auto: {alice}'s server"
    again = as_bob.call("PUT", f"servers/{bob}/lab", {"slice": team, "gpus": 1}, expect=200)
    assert (again["auto_gpr"]["id"], again["auto_gpr"]["filed"]) == (auto["id"], False)
    assert [g["id"] for g in admin.get(f"gprs?slice={team}")["gprs"]] == [auto["id"]]

    # Approved, it holds GPUs: a start gets them and files nothing.
    admin.post(f"gprs/{auto['id']}/approve", {}, expect=200)
    wait_for(lambda: admin.get(f"gprs/{auto['id']}")["status"] == "provisioned", 30, "the GPR to be provisioned")
    held = as_bob.call("PUT", f"servers/{bob}/lab", {"slice": team, "gpus": 1}, expect=200)
    assert len(held["gpus"]) == 2 and held["auto_gpr"] is None and held["gprs"] == [auto["id"]]
    as_alice.call("DELETE", f"servers/{alice}", expect=204)
    as_bob.call("DELETE", f"servers/{bob}/lab", expect=204)


def test_starting_a_server_with_gpus_gets_them_through_an_auto_gpr(hub, admin, template, make_slice, user):
    """SliceLocalSpawner through the hub: the start files the GPR, waits for its window and starts with it."""
    alice, _ = user("alice")
    one = template(gpus=1, duration="20m")
    team = make_slice(members=(alice,), policy={"auto_gpr": one})["name"]
    hub.hub_api("POST", f"users/{quote(alice)}/server", {"slice": team, "gpus": "1"}, expect=(201, 202))
    try:
        wait_for(
            lambda: hub.hub_api("GET", f"users/{quote(alice)}")["servers"].get("", {}).get("ready"),
            120,
            f"{alice}'s server to be ready",
            interval=0.5,
        )
        (gpr,) = admin.get(f"gprs?slice={team}")["gprs"]
        assert (gpr["requested_by"], gpr["template"], gpr["gpus"], gpr["status"]) == (alice, one, 1, "provisioned")
        (server,) = admin.get(f"servers?slice={team}")["servers"]
        assert server["user"] == alice and len(server["gpus"]) == 1
    finally:
        hub.hub_api("DELETE", f"users/{quote(alice)}/server", expect=(202, 204))
