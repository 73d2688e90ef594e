"""A slice set up on a cluster and removed, through the real client: namespaces, RBAC, GPU quota."""

from __future__ import annotations

import pytest

from egs_hub.backends.kubernetes import ClusterUnavailable, SliceConflict
from egs_hub.backends.kubernetes.roles import DEFAULT_ROLE_TEMPLATES, parse_role_templates

from .builders import held_gpus, pod

MANAGED = ("ServiceAccount", "Role", "RoleBinding", "ResourceQuota")


async def contents(cluster, namespace: str) -> dict[str, list[str]]:
    """The egs-hub objects in a namespace by kind."""
    return {kind: await cluster.names(kind, namespace) for kind in MANAGED}


def labels(obj: dict) -> dict:
    return obj["metadata"].get("labels") or {}


async def gpu_quota(cluster, namespace: str) -> str:
    return (await cluster.get("ResourceQuota", namespace, "egs-gpus"))["spec"]["hard"]["requests.nvidia.com/gpu"]


async def test_ensure_creates_namespaces_account_rbac_and_quota(cluster, make_backend):
    home, other = cluster.name("team-a"), cluster.name("team-a-dev")
    plan = await make_backend().ensure_slice("team-a", [home, other], gpus=held_gpus(8))
    assert (plan.create, plan.adopt, plan.keep) == ((home, other), (), ())
    for name in (home, other):
        ns = await cluster.namespace(name)
        assert labels(ns)["egs.io/slice"] == "team-a"
        assert ns["metadata"]["annotations"]["egs.io/created-by"] == "egs-hub"
        assert await gpu_quota(cluster, name) == "8"
    assert await contents(cluster, home) == {
        "ServiceAccount": ["egs-team-a"],
        "Role": ["egs-deployment", "egs-reader"],
        "RoleBinding": ["egs-deployment", "egs-reader"],
        "ResourceQuota": ["egs-gpus"],
    }
    assert (await contents(cluster, other))["ServiceAccount"] == []  # the ServiceAccount lives in the home namespace
    role = await cluster.get("Role", other, "egs-deployment")
    assert role["rules"] == [dict(r) for r in DEFAULT_ROLE_TEMPLATES["deployment"].rules]
    binding = await cluster.get("RoleBinding", other, "egs-deployment")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "egs-team-a", "namespace": home}]


async def versions(cluster, namespace: str) -> dict[str, str]:
    """The resourceVersion of each egs-hub object in the namespace."""
    found = {}
    for kind in MANAGED:
        for name in await cluster.names(kind, namespace):
            found[f"{kind}/{name}"] = (await cluster.get(kind, namespace, name))["metadata"]["resourceVersion"]
    return found


async def test_ensure_again_changes_nothing(cluster, make_backend):
    home = cluster.name("team-a")
    await make_backend().ensure_slice("team-a", [home], gpus=held_gpus(2))
    before = await versions(cluster, home)
    plan = await make_backend().ensure_slice("team-a", [home], gpus=held_gpus(2))
    assert plan.keep == (home,) and not plan.create
    assert await versions(cluster, home) == before
    assert len(before) == 6


async def test_adopted_namespace_is_released_not_deleted(cluster, make_backend):
    ml = await cluster.add_namespace("ml", labels={"team": "research"})
    await cluster.add_pod(ml, pod("notebook"))
    home = cluster.name("team-a")
    backend = make_backend()
    plan = await backend.ensure_slice("team-a", [home, ml], gpus=held_gpus(4))
    assert (plan.create, plan.adopt) == ((home,), (ml,))
    adopted = await cluster.namespace(ml)
    assert (labels(adopted)["egs.io/slice"], labels(adopted)["team"]) == ("team-a", "research")
    assert "egs.io/created-by" not in (adopted["metadata"].get("annotations") or {})
    assert (await contents(cluster, ml))["Role"] == ["egs-deployment", "egs-reader"]

    plan = await backend.remove_slice("team-a")
    assert (plan.delete, plan.release) == ((home,), (ml,))
    assert await cluster.namespace(home) is None
    released = await cluster.namespace(ml)
    assert "egs.io/slice" not in labels(released) and labels(released)["team"] == "research"
    assert await contents(cluster, ml) == {kind: [] for kind in MANAGED}
    assert await cluster.pod_names(ml) == ["notebook"]  # what the team ran there stays
    # removing again finds nothing to do
    plan = await backend.remove_slice("team-a")
    assert (plan.delete, plan.release) == ((), ())


async def test_another_slices_namespace_is_a_conflict_and_nothing_changes(cluster, make_backend):
    theirs = await cluster.add_namespace("shared", slice="team-b")
    mine = cluster.name("team-a")
    with pytest.raises(SliceConflict, match=f"slice team-a: namespace {theirs} belongs to slice team-b"):
        await make_backend().ensure_slice("team-a", [mine, theirs], gpus=held_gpus(1))
    assert await cluster.namespace(mine) is None
    assert labels(await cluster.namespace(theirs))["egs.io/slice"] == "team-b"


async def test_gpu_quota_follows_what_the_slice_holds(cluster, make_backend):
    home, other = cluster.name("team-a"), cluster.name("team-a-dev")
    backend = make_backend()
    await backend.ensure_slice("team-a", [home, other], gpus=held_gpus(0))
    # holding nothing: no quota object, so GPU pods stay Pending instead of being refused
    assert [await cluster.get("ResourceQuota", n, "egs-gpus") for n in (home, other)] == [None, None]
    await backend.set_slice_gpus("team-a", [home, other], held_gpus(16))
    assert [await gpu_quota(cluster, n) for n in (home, other)] == ["16", "16"]
    await backend.set_slice_gpus("team-a", [home, other], held_gpus(8))
    assert [await gpu_quota(cluster, n) for n in (home, other)] == ["8", "8"]
    await backend.set_slice_gpus("team-a", [home, other], held_gpus(0))
    assert [await cluster.get("ResourceQuota", n, "egs-gpus") for n in (home, other)] == [None, None]


async def test_the_quota_counts_mig_instances_and_shares_per_resource(cluster, make_backend):
    home = cluster.name("team-a")
    backend = make_backend()
    held = [*held_gpus(2), "emu/mig-a/mig-1g.10gb-0", "emu/mig-a/mig-1g.10gb-3", "emu/mig-a/mig-3g.40gb-1"]
    await backend.ensure_slice("team-a", [home], gpus=[*held, "emu/ts-a/gpu0::2"])
    assert (await cluster.get("ResourceQuota", home, "egs-gpus"))["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/gpu.shared": "1",
        "requests.nvidia.com/mig-1g.10gb": "2",
        "requests.nvidia.com/mig-3g.40gb": "1",
    }
    await backend.set_slice_gpus("team-a", [home], ["emu/mig-a/mig-1g.10gb-0"])
    hard = (await cluster.get("ResourceQuota", home, "egs-gpus"))["spec"]["hard"]
    assert hard == {"requests.nvidia.com/mig-1g.10gb": "1"}  # whole-GPU pods stay Pending: no node is theirs


async def test_ensure_follows_changed_namespaces_and_templates(cluster, make_backend):
    first, second, third = cluster.name("team-a"), cluster.name("team-a-dev"), cluster.name("team-a-new")
    await make_backend().ensure_slice("team-a", [first, second], gpus=held_gpus(1))
    templates = parse_role_templates(
        {"viewer": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}], "subjects": []}}
    )
    # the home namespace moves, one namespace is dropped and one added; the templates are replaced
    plan = await make_backend(role_templates=templates).ensure_slice("team-a", [third, second], gpus=held_gpus(1))
    assert (plan.create, plan.keep, plan.delete) == ((third,), (second,), (first,))
    assert await cluster.namespace(first) is None
    assert await contents(cluster, second) == {
        "ServiceAccount": [],
        "Role": ["egs-viewer"],
        "RoleBinding": ["egs-viewer"],
        "ResourceQuota": ["egs-gpus"],
    }
    assert (await contents(cluster, third))["ServiceAccount"] == ["egs-team-a"]


async def test_ensure_repairs_what_was_changed_by_hand(cluster, make_backend):
    home = cluster.name("team-a")
    await make_backend().ensure_slice("team-a", [home], gpus=held_gpus(2))
    await cluster.core.patch_namespaced_resource_quota(
        "egs-gpus", home, {"spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
    )
    await cluster.rbac.patch_namespaced_role(
        "egs-reader", home, {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    )
    await cluster.rbac.delete_namespaced_role_binding("egs-deployment", home)
    await make_backend().ensure_slice("team-a", [home], gpus=held_gpus(2))
    assert await gpu_quota(cluster, home) == "2"
    assert (await cluster.get("Role", home, "egs-reader"))["rules"] == [
        dict(r) for r in DEFAULT_ROLE_TEMPLATES["reader"].rules
    ]
    assert await cluster.get("RoleBinding", home, "egs-deployment") is not None


async def test_an_unreachable_cluster_is_named(emulator, cluster, make_backend):
    home = cluster.name("team-a")
    await emulator.set_outage(True)
    with pytest.raises(
        ClusterUnavailable, match=r"cluster emu: cannot set up slice team-a \(context emulated .*HTTP 503"
    ):
        await make_backend().ensure_slice("team-a", [home], gpus=held_gpus(1))
    await emulator.set_outage(False)  # so that the test's namespaces can be cleaned up
