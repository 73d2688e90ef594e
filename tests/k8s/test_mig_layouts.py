"""Changing a node's MIG layout through the GPU Operator's mig-manager, through the real client
(mig_layouts.py): the backend labels the node with the mig-parted config, and reads how the mig-manager
(played here by the test, as it labels a real node) goes; the node is not schedulable while it works."""

from __future__ import annotations

import pytest

from egs_hub.backends import LayoutChangeError

from .builders import gpu_node, mig_mixed_node

CAPABLE = {"nvidia.com/mig.capable": "true", "nvidia.com/mig.config": "all-disabled"}


async def mig_manager(cluster, node: str, state: str, resources: dict[str, int] | None = None) -> None:
    """What the mig-manager does on the node: its state label, and the device plugin's new resources."""
    await cluster.patch_node(node, {"metadata": {"labels": {"nvidia.com/mig.config.state": state}}})
    if resources is not None:
        obj = mig_mixed_node(node, resources)
        await cluster.patch_node(node, {"metadata": {"labels": {"nvidia.com/mig.strategy": "mixed"}}})
        await cluster.patch_node_status(node, obj["status"])


async def test_a_change_labels_the_node_and_follows_the_mig_manager(cluster, make_backend):
    await cluster.add_node(gpu_node("h100-a", labels=CAPABLE | {"nvidia.com/mig.config.state": "success"}))
    backend = make_backend()
    assert [n.name for n in (await backend.discover()).nodes] == ["h100-a"]

    config, message = await backend.change_layout("h100-a", {"1g.10gb": 7}, "all-1g.10gb")
    assert config == "all-1g.10gb" and "nvidia.com/mig.config=all-1g.10gb" in message
    labels = (await cluster.node("h100-a"))["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == "all-1g.10gb"
    # The label alone changes nothing yet: the mig-manager has not started.
    assert (await backend.layout_state("h100-a", "all-1g.10gb"))[0] == "pending"

    await mig_manager(cluster, "h100-a", "pending")
    state, said = await backend.layout_state("h100-a", "all-1g.10gb")
    assert (state, "nvidia.com/mig.config.state=pending" in said) == ("pending", True)
    assert [n.schedulable for n in (await backend.discover()).nodes] == [False]
    with pytest.raises(LayoutChangeError, match="being re-partitioned already"):
        await backend.change_layout("h100-a", None, "all-disabled")

    await mig_manager(cluster, "h100-a", "success", {"1g.10gb": 56})
    assert (await backend.layout_state("h100-a", "all-1g.10gb"))[0] == "done"
    found = (await backend.discover()).nodes
    assert [(n.name, n.schedulable, len(n.gpus)) for n in found] == [("h100-a:1g.10gb", True, 56)]


async def test_a_failed_or_overtaken_change_is_failed(cluster, make_backend):
    await cluster.add_node(gpu_node("h100-a", labels=CAPABLE))
    backend = make_backend()
    await backend.change_layout("h100-a", {"3g.40gb": 2}, "all-3g.40gb")
    await mig_manager(cluster, "h100-a", "failed")
    state, said = await backend.layout_state("h100-a", "all-3g.40gb")
    assert state == "failed" and "could not apply all-3g.40gb" in said

    await cluster.patch_node("h100-a", {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}})
    state, said = await backend.layout_state("h100-a", "all-3g.40gb")
    assert state == "failed" and "'all-balanced' now" in said
    assert (await backend.layout_state("gone", "all-3g.40gb"))[0] == "failed"


async def test_a_node_without_a_mig_manager_or_a_config_is_refused_and_not_labelled(cluster, make_backend):
    await cluster.add_node(gpu_node("plain", labels={}))
    await cluster.add_node(gpu_node("h100-a", labels=CAPABLE))
    backend = make_backend()
    with pytest.raises(LayoutChangeError, match=r"not labelled nvidia\.com/mig\.capable=true"):
        await backend.change_layout("plain", {"1g.10gb": 7}, "all-1g.10gb")
    with pytest.raises(LayoutChangeError, match=r"name the config .* \(mig_config\)"):
        await backend.change_layout("h100-a", {"1g.10gb": 3, "2g.20gb": 2}, None)
    with pytest.raises(LayoutChangeError, match="no longer exists"):
        await backend.change_layout("gone", None, "all-disabled")
    assert "nvidia.com/mig.config" not in (await cluster.node("plain"))["metadata"]["labels"]
    assert (await cluster.node("h100-a"))["metadata"]["labels"]["nvidia.com/mig.config"] == "all-disabled"
