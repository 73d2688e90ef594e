"""MIG instances and time-sliced shares bound one by one on share nodes, through the real client: entry
labels the node for the slice without taking it out of the free pool, exit evicts only the slice's pods
that use units there, once its last GPR there is gone (shares.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.backends import BindError, UnbindError
from egs_hub.core.model import GPR, GPRSpec, SlicePolicy, Status

from .builders import mig_mixed_node, pod, pod_disruption_budget, time_sliced_node

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)  # make_backend's exit_grace
MIG = "nvidia.com/mig-1g.10gb"


def unit_gpr(planning_node: str, *gpus: str, gpr_id: int = 7, slice_name: str = "team-a") -> GPR:
    return GPR(
        id=gpr_id,
        spec=GPRSpec(slice=slice_name, duration=timedelta(hours=1), gpus=len(gpus), shape="H100-80GB 1g.10gb"),
        requested_by="alice",
        status=Status.PROVISIONING,
        created_at=NOW,
        updated_at=NOW,
        bound_gpus=gpus,
        bound_nodes=(planning_node,),
    )


def instances(*ks: int, node: str = "mig-a") -> tuple[str, ...]:
    return tuple(f"emu/{node}/mig-1g.10gb-{k}" for k in ks)


def unit_pod(name: str, node: str, resource: str = MIG) -> dict:
    obj = pod(name, node)
    obj["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}}
    return obj


def share_state(node: dict) -> tuple:
    """(egs.io/slice, the share labels, the share annotations, the slice taints) of a node."""
    meta = node["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    taints = [t["value"] for t in node["spec"].get("taints") or [] if t["key"] == "egs.io/slice"]
    shares = {k: v for k, v in labels.items() if k.startswith("share.egs.io/")}
    notes = {k: v for k, v in annotations.items() if "share" in k.split("/")[0]}
    return labels.get("egs.io/slice"), shares, notes, taints


async def test_units_of_one_node_go_to_several_slices_and_the_node_stays_free(cluster, make_backend):
    await cluster.add_node(mig_mixed_node("mig-a", {"1g.10gb": 7}))
    backend = make_backend()

    events = await backend.bind(unit_gpr("mig-a:1g.10gb", *instances(0, 1)), SlicePolicy(), [], NOW)
    assert [(e.kind, e.data["node"]) for e in events] == [("units-entered", "mig-a")]
    await backend.bind(unit_gpr("mig-a:1g.10gb", *instances(2), gpr_id=8, slice_name="team-b"), SlicePolicy(), [], NOW)
    await backend.bind(unit_gpr("mig-a:1g.10gb", *instances(3), gpr_id=9), SlicePolicy(), [], NOW)
    await backend.bind(unit_gpr("mig-a:1g.10gb", *instances(3), gpr_id=9), SlicePolicy(), [], NOW)  # again: no change

    assert share_state(await cluster.node("mig-a")) == (
        "free",
        {"share.egs.io/team-a": "true", "share.egs.io/team-b": "true"},
        {"share.egs.io/team-a": "7,9", "share.egs.io/team-b": "8"},
        ["free"],
    )
    assert [n.schedulable for n in (await backend.discover()).nodes] == [True]  # still offered, unit by unit


PRECHECKS = {
    "cordoned": (dict(unschedulable=True), "node mig-a is cordoned"),
    "not Ready": (dict(ready=False), "node mig-a is not Ready"),
    "entered whole by a slice": (dict(slice="team-c"), "node mig-a is not in the free pool"),
}


@pytest.mark.parametrize("options, want", PRECHECKS.values(), ids=PRECHECKS.keys())
async def test_a_failed_pre_check_names_the_planning_node_and_changes_nothing(cluster, make_backend, options, want):
    await cluster.add_node(mig_mixed_node("mig-a", {"1g.10gb": 7}, **options))
    with pytest.raises(BindError, match=want) as failed:
        await make_backend().bind(unit_gpr("mig-a:1g.10gb", *instances(0)), SlicePolicy(), [], NOW)
    assert failed.value.nodes == ("mig-a:1g.10gb",)
    assert share_state(await cluster.node("mig-a"))[1:3] == ({}, {})


async def test_a_profile_the_node_no_longer_offers_fails_the_bind(cluster, make_backend):
    await cluster.add_node(mig_mixed_node("mig-a", {"3g.40gb": 2}))  # re-partitioned since the plan
    with pytest.raises(BindError, match=re.escape("node mig-a no longer offers the units of mig-a:1g.10gb")):
        await make_backend().bind(unit_gpr("mig-a:1g.10gb", *instances(0)), SlicePolicy(), [], NOW)


async def test_exit_evicts_the_slice_unit_pods_once_its_last_gpr_there_leaves(cluster, make_backend):
    await cluster.add_node(mig_mixed_node("mig-a", {"1g.10gb": 7}))
    backend = make_backend()
    first, second = unit_gpr("mig-a:1g.10gb", *instances(0)), unit_gpr("mig-a:1g.10gb", *instances(1), gpr_id=9)
    theirs = unit_gpr("mig-a:1g.10gb", *instances(2), gpr_id=8, slice_name="team-b")
    for gpr in (first, second, theirs):
        await backend.bind(gpr, SlicePolicy(), [], NOW)
    mine, other = (
        await cluster.add_namespace("team-a", slice="team-a"),
        await cluster.add_namespace("team-b", slice="team-b"),
    )
    await cluster.add_pod(mine, unit_pod("notebook", "mig-a"))
    await cluster.add_pod(mine, pod("sidecar", "mig-a"))  # no units: not egs-hub's to evict from a shared node
    await cluster.add_pod(other, unit_pod("training", "mig-a"))

    events = await backend.unbind(second, [], NOW)
    assert [e.kind for e in events] == ["units-returned"]  # GPR 7 of team-a still holds units here
    assert await cluster.pod_names(mine) == ["notebook", "sidecar"]
    assert share_state(await cluster.node("mig-a"))[2]["share.egs.io/team-a"] == "7"

    events = await backend.unbind(first, [], NOW)
    assert [e.kind for e in events] == ["units-exit", "pod-evicted", "units-returned"]
    assert await cluster.pod_names(mine) == ["sidecar"]
    assert await cluster.pod_names(other) == ["training"]
    assert share_state(await cluster.node("mig-a")) == (
        "free",
        {"share.egs.io/team-b": "true"},
        {"share.egs.io/team-b": "8"},
        ["free"],
    )
    assert await backend.unbind(first, [], NOW) == []  # done: nothing more


async def test_unit_pods_held_back_are_deleted_after_the_grace_period(cluster, make_backend):
    await cluster.add_node(time_sliced_node("ts-a", replicas=4, gpus=1, renamed=True))
    backend = make_backend()
    gpr = unit_gpr("ts-a:shared", "emu/ts-a/gpu0::0")
    await backend.bind(gpr, SlicePolicy(), [], NOW)
    mine = await cluster.add_namespace("team-a", slice="team-a")
    served = unit_pod("serve", "ts-a", "nvidia.com/gpu.shared")
    served["metadata"]["labels"] = {"app": "serve"}
    await cluster.add_pod(mine, served)
    await cluster.add_budget(mine, pod_disruption_budget("serve", {"app": "serve"}))

    with pytest.raises(UnbindError, match=rf"node ts-a: waiting for pod\(s\) {mine}/serve to go .*disruption budget"):
        await backend.unbind(gpr, [], NOW)
    labels, notes = share_state(await cluster.node("ts-a"))[1:3]
    assert labels == {} and notes == {"share.egs.io/team-a": "7", "share-exit.egs.io/team-a": NOW.isoformat()}
    events = await backend.unbind(gpr, [], NOW + GRACE)
    assert [e.kind for e in events] == ["pod-deleted", "units-returned"]
    assert share_state(await cluster.node("ts-a"))[1:3] == ({}, {})
