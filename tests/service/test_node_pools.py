"""Dynamic node pools end to end: a real egs-hub grows a pool on an emulated cluster for a long queue and
gives an idle node back.

One hub and one emulated cluster ("kc", one 8-GPU node) for the module; the emulator stands in for the
Cluster Autoscaler where a test says so (it adds the node a ProvisioningRequest asked for, or marks the
request failed). The tests run in order: bad pools are refused; a GPR that would wait an hour for the
node is estimated at the pool's delay and the pool is asked for a node; the node joins and the GPR is
provisioned on it; released, the node idles and is given back; an ask the autoscaler fails is told and
retried later; deleting the pool deletes its requests.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from kubernetes_asyncio import client

from egs_hub.backends.kubernetes import pools
from egs_hub.client import EGSClient

from ..k8s.builders import gpu_node
from .hub import sqlite_hub, until_status, wait_for
from .test_clusters import CONTEXT, EmulatorThread

NAMESPACE = "egs-pools"
POOL = {"name": "burst", "shape": "H100-80GB x8", "max_nodes": 2, "scale_up_delay": "10m", "scale_down_idle": "3s"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    directory = tmp_path_factory.mktemp("node-pools")
    with EmulatorThread() as emulators:
        _, kube, path = emulators.cluster(directory, "kc", gpu_node("gpu-1"))
        with sqlite_hub(directory) as hub:
            admin = hub.admin()
            admin.post("clusters", {"name": "kc", "kubeconfig": path, "context": CONTEXT}, expect=201)
            for team in ("ml", "batch"):  # a slice holds one GPR at a time: the holder is batch's
                body = {"name": team, "members": [f"{team}-member"], "namespaces": {"kc": [f"{team}-home"]}}
                admin.post("slices", body, expect=201)
            yield {
                "hub": hub,
                "admin": admin,
                "member": hub.client(hub.user_token("ml-member")),
                "batch": hub.client(hub.user_token("batch-member")),
                "kube": kube,
                "run": emulators.run,
            }


def requests_of(world, pool: str = "burst") -> list[dict]:
    async def listed():
        custom = client.CustomObjectsApi(world["kube"].api)
        found = await custom.list_namespaced_custom_object(
            pools.GROUP, pools.VERSION, NAMESPACE, pools.PLURAL, label_selector=f"egs.io/pool={pool}"
        )
        return found["items"]

    return world["run"](listed())


def set_conditions(world, obj: dict, *conditions: tuple[str, str]) -> None:
    obj["status"] = {
        "conditions": [
            {
                "type": kind,
                "status": "True",
                "reason": kind,
                "message": message,
                "lastTransitionTime": "2026-11-26T10:00:00Z",
            }
            for kind, message in conditions
        ]
    }
    name = obj["metadata"]["name"]
    custom = client.CustomObjectsApi(world["kube"].api)
    world["run"](
        custom.replace_namespaced_custom_object_status(pools.GROUP, pools.VERSION, NAMESPACE, pools.PLURAL, name, obj)
    )


def event_kinds(world) -> list[str]:
    return [e["kind"] for e in world["admin"].get("events?limit=200", expect=200)["events"]]


def test_bad_pools_are_refused_with_the_field_named(world):
    admin, member = world["admin"], world["member"]
    assert admin.post("clusters/kc/pools", {**POOL, "min_nodes": 3}, expect=400)["field"] == "min_nodes"
    assert admin.post("clusters/kc/pools", {**POOL, "shape": "H100"}, expect=400)["field"] == "shape"
    assert (
        admin.post("clusters/kc/pools", {**POOL, "provisioning_class": "x"}, expect=400)["field"]
        == "provisioning_class"
    )
    admin.post("clusters/nowhere/pools", POOL, expect=404)
    refused = admin.post("clusters/local/pools", POOL, expect=409)["message"]
    assert "no autoscaler" in refused and "ProvisioningRequest" in refused
    member.post("clusters/kc/pools", POOL, expect=403)
    assert admin.get("clusters/kc/pools", expect=200) == {"pools": []}


def test_a_long_wait_asks_the_pool_for_a_node(world):
    admin, member, hub = world["admin"], world["member"], world["hub"]
    with EGSClient(hub.api, hub.admin_token) as egs:  # as a script would
        created = egs.add_pool(
            "kc", "burst", "H100-80GB x8", 2, scale_up_delay=timedelta(minutes=10), scale_down_idle="3s"
        )
        assert (created.shape, created.min_nodes, created.max_nodes, created.nodes, created.coming) == (
            "H100-80GB x8",
            0,
            2,
            (),
            0,
        )
        assert created.scale_up_delay == timedelta(minutes=10) and [p.name for p in egs.pools("kc")] == ["burst"]
    admin.post("clusters/kc/pools", POOL, expect=409)
    holder = world["batch"].post("gprs", {"slice": "batch", "gpus": 8, "duration": "1h", "cluster": "kc"}, expect=201)
    until_status(admin, holder["id"], "provisioned")
    waiting = member.post("gprs", {"slice": "ml", "gpus": 8, "duration": "1h", "cluster": "kc"}, expect=201)
    world["waiting"] = waiting["id"]
    gpr = wait_for(
        lambda: (g := admin.get(f"gprs/{waiting['id']}", expect=200))["planned_nodes"] and g, 10, "an estimate"
    )
    assert gpr["status"] == "queued" and gpr["planned_nodes"] == ["burst+1"]
    (request,) = wait_for(lambda: requests_of(world), 15, "a ProvisioningRequest for the pool")
    assert request["spec"]["podSets"][0]["count"] == 1
    start = datetime.fromisoformat(gpr["estimated_start"])
    assert timedelta(minutes=9) < start - datetime.fromisoformat(gpr["created_at"]) < timedelta(minutes=11)
    pool = admin.get("clusters/kc/pools/burst", expect=200)
    assert pool["coming"] == 1 and pool["asked_at"] is not None
    assert "pool-grown" in event_kinds(world)
    world["request"] = request


def test_the_node_joins_and_the_waiting_gpr_is_provisioned_on_it(world):
    admin, kube, run = world["admin"], world["kube"], world["run"]
    run(kube.add_node(gpu_node("burst-1", labels={"egs.io/pool": "burst"})))
    set_conditions(world, world["request"], ("Accepted", ""), ("Provisioned", ""))
    gpr = until_status(admin, world["waiting"], "provisioned", timeout=20)
    assert gpr["bound_nodes"] == ["burst-1"]
    wait_for(lambda: requests_of(world) == [], 30, "the provisioned request to be deleted")
    node = run(kube.node("burst-1"))
    wait_for(
        lambda: (
            (run(kube.node("burst-1"))["metadata"].get("annotations") or {}).get(pools.SCALE_DOWN_DISABLED) == "true"
        ),
        10,
        "the pool node kept from the autoscaler's scale-down",
    )
    assert not node["spec"].get("unschedulable")
    pool = wait_for(
        lambda: (p := admin.get("clusters/kc/pools/burst", expect=200))["nodes"][0]["idle_since"] is None and p,
        10,
        "the node held (not idle)",
    )
    assert [(n["name"], n["schedulable"]) for n in pool["nodes"]] == [("burst-1", True)]
    assert pool["coming"] == 0


def test_an_idle_pool_node_is_given_back(world):
    admin, kube, run = world["admin"], world["kube"], world["run"]
    admin.post(f"gprs/{world['waiting']}/release", {}, expect=200)
    until_status(admin, world["waiting"], "complete", timeout=20)
    wait_for(lambda: run(kube.node("burst-1"))["spec"].get("unschedulable"), 15, "the idle node given back")
    node = run(kube.node("burst-1"))
    assert node["metadata"]["labels"][pools.RELEASED_LABEL] == "true"
    assert pools.SCALE_DOWN_DISABLED not in (node["metadata"].get("annotations") or {})
    assert "pool-node-given-back" in event_kinds(world)
    pool = admin.get("clusters/kc/pools/burst", expect=200)
    assert [(n["name"], n["schedulable"]) for n in pool["nodes"]] == [("burst-1", False)]
    run(kube.delete_node("burst-1"))  # the autoscaler removes it


def test_a_failed_ask_is_told_and_not_repeated_before_the_retry(world):
    admin, member = world["admin"], world["member"]
    waiting = member.post("gprs", {"slice": "ml", "gpus": 8, "duration": "1h", "cluster": "kc"}, expect=201)
    (request,) = wait_for(lambda: requests_of(world), 15, "a new ProvisioningRequest")
    set_conditions(world, request, ("Failed", "out of H100 capacity in the zone"))
    pool = wait_for(
        lambda: (p := admin.get("clusters/kc/pools/burst", expect=200))["last_error"] and p, 15, "the failure noted"
    )
    assert "out of H100 capacity" in pool["last_error"] and pool["retry_at"] is not None and pool["coming"] == 0
    assert "pool-scale-up-failed" in event_kinds(world)
    wait_for(lambda: requests_of(world) == [], 30, "the failed request deleted")

    def waits() -> timedelta:
        gpr = admin.get(f"gprs/{waiting['id']}", expect=200)
        return datetime.fromisoformat(gpr["estimated_start"]) - datetime.fromisoformat(gpr["created_at"])

    # no node is coming: the estimate is the retry plus the delay (20 minutes), or the holder's end (an hour),
    # once a plan made after the failure was saved (a read while a plan is under way answers the last one)
    wait_for(lambda: waits() > timedelta(minutes=19), 15, "the estimate moved past the retry")


def test_deleting_a_pool_deletes_its_requests(world):
    admin = world["admin"]
    with EGSClient(world["hub"].api, world["hub"].admin_token) as egs:
        egs.delete_pool("kc", "burst")
    admin.get("clusters/kc/pools/burst", expect=404)
    admin.call("DELETE", "clusters/kc/pools/burst", expect=404)
    assert requests_of(world) == []
    assert "pool-deleted" in event_kinds(world)
