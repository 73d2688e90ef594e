"""Node writes lose no one else's change (issue 46, item 6): node_writes.py.

Found: taints were written by a read, then a patch of the whole ``spec.taints`` list with no
``resourceVersion``, so a taint another controller added in between (the cluster autoscaler's
``ToBeDeleted``) was dropped. Here the emulator makes that other writer's change just as the backend's
patch arrives (ClusterEmulator.before_next_patch): the patch carries the version it was made from, gets
409, and is made again from the node as it is now.
"""

from __future__ import annotations

import pytest

from egs_hub.backends.kubernetes import node_writes
from egs_hub.core.model import SlicePolicy

from .builders import gpu_node
from .test_entry_exit import NOW, gpr, slice_state

TO_BE_DELETED = {"key": "ToBeDeleted", "value": "1764650000", "effect": "NoSchedule"}


def autoscaler_taints(node: dict) -> dict:
    node["spec"]["taints"] = [*(node["spec"].get("taints") or []), TO_BE_DELETED]
    return node


def taint_keys(node: dict) -> list[str]:
    return sorted(t["key"] for t in node["spec"].get("taints") or [])


async def test_a_taint_added_while_a_node_enters_a_slice_is_kept(cluster, emulator, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    emulator.before_next_patch("nodes", "gpu-a", autoscaler_taints)
    await make_backend().bind(gpr("gpu-a"), SlicePolicy(), [], NOW)
    node = await cluster.node("gpu-a")
    assert slice_state(node) == ("team-a", "7", ["team-a"], False)
    assert taint_keys(node) == ["ToBeDeleted", "egs.io/slice"]


@pytest.mark.parametrize("racing", ["cordon", "return"])
async def test_a_taint_added_while_a_node_goes_back_to_the_pool_is_kept(cluster, emulator, make_backend, racing):
    await cluster.add_node(gpu_node("gpu-a"))
    backend = make_backend()
    await backend.bind(gpr("gpu-a"), SlicePolicy(), [], NOW)
    if racing == "return":  # exit began earlier (cordoned, then interrupted): the next patch is the return
        exiting = {"egs.io/exit-started": NOW.isoformat(), "egs.io/exit-cordoned": "true"}
        await cluster.patch_node("gpu-a", {"metadata": {"annotations": exiting}, "spec": {"unschedulable": True}})
    emulator.before_next_patch("nodes", "gpu-a", autoscaler_taints)
    await backend.unbind(gpr("gpu-a"), [], NOW)
    node = await cluster.node("gpu-a")
    assert slice_state(node) == ("free", None, ["free"], False)
    assert taint_keys(node) == ["ToBeDeleted", "egs.io/slice"]


async def test_a_label_added_while_a_node_is_quarantined_is_kept(cluster, emulator, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))

    def labelled(node: dict) -> dict:
        node["metadata"]["labels"]["team"] = "infra"
        node["spec"]["taints"] = [*(node["spec"].get("taints") or []), TO_BE_DELETED]
        return node

    emulator.before_next_patch("nodes", "gpu-a", labelled)
    await make_backend().quarantine("gpu-a", "exit check failed")
    node = await cluster.node("gpu-a")
    assert node["metadata"]["labels"]["team"] == "infra" and node["metadata"]["labels"]["egs.io/quarantined"] == "true"
    assert "ToBeDeleted" in taint_keys(node) and node["spec"]["unschedulable"] is True


async def test_a_patch_carries_the_version_it_was_made_from(cluster):
    await cluster.add_node(gpu_node("gpu-a"))
    read = await cluster.node("gpu-a")
    await cluster.patch_node("gpu-a", {"metadata": {"labels": {"team": "infra"}}})  # a change since the read
    written = await node_writes.patch_node(
        cluster.core, read, lambda n: {"metadata": {"labels": {"seen": n["metadata"]["labels"].get("team", "none")}}}
    )
    assert written["metadata"]["labels"]["seen"] == "infra"  # made again from the fresh node after the 409
