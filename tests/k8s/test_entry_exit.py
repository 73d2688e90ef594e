"""GPU nodes into a GPR's slice and back, through the real client: pre-checks, labels and taints, eviction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.backends import BindError, ServerRef, UnbindError
from egs_hub.core.model import GPR, GPRSpec, SlicePolicy, Status

from .builders import FREE_TAINT, gpu_node, pod, pod_disruption_budget

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)  # make_backend's exit_grace


def gpr(*nodes: str, gpus_per_node: int = 8, gpr_id: int = 7, slice_name: str = "team-a") -> GPR:
    bound = tuple(f"emu/{n}/gpu{i}" for n in nodes for i in range(gpus_per_node))
    return GPR(
        id=gpr_id,
        spec=GPRSpec(slice=slice_name, duration=timedelta(hours=1), nodes=len(nodes)),
        requested_by="alice",
        status=Status.PROVISIONING,
        created_at=NOW,
        updated_at=NOW,
        bound_gpus=bound,
        bound_nodes=nodes,
    )


def slice_state(node: dict) -> tuple:
    """(egs.io/slice label, egs.io/gpr label, slice taint value, unschedulable) of a node."""
    labels = node["metadata"].get("labels") or {}
    taints = [t["value"] for t in node["spec"].get("taints") or [] if t["key"] == "egs.io/slice"]
    return labels.get("egs.io/slice"), labels.get("egs.io/gpr"), taints, bool(node["spec"].get("unschedulable"))


async def test_bind_labels_and_taints_every_node(cluster, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    await cluster.add_node(gpu_node("gpu-b"))
    dedicated = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
    await cluster.patch_node("gpu-b", {"spec": {"taints": [dedicated, FREE_TAINT]}})
    servers = [ServerRef("alice", "", ())]
    events = await make_backend().bind(gpr("gpu-a", "gpu-b"), SlicePolicy(), servers, NOW)
    assert [(e.kind, e.data.get("node")) for e in events] == [
        ("node-entered", "gpu-a"),
        ("node-entered", "gpu-b"),
        ("restart-to-use-gpus", None),
    ]
    assert all(e.gpr_id == 7 and e.slice == "team-a" and e.time == NOW for e in events)
    assert slice_state(await cluster.node("gpu-a")) == ("team-a", "7", ["team-a"], False)
    node_b = await cluster.node("gpu-b")
    assert slice_state(node_b) == ("team-a", "7", ["team-a"], False)
    assert dedicated in node_b["spec"]["taints"]
    # binding again (a restarted service) passes and changes nothing
    await make_backend().bind(gpr("gpu-a", "gpu-b"), SlicePolicy(), [], NOW)
    assert slice_state(await cluster.node("gpu-a")) == ("team-a", "7", ["team-a"], False)


PRECHECK_CASES = {
    "not ready": (dict(ready=False), "node gpu-b is not Ready"),
    "cordoned": (dict(unschedulable=True), "node gpu-b is cordoned"),
    "too few allocatable GPUs": (dict(allocatable=4), "node gpu-b has 4 allocatable nvidia.com/gpu, the GPR needs 8"),
    "held by another slice": (dict(slice="team-b"), "node gpu-b is not in the free pool"),
}


@pytest.mark.parametrize("node_options, want", PRECHECK_CASES.values(), ids=PRECHECK_CASES.keys())
async def test_failed_pre_check_names_the_node_and_changes_nothing(cluster, make_backend, node_options, want):
    await cluster.add_node(gpu_node("gpu-a"))
    await cluster.add_node(gpu_node("gpu-b", **node_options))
    with pytest.raises(BindError, match=want) as failed:
        await make_backend().bind(gpr("gpu-a", "gpu-b"), SlicePolicy(), [], NOW)
    assert failed.value.nodes == ("gpu-b",)  # the GPR may move off it, by its slice's policy
    assert slice_state(await cluster.node("gpu-a")) == ("free", None, ["free"], False)


async def test_failed_pre_check_undoes_an_interrupted_entry(cluster, make_backend):
    await cluster.add_node(gpu_node("gpu-a", slice="team-a", labels={"egs.io/gpr": "7"}))  # entered by a first try
    with pytest.raises(BindError, match="node gpu-b no longer exists") as failed:
        await make_backend().bind(gpr("gpu-a", "gpu-b"), SlicePolicy(), [], NOW)
    assert failed.value.nodes == ("gpu-b",)
    assert slice_state(await cluster.node("gpu-a")) == ("free", None, ["free"], False)


async def test_bind_without_nodes_on_this_cluster(make_backend):
    with pytest.raises(BindError, match="GPR 7 has no nodes on cluster emu") as failed:
        await make_backend().bind(gpr(), SlicePolicy(), [], NOW)
    assert failed.value.nodes == ()


async def entered(cluster, make_backend, *nodes: str) -> None:
    for name in nodes:
        await cluster.add_node(gpu_node(name))
    await make_backend().bind(gpr(*nodes), SlicePolicy(), [], NOW)


async def test_unbind_evicts_the_slice_pods_and_returns_the_nodes(cluster, make_backend):
    await entered(cluster, make_backend, "gpu-a", "gpu-b")
    mine = await cluster.add_namespace("team-a", slice="team-a")
    other = await cluster.add_namespace("other")
    await cluster.add_pod(mine, pod("train", "gpu-a"))
    await cluster.add_pod(mine, pod("notebook", "gpu-b"))
    await cluster.add_pod(mine, pod("elsewhere", "cpu-1"))
    await cluster.add_pod(mine, pod("exporter", "gpu-a", owner_kind="DaemonSet"))
    await cluster.add_pod(other, pod("system", "gpu-a"))
    events = await make_backend().unbind(gpr("gpu-a", "gpu-b"), [], NOW)
    assert [(e.kind, e.data["node"]) for e in events] == [
        ("node-cordoned", "gpu-a"),
        ("pod-evicted", "gpu-a"),
        ("node-returned", "gpu-a"),
        ("node-cordoned", "gpu-b"),
        ("pod-evicted", "gpu-b"),
        ("node-returned", "gpu-b"),
    ]
    assert f"evicted pod {mine}/train" in events[1].reason
    assert await cluster.pod_names(mine) == ["elsewhere", "exporter"]
    assert await cluster.pod_names(other) == ["system"]
    for name in ("gpu-a", "gpu-b"):
        node = await cluster.node(name)
        assert slice_state(node) == ("free", None, ["free"], False)
        assert not {"egs.io/exit-started", "egs.io/exit-cordoned"} & set(node["metadata"].get("annotations") or {})
    # done: calling again finds nothing to do
    assert await make_backend().unbind(gpr("gpu-a", "gpu-b"), [], NOW) == []


async def test_pods_held_back_are_deleted_after_the_grace_period(cluster, make_backend):
    await entered(cluster, make_backend, "gpu-a")
    mine = await cluster.add_namespace("team-a", slice="team-a")
    await cluster.add_pod(mine, pod("db", "gpu-a", labels={"app": "db"}))
    await cluster.add_budget(mine, pod_disruption_budget("db", {"app": "db"}))
    backend = make_backend()
    with pytest.raises(UnbindError, match=rf"node gpu-a: waiting for pod\(s\) {mine}/db to go .*disruption budget"):
        await backend.unbind(gpr("gpu-a"), [], NOW)
    assert slice_state(await cluster.node("gpu-a")) == ("team-a", "7", ["team-a"], True)
    # still within the grace period (counted from the first try): still waiting
    with pytest.raises(UnbindError, match="deleted at 2025-03-01T12:00:30"):
        await backend.unbind(gpr("gpu-a"), [], NOW + GRACE / 2)
    events = await backend.unbind(gpr("gpu-a"), [], NOW + GRACE)
    assert [e.kind for e in events] == ["pod-deleted", "node-returned"]
    assert await cluster.pod_names(mine) == []
    assert slice_state(await cluster.node("gpu-a")) == ("free", None, ["free"], False)


async def test_a_node_cordoned_before_exit_stays_cordoned(cluster, make_backend):
    await entered(cluster, make_backend, "gpu-a")
    await cluster.patch_node("gpu-a", {"spec": {"unschedulable": True}})  # an admin's maintenance
    events = await make_backend().unbind(gpr("gpu-a"), [], NOW)
    assert [e.kind for e in events] == ["node-returned"]
    assert slice_state(await cluster.node("gpu-a")) == ("free", None, ["free"], True)


async def test_unbind_leaves_nodes_that_moved_on_or_went(cluster, make_backend):
    await entered(cluster, make_backend, "gpu-a", "gpu-b")
    await cluster.delete_node("gpu-b")
    await cluster.patch_node("gpu-a", {"metadata": {"labels": {"egs.io/slice": "team-b", "egs.io/gpr": "9"}}})
    events = await make_backend().unbind(gpr("gpu-a", "gpu-b"), [], NOW)
    assert [(e.kind, e.data["node"]) for e in events] == [("node-gone", "gpu-b")]
    assert slice_state(await cluster.node("gpu-a"))[:2] == ("team-b", "9")
