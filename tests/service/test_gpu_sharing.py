"""GPU sharing end to end (issue 23): a declared inventory with an H100 node split into 1g.10gb MIG
instances and one time-sliced into four shares, a real JupyterHub and proxy. A member sees the
instances' shape in the wait times and the inventory, asks for two of them, and her server sees exactly
their MIG- UUIDs; quotas count an instance as 1/7 of a GPU; instances are asked for by number, never as
whole nodes. A slice that allows sharing gets a quarter of a GPU, its server sees that GPU; one that
does not is refused."""

from __future__ import annotations

import pytest

from .hub import server_environment, sqlite_hub, start_server, wait_for

MIG_SHAPE = "H100-80GB 1g.10gb"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with sqlite_hub(tmp_path_factory.mktemp("hub-sharing"), inventory="inventory_sharing.yaml") as running:
        yield running


def visible_devices(hub, user: str, client, gpr: dict) -> str:
    """CUDA_VISIBLE_DEVICES of the user's server started in the GPR's slice; the server is stopped and
    the GPR released after."""
    start_server(hub, user, gpr["slice"])
    devices = server_environment(hub, user)["CUDA_VISIBLE_DEVICES"]
    hub.hub_api("DELETE", f"users/{user}/server", expect=(202, 204))
    client.post(f"gprs/{gpr['id']}/release", {"reason": "done"}, expect=200)
    return devices


def test_a_member_gets_exactly_the_mig_instances_she_asked_for(hub):
    admin = hub.admin()
    alice = "alice-mig"
    as_alice = hub.client(hub.user_token(alice))
    team = admin.post("slices", {"name": "mig-team", "members": [alice], "quota": {"max_gpus": 1}}, expect=201)

    inventory = admin.get("inventory", expect=200)
    mig = next(s for s in inventory["shapes"] if s["mig_profile"] == "1g.10gb")
    assert (mig["name"], mig["gpus"], mig["gpu_equivalents"]) == (f"{MIG_SHAPE} x14", 14, pytest.approx(1 / 7))
    instances = [
        g for c in inventory["clusters"] for n in c["nodes"] if n["name"] == "mig-a:1g.10gb" for g in n["gpus"]
    ]
    assert len(instances) == 14 and all(g["uuid"].startswith("MIG-") for g in instances)
    assert len({g["parent_uuid"] for g in instances}) == 2 and {g["mig_profile"] for g in instances} == {"1g.10gb"}

    waits = as_alice.post("wait-times", {"slice": team["name"], "gpus": 2, "duration": "30m", "shape": MIG_SHAPE})
    assert [o["shape"]["name"] for o in waits["options"]] == [f"{MIG_SHAPE} x14"]
    assert waits["needs_approval"] == []
    whole = as_alice.post("wait-times", {"slice": team["name"], "gpus": 2, "duration": "30m"})
    assert "H100-80GB x8" in {o["shape"]["name"] for o in whole["options"]}
    assert all(o["shape"]["mig_profile"] is None for o in whole["options"])  # whole GPUs never get instances

    gpr = as_alice.post("gprs", {"slice": team["name"], "gpus": 2, "duration": "30m", "shape": MIG_SHAPE}, expect=201)
    gpr = wait_for(lambda: (g := as_alice.get(f"gprs/{gpr['id']}"))["status"] == "provisioned" and g, 30, "provisioned")
    assert gpr["bound_nodes"] == ["mig-a:1g.10gb"] and len(gpr["bound_gpus"]) == 2
    assert set(gpr["bound_gpus"]) <= {g["uuid"] for g in instances}

    listed = {g["uuid"]: g for g in as_alice.get("gpus")["gpus"]}  # a member sees her slice's instances
    assert set(listed) == set(gpr["bound_gpus"])
    assert {(g["mig_profile"], g["node"], g["gpr"]) for g in listed.values()} == {
        ("1g.10gb", "mig-a:1g.10gb", gpr["id"])
    }
    assert {g["parent_uuid"] for g in listed.values()} <= {g["parent_uuid"] for g in instances}

    assert visible_devices(hub, alice, as_alice, gpr) == ",".join(gpr["bound_gpus"])


def test_quotas_count_instances_as_their_share_of_a_gpu_and_nodes_are_refused(hub):
    admin = hub.admin()
    bob = "bob-mig"
    as_bob = hub.client(hub.user_token(bob))
    team = admin.post("slices", {"name": "mig-quota", "members": [bob], "quota": {"max_gpus": 1}}, expect=201)

    seven = as_bob.post("wait-times", {"slice": team["name"], "gpus": 7, "duration": "1h", "shape": MIG_SHAPE})
    assert seven["needs_approval"] == []  # 7/7 of a GPU is the quota
    eight = as_bob.post("wait-times", {"slice": team["name"], "gpus": 8, "duration": "1h", "shape": MIG_SHAPE})
    assert eight["needs_approval"] == ["1.14 GPUs is over the slice's quota of 1 GPUs"]

    refused = as_bob.post("gprs", {"slice": team["name"], "nodes": 1, "duration": "1h", "shape": MIG_SHAPE}, expect=400)
    assert refused["field"] == "nodes" and "names MIG instances" in refused["message"]
    assert as_bob.get(f"gprs?slice={team['name']}")["gprs"] == []  # nothing was filed


def test_a_slice_that_allows_sharing_gets_a_share_of_a_gpu_and_its_server_sees_the_gpu(hub):
    admin = hub.admin()
    carol = "carol-share"
    as_carol = hub.client(hub.user_token(carol))
    team = admin.post("slices", {"name": "share-team", "members": [carol], "policy": {"gpu_sharing": True}}, expect=201)
    assert team["policy"]["gpu_sharing"] is True
    shared = next(s for s in admin.get("inventory")["shapes"] if s["replicas"] == 4)
    assert (shared["name"], shared["gpus"], shared["gpu_equivalents"]) == ("H100-80GB shared/4 x4", 4, 0.25)

    waits = as_carol.post("wait-times", {"slice": team["name"], "gpu_share": 0.25, "duration": "30m"})
    assert [o["shape"]["name"] for o in waits["options"]] == ["H100-80GB shared/4 x4"]
    gpr = as_carol.post("gprs", {"slice": team["name"], "gpu_share": 0.25, "duration": "30m"}, expect=201)
    assert (gpr["gpus"], gpr["gpu_share"]) == (1, 0.25)
    gpr = wait_for(lambda: (g := as_carol.get(f"gprs/{gpr['id']}"))["status"] == "provisioned" and g, 30, "provisioned")
    assert gpr["bound_nodes"] == ["shared-a:shared"] and gpr["bound_gpus"][0].endswith(("::0", "::1", "::2", "::3"))
    parent = gpr["bound_gpus"][0].rsplit("::", 1)[0]

    assert visible_devices(hub, carol, as_carol, gpr) == parent  # the GPU, shared


def test_a_slice_that_keeps_its_gpus_to_itself_cannot_ask_for_a_share(hub):
    admin = hub.admin()
    dave = "dave-share"
    as_dave = hub.client(hub.user_token(dave))
    team = admin.post("slices", {"name": "own-team", "members": [dave]}, expect=201)
    assert team["policy"]["gpu_sharing"] is False
    refused = as_dave.post("gprs", {"slice": team["name"], "gpu_share": 0.25, "duration": "30m"}, expect=422)
    assert refused["field"] == "gpu_share" and "does not allow shared GPUs" in refused["message"]
    too_big = admin.post("wait-times", {"slice": "share-team", "gpu_share": 0.5, "duration": "30m"}, expect=422)
    assert too_big["field"] == "gpu_share" and "0.5 share of a time-sliced GPU" in too_big["message"]
    assert as_dave.get(f"gprs?slice={team['name']}")["gprs"] == []
