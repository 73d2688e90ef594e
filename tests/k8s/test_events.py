"""Kubernetes Events the backend writes (core/v1, source component egs-hub): about a slice's namespaces, and
about a node (in the namespace default, as the API server keeps node Events)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes_asyncio import client

from egs_hub.backends.kubernetes import ClusterUnavailable
from egs_hub.backends.kubernetes.events import NODE_EVENTS_NAMESPACE, Notice

from .builders import gpu_node

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


async def events_in(cluster, namespace: str) -> list[dict]:
    listed = await cluster.core.list_namespaced_event(namespace)
    return [cluster._dict(e) for e in listed.items]


async def test_an_event_about_each_of_a_slices_namespaces(cluster, make_backend):
    home, other = await cluster.add_namespace("ev-home", slice="a"), await cluster.add_namespace("ev-dev", slice="a")
    notice = Notice("Normal", "Provisioned", "GPR 7 holds gpu-1 until 14:00")

    await make_backend().record_slice_event([home, other], notice, NOW)

    for namespace in (home, other):
        (event,) = await events_in(cluster, namespace)
        assert event["involvedObject"]["kind"] == "Namespace" and event["involvedObject"]["name"] == namespace
        assert (event["type"], event["reason"], event["message"]) == ("Normal", "Provisioned", notice.message)
        assert event["source"]["component"] == "egs-hub" and event["count"] == 1


async def test_an_event_about_a_node(cluster, make_backend):
    try:  # the emulator starts without the namespace default that a real cluster has
        await cluster.core.create_namespace({"metadata": {"name": NODE_EVENTS_NAMESPACE}})
    except client.ApiException as e:
        if e.status != 409:
            raise
    node = f"gpu-ev-{cluster.suffix}"
    await cluster.add_node(gpu_node(node))
    before = {e["metadata"]["name"] for e in await events_in(cluster, NODE_EVENTS_NAMESPACE)}

    await make_backend().record_node_event(node, Notice("Warning", "GPUAlert", "GPU 0 at 91 C"), NOW)

    (event,) = [e for e in await events_in(cluster, NODE_EVENTS_NAMESPACE) if e["metadata"]["name"] not in before]
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == ("Node", node)
    assert (event["type"], event["reason"]) == ("Warning", "GPUAlert")


async def test_an_event_in_a_namespace_that_is_gone_says_which(cluster, make_backend):
    with pytest.raises(ClusterUnavailable, match="Provisioned"):
        await make_backend().record_slice_event([cluster.name("never-made")], Notice("Normal", "Provisioned", "x"), NOW)
