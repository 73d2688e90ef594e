"""MIG instances on Kubernetes end to end: a real egs-hub plans and binds 1g.10gb instances of an emulated
GPU Operator node (mixed MIG strategy) for two workspaces at once; each workspace's namespace gets a quota of
the instances it holds, the node stays in the free pool labelled for both, and at window end the labels and
quotas go (backends/kubernetes/shares.py). Once free, an admin re-partitions it into 3g.40gb instances
through the mig-manager (played by the test), and a GPR for those is bound when it is done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..k8s.builders import mig_mixed_node
from .hub import sqlite_hub, until_status, wait_for
from .test_clusters import CONTEXT, EmulatorThread, labels_and_taints


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict]:
    directory = tmp_path_factory.mktemp("share-nodes")
    with EmulatorThread() as emulators:
        _, kube, path = emulators.cluster(directory, "mig", mig_mixed_node("mig-a", {"1g.10gb": 14}, gpus=2))
        with sqlite_hub(directory, config="hub_repartition_config.py") as hub:
            yield {"hub": hub, "emulators": emulators, "kube": kube, "path": path}


def quota(world: dict, namespace: str) -> dict | None:
    found = world["emulators"].run(world["kube"].get("ResourceQuota", namespace, "egs-gpus"))
    return None if found is None else found["spec"]["hard"]


def test_two_workspaces_share_a_mig_node_instance_by_instance(world):
    admin, emulators, kube = world["hub"].admin(), world["emulators"], world["kube"]
    admin.post("clusters", {"name": "mig", "kubeconfig": world["path"], "context": CONTEXT}, expect=201)
    for team in ("team-a", "team-b"):
        admin.post("slices", {"name": team, "members": [], "namespaces": {"mig": [f"{team}-ns"]}}, expect=201)
    (shape,) = [s for s in admin.get("inventory")["shapes"] if s["cluster"] == "mig"]
    assert (shape["name"], shape["free"], shape["gpu_equivalents"]) == ("H100-80GB 1g.10gb x14", 14, 1 / 7)

    ask = {"shape": "H100-80GB 1g.10gb", "cluster": "mig", "duration": 8}
    a = admin.post("gprs", {"slice": "team-a", "gpus": 2, **ask}, expect=201)
    b = admin.post("gprs", {"slice": "team-b", "gpus": 1, **ask}, expect=201)
    a, b = until_status(admin, a["id"], "provisioned"), until_status(admin, b["id"], "provisioned")
    assert a["bound_nodes"] == b["bound_nodes"] == ["mig-a:1g.10gb"]
    assert len(set(a["bound_gpus"]) | set(b["bound_gpus"])) == 3  # no instance twice
    assert all(g.startswith("mig/mig-a/mig-1g.10gb-") for g in a["bound_gpus"] + b["bound_gpus"])

    labels, taints, cordoned = labels_and_taints(emulators, kube, "mig-a")
    assert labels["egs.io/slice"] == "free" and not cordoned  # the node stays in the free pool
    assert (labels["share.egs.io/team-a"], labels["share.egs.io/team-b"]) == ("true", "true")
    assert taints == [{"key": "egs.io/slice", "value": "free", "effect": "NoSchedule"}]
    assert quota(world, "team-a-ns") == {"requests.nvidia.com/mig-1g.10gb": "2"}
    assert quota(world, "team-b-ns") == {"requests.nvidia.com/mig-1g.10gb": "1"}

    until_status(admin, a["id"], "complete", timeout=30)
    until_status(admin, b["id"], "complete", timeout=30)
    labels, _, _ = labels_and_taints(emulators, kube, "mig-a")
    assert not any(k.startswith("share.egs.io/") for k in labels)
    assert quota(world, "team-a-ns") is None and quota(world, "team-b-ns") is None
    kinds = {e["kind"] for e in admin.get(f"events?gpr={a['id']}")["events"]}
    assert {"units-entered", "units-exit", "units-returned"} <= kinds


def test_an_admin_re_partitions_the_free_node_through_the_mig_manager(world):
    admin, emulators, kube = world["hub"].admin(), world["emulators"], world["kube"]
    wait_for(lambda: not admin.get("nodes/mig/mig-a:1g.10gb")["held_by"], 30, "mig-a to be free")
    capable = {"nvidia.com/mig.capable": "true", "nvidia.com/mig.config": "all-1g.10gb"}
    emulators.run(kube.patch_node("mig-a", {"metadata": {"labels": capable}}))

    mixed = admin.post("nodes/mig/mig-a/layout", {"mig": {"1g.10gb": 3, "2g.20gb": 2}}, expect=409)
    assert "name the config of the cluster's mig-parted ConfigMap" in mixed["message"]
    change = admin.post("nodes/mig/mig-a/layout", {"mig": {"3g.40gb": 2}, "reason": "bigger notebooks"}, expect=202)
    assert (change["mig_config"], change["state"]) == ("all-3g.40gb", "pending")
    labels, _, _ = labels_and_taints(emulators, kube, "mig-a")
    assert labels["nvidia.com/mig.config"] == "all-3g.40gb" and "nvidia.com/mig.config.state" not in labels

    # The mig-manager works, then offers the new instances.
    emulators.run(kube.patch_node("mig-a", {"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}}))
    wait_for(lambda: not admin.get("nodes/mig/mig-a:1g.10gb")["schedulable"], 30, "mig-a to be not schedulable")
    split = mig_mixed_node("mig-a", {"3g.40gb": 4}, gpus=2)["status"]
    for section in ("capacity", "allocatable"):  # the kubelet keeps a resource no longer offered, at 0
        split[section]["nvidia.com/mig-1g.10gb"] = "0"
    emulators.run(kube.patch_node_status("mig-a", split))
    emulators.run(kube.patch_node("mig-a", {"metadata": {"labels": {"nvidia.com/mig.config.state": "success"}}}))
    done = wait_for(
        lambda: (c := admin.get("nodes/mig/mig-a/layout")["changes"][0])["state"] == "done" and c, 30, "done"
    )
    assert "applied all-3g.40gb" in done["message"]
    layout = admin.get("nodes/mig/mig-a/layout")
    assert (layout["mig"], layout["instances"]) == ({"3g.40gb": 2}, {"3g.40gb": 4})  # per GPU: as the change said

    gpr = admin.post("gprs", {"slice": "team-a", "gpus": 1, "shape": "H100-80GB 3g.40gb", "duration": 8}, expect=201)
    gpr = until_status(admin, gpr["id"], "provisioned")
    assert gpr["bound_nodes"] == ["mig-a:3g.40gb"]
    assert quota(world, "team-a-ns") == {"requests.nvidia.com/mig-3g.40gb": "1"}
