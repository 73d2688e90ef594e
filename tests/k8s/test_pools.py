"""Dynamic node pools on Kubernetes (backends/kubernetes/pools.py): the PodTemplate and ProvisioningRequest
that grow a pool, read back from the emulator over HTTP with the real client; what became of a request
from its conditions; keeping and giving back a pool node; the pool label read into the inventory."""

from __future__ import annotations

from datetime import timedelta

import kubernetes_validate
import pytest
from kubernetes_asyncio import client

from egs_hub.backends.kubernetes import ClusterUnavailable, pools
from egs_hub.backends.kubernetes.nodes import read_node
from egs_hub.core.model import Shape
from egs_hub.core.node_pools import CHECK_CAPACITY, NodePool

from . import emulator as emulated
from .builders import gpu_node

POOL = NodePool("emu", "burst", Shape("H100", 80, 8), 0, 4, timedelta(minutes=10), timedelta(minutes=30))
NAMESPACE = "egs-pools"


def condition(kind: str, status: str = "True", message: str = "") -> dict:
    return {
        "type": kind,
        "status": status,
        "reason": kind,
        "message": message,
        "lastTransitionTime": "2026-11-26T10:00:00Z",
    }


STATES = {
    # name: (conditions, wanted state, wanted message)
    "no status yet": ([], "pending", ""),
    "accepted, not provisioned": ([condition("Accepted"), condition("Provisioned", "False")], "pending", ""),
    "provisioned": ([condition("Accepted"), condition("Provisioned")], "provisioned", ""),
    "failed": ([condition("Failed", message="out of stock in us-east-1a")], "failed", "out of stock in us-east-1a"),
    "booking expired": ([condition("Provisioned"), condition("BookingExpired", message="10m")], "expired", "10m"),
    "capacity revoked": ([condition("CapacityRevoked", message="gone")], "expired", "gone"),
}


@pytest.mark.parametrize(("conditions", "state", "message"), STATES.values(), ids=STATES.keys())
def test_what_became_of_a_request(conditions, state, message):
    obj = pools.provisioning_request(POOL, "egs-burst-1", NAMESPACE, 3)
    obj["status"] = {"conditions": conditions}
    assert pools.request_state(obj) == pools.PoolRequest("egs-burst-1", 3, "", state, message)


def test_the_pod_template_is_a_valid_whole_node_of_the_pool():
    template = pools.pod_template(POOL, "egs-burst-1", NAMESPACE)
    kubernetes_validate.validate(template, kubernetes_validate.latest_version(), strict=True)
    spec = template["template"]["spec"]
    assert spec["nodeSelector"] == {"egs.io/pool": "burst"}
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert {"key": "egs.io/slice", "operator": "Equal", "value": "free", "effect": "NoSchedule"} in spec["tolerations"]


def test_a_node_reads_its_pool_from_its_label():
    assert read_node(gpu_node("n1", labels={"egs.io/pool": "burst"}), "emu").node.pool == "burst"
    assert read_node(gpu_node("n2"), "emu").node.pool is None


async def test_growing_a_pool_makes_a_provisioning_request_and_its_pod_template(make_backend, cluster, emulator):
    backend = make_backend()
    checked = NodePool(**{**POOL.__dict__, "provisioning_class": CHECK_CAPACITY})
    name = await backend.grow_pool(checked, 2)
    custom = client.CustomObjectsApi(cluster.api)
    made = await custom.get_namespaced_custom_object(pools.GROUP, pools.VERSION, NAMESPACE, pools.PLURAL, name)
    assert made["spec"] == {
        "provisioningClassName": CHECK_CAPACITY,
        "podSets": [{"count": 2, "podTemplateRef": {"name": name}}],
    }
    assert made["metadata"]["labels"]["egs.io/pool"] == "burst"
    template = cluster.api.sanitize_for_serialization(await cluster.core.read_namespaced_pod_template(name, NAMESPACE))
    assert template["template"]["spec"]["nodeSelector"] == {"egs.io/pool": "burst"}
    assert [r.state for r in await backend.pool_requests("burst")] == ["pending"]
    assert await backend.pool_requests("other") == []

    made["status"] = {"conditions": [condition("Failed", message="quota exceeded")]}
    await custom.replace_namespaced_custom_object_status(
        pools.GROUP, pools.VERSION, NAMESPACE, pools.PLURAL, name, made
    )
    (request,) = await backend.pool_requests("burst")
    assert (request.name, request.nodes, request.state, request.message) == (name, 2, "failed", "quota exceeded")

    await backend.end_pool_request(name)
    assert await backend.pool_requests("burst") == []
    assert (await cluster.core.list_namespaced_pod_template(NAMESPACE)).items == []
    await backend.end_pool_request(name)  # gone already: nothing to do


async def test_a_cluster_without_the_provisioning_request_api_says_so(make_backend, emulator, monkeypatch):
    monkeypatch.delitem(emulated.RESOURCES, (pools.GROUP, pools.VERSION, pools.PLURAL))
    with pytest.raises(ClusterUnavailable, match="no ProvisioningRequest API"):
        await make_backend().grow_pool(POOL, 1)


async def test_a_pool_node_is_kept_and_then_given_back(make_backend, cluster):
    node = await cluster.add_node(gpu_node(cluster.name("burst-1"), labels={"egs.io/pool": "burst"}))
    name = node["metadata"]["name"]
    backend = make_backend()
    await backend.keep_pool_node(name)
    kept = await cluster.node(name)
    assert kept["metadata"]["annotations"][pools.SCALE_DOWN_DISABLED] == "true"
    assert not kept["spec"].get("unschedulable")
    await backend.give_back_pool_node(name)
    given = await cluster.node(name)
    assert pools.SCALE_DOWN_DISABLED not in (given["metadata"].get("annotations") or {})
    assert given["metadata"]["labels"][pools.RELEASED_LABEL] == "true"
    assert given["spec"]["unschedulable"] is True
    assert read_node(given, "emu").node.schedulable is False
