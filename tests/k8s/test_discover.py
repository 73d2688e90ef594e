"""Inventory from Nodes through the real client: GPU nodes only, kept fresh by the watch, clear errors when down."""

from __future__ import annotations

import asyncio
import socket

import pytest

from egs_hub.backends.kubernetes import ClusterUnavailable
from egs_hub.core.model import Shape

from .builders import cpu_node, gpu_node, mig_mixed_node, time_sliced_node
from .kubeconfig import write_kubeconfig


async def eventually(check, timeout: float = 5.0):
    """Poll ``check`` (an async callable) until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.05)


async def test_discover_finds_managed_gpu_nodes(cluster, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    await cluster.add_node(gpu_node("gpu-b", slice="team-a", ready=False, gpus=4, allocatable=3))
    await cluster.add_node(gpu_node("unmanaged", slice=None))
    await cluster.add_node(cpu_node("cpu"))
    no_gfd = gpu_node("no-gfd")
    del no_gfd["metadata"]["labels"]["nvidia.com/gpu.product"]
    await cluster.add_node(no_gfd)
    found = await make_backend().discover()
    assert [(n.name, n.shape, n.schedulable) for n in found.nodes] == [
        ("gpu-a", Shape("H100", 80, 8), True),
        ("gpu-b", Shape("H100", 80, 4), False),
    ]
    assert [g.uuid for g in found.gpus if not g.healthy] == ["emu/gpu-b/gpu3"]
    assert len(found.gpus) == 12
    assert "2 GPU node(s)" in found.source and "node no-gfd has no nvidia.com/gpu.product" in found.source


async def test_mig_instances_and_shares_are_offered_where_a_pod_can_ask_for_them(cluster, make_backend):
    """GPU Operator nodes with MIG (mixed strategy, one GPU not in MIG mode) and time-slicing: instances
    (nvidia.com/mig-1g.10gb) and renamed shares (nvidia.com/gpu.shared) are offered one by one, not
    whole; shares offered as nvidia.com/gpu and the whole GPUs of a node offering units are listed only."""
    await cluster.add_node(mig_mixed_node("mig-a", {"1g.10gb": 7}, whole=1, gpus=2))
    await cluster.add_node(time_sliced_node("ts-a", replicas=4, gpus=1))
    await cluster.add_node(time_sliced_node("ts-b", replicas=2, gpus=1, renamed=True))
    found = await make_backend().discover()

    assert [(n.name, n.shape.name, n.schedulable, n.whole) for n in found.nodes] == [
        ("mig-a", "H100-80GB x1", False, True),
        ("mig-a:1g.10gb", "H100-80GB 1g.10gb x7", True, False),
        ("ts-a:shared", "H100-80GB shared/4 x4", False, False),
        ("ts-b:shared", "H100-80GB shared/2 x2", True, False),
    ]
    assert [g.uuid for g in found.gpus if g.node == "ts-a:shared"] == [f"emu/ts-a/gpu0::{k}" for k in range(4)]
    assert "mig-a (its whole GPUs are not offered beside its instances or shares)" in found.source
    assert "ts-a:shared (its units are nvidia.com/gpu, which a pod cannot tell from whole GPUs" in found.source


async def test_watch_keeps_the_inventory_fresh(cluster, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    changes = []
    backend = make_backend(on_change=lambda: changes.append(1))
    assert [n.name for n in (await backend.discover()).nodes] == ["gpu-a"]

    def shows(*wanted):
        async def check():
            return [(n.name, n.schedulable) for n in (await backend.discover()).nodes] == list(wanted)

        return check

    await cluster.add_node(gpu_node("gpu-b"))
    assert await eventually(shows(("gpu-a", True), ("gpu-b", True)))
    await cluster.patch_node("gpu-a", {"spec": {"unschedulable": True}})
    assert await eventually(shows(("gpu-a", False), ("gpu-b", True)))
    await cluster.delete_node("gpu-b")
    assert await eventually(shows(("gpu-a", False)))
    # an unmanaged node appears once it is labelled into the pool
    await cluster.add_node(gpu_node("gpu-c", slice=None))
    await cluster.patch_node("gpu-c", {"metadata": {"labels": {"egs.io/slice": "free"}}})
    assert await eventually(shows(("gpu-a", False), ("gpu-c", True)))
    assert len(changes) == 5  # the first list, then each change above that the inventory shows


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_unreachable_cluster_raises_at_once(tmp_path, make_backend):
    path = write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{closed_port()}", "t", "gone")
    backend = make_backend(kubeconfig=str(path), context="gone")
    with pytest.raises(ClusterUnavailable, match=r"cluster emu: cannot list nodes .*context gone"):
        await asyncio.wait_for(backend.discover(), 5)


async def test_missing_kubeconfig_or_context_is_named(tmp_path, make_backend):
    with pytest.raises(ClusterUnavailable, match=r"cannot load context x of .*nothing"):
        await make_backend(kubeconfig=str(tmp_path / "nothing"), context="x").discover()
    path = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", "t", "real")
    with pytest.raises(ClusterUnavailable, match="context other"):
        await make_backend(kubeconfig=str(path), context="other").discover()


async def test_outage_raises_then_recovers(cluster, emulator, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    backend = make_backend()
    backend_nodes = lambda inventory: [n.name for n in inventory.nodes]  # noqa: E731
    assert backend_nodes(await backend.discover()) == ["gpu-a"]
    await emulator.set_outage(True)

    async def down():
        try:
            await backend.discover()
        except ClusterUnavailable as e:
            return str(e)
        return None

    assert "HTTP 503" in await eventually(down)
    await emulator.set_outage(False)
    await cluster.add_node(gpu_node("gpu-b"))

    async def back():
        return await down() is None and backend_nodes(await backend.discover()) == ["gpu-a", "gpu-b"]

    assert await eventually(back, timeout=10)


async def test_expired_resource_version_relists(cluster, emulator, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    backend = make_backend(watch_timeout=1)
    await backend.discover()
    emulator.compact()
    await emulator.set_outage(True)  # ends the running watch; it resumes from a version now too old
    await emulator.set_outage(False)
    await cluster.add_node(gpu_node("gpu-b"))

    async def both():
        return [n.name for n in (await backend.discover()).nodes] == ["gpu-a", "gpu-b"]

    assert await eventually(both)
