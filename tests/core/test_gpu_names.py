"""Which inventory GPU a DCGM exporter series is about (core/gpu_names.py): a rule table, then
properties over random Kubernetes nodes, holders and pods."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.gpu_names import KubeGPU, Naming, Series, names

NODE = "east/k1"


def whole(k: int, node: str = "k1", cluster: str = "east") -> KubeGPU:
    return KubeGPU(f"{cluster}/{node}/gpu{k}", cluster, node, k)


def instance(profile: str, k: int, holder: str | None = None) -> KubeGPU:
    return KubeGPU(f"{NODE}/mig-{profile}-{k}", "east", f"k1:{profile}", k, profile, holder)


def mig(uuid: str, gpu_instance: int, profile: str = "1g.10gb", namespace: str | None = None, node: str = "k1"):
    return Series(uuid, node, int(uuid[-1]), gpu_instance, profile, namespace)


NAMESPACES = {("east", "ns-ml"): "ml", ("east", "ns-cv"): "cv"}
RULES = {
    "this host's GPU: its UUID": ([Series("GPU-0", "here", 0)], Naming(), ["GPU-0"]),
    "this host's instance: the one NVML found with its GPU instance id": (
        [Series("GPU-0", "here", 0, 3, "1g.10gb"), Series("GPU-0", "here", 0, 4, "1g.10gb")],
        Naming(instances={("GPU-0", 3): "MIG-3"}),
        ["MIG-3", None],
    ),
    "a Kubernetes node's whole GPUs in index order, a GPU in MIG mode not among them": (
        [Series("GPU-9", "k1", 2), Series("GPU-8", "k1", 1), mig("GPU-8", 1), Series("GPU-7", "k1", 0)],
        Naming(kube_gpus=[whole(0), whole(1), instance("1g.10gb", 0)]),
        [f"{NODE}/gpu1", None, f"{NODE}/mig-1g.10gb-0", f"{NODE}/gpu0"],
    ),
    "more GPUs reported than the node offers: the last not named": (
        [Series("GPU-0", "k1", 0), Series("GPU-1", "k1", 1)],
        Naming(kube_gpus=[whole(0)]),
        [f"{NODE}/gpu0", None],
    ),
    "a pod's instance is one its workspace holds; an idle one goes to a holder first": (
        [mig("GPU-0", 1, namespace="ns-ml"), mig("GPU-0", 2), mig("GPU-0", 3, namespace="ns-cv")],
        Naming(
            kube_gpus=[instance("1g.10gb", 0), instance("1g.10gb", 1, "cv"), instance("1g.10gb", 2, "ml")],
            namespaces=NAMESPACES,
        ),
        [f"{NODE}/mig-1g.10gb-2", f"{NODE}/mig-1g.10gb-0", f"{NODE}/mig-1g.10gb-1"],
    ),
    "a held instance no pod of its workspace uses gets an idle series before a stranger's pod": (
        [mig("GPU-0", 1, namespace="kube-system"), mig("GPU-0", 2)],
        Naming(kube_gpus=[instance("1g.10gb", 0), instance("1g.10gb", 1, "ml")], namespaces=NAMESPACES),
        [f"{NODE}/mig-1g.10gb-0", f"{NODE}/mig-1g.10gb-1"],
    ),
    "instances are matched per profile": (
        [mig("GPU-0", 1, "3g.40gb", "ns-ml"), mig("GPU-0", 2, "1g.10gb", "ns-ml"), mig("GPU-0", 3, "2g.20gb")],
        Naming(
            kube_gpus=[instance("1g.10gb", 0, "ml"), instance("3g.40gb", 0, "ml")],
            namespaces=NAMESPACES,
        ),
        [f"{NODE}/mig-3g.40gb-0", f"{NODE}/mig-1g.10gb-0", None],
    ),
    "a node name two clusters have is not named": (
        [Series("GPU-0", "k1", 0)],
        Naming(kube_gpus=[whole(0), whole(0, cluster="west")]),
        [None],
    ),
    "a time-sliced node's GPU is not named (DCGM reads the GPU, not a share)": (
        [Series("GPU-0", "k1", 0)],
        Naming(kube_gpus=[KubeGPU(f"{NODE}/gpu0::0", "east", "k1:shared", 0, None, "ml", share=True)]),
        [None],
    ),
}


@pytest.mark.parametrize(("series", "naming", "want"), RULES.values(), ids=RULES.keys())
def test_which_inventory_gpu_a_series_is(series, naming, want):
    assert names(series, naming) == want


PROFILES = ["1g.10gb", "3g.40gb"]
WORKSPACES = ["ml", "cv", None]


@st.composite
def kube_nodes(draw):
    """A Kubernetes node with whole GPUs and instances held by random workspaces, and the exporter's
    series for it: whole GPUs, instances (some used by a pod of a workspace or of none) and strays."""
    gpus = [whole(k) for k in range(draw(st.integers(0, 3)))]
    for profile in PROFILES:
        holders = draw(st.lists(st.sampled_from(WORKSPACES), max_size=4))
        gpus += [instance(profile, k, holder) for k, holder in enumerate(holders)]
    namespaces = {"ml": "ns-ml", "cv": "ns-cv", None: None}
    series = [Series(f"GPU-w{k}", "k1", k) for k in range(draw(st.integers(0, 4)))]
    uses = draw(st.lists(st.tuples(st.sampled_from(PROFILES), st.sampled_from([*WORKSPACES, "stranger"])), max_size=8))
    for at, (profile, user) in enumerate(uses):
        namespace = "kube-system" if user == "stranger" else namespaces[user]
        series.append(Series("GPU-m", "k1", 9, at + 1, profile, namespace))
    return draw(st.permutations(series)), Naming(kube_gpus=gpus, namespaces=NAMESPACES)


@settings(max_examples=200, deadline=None)
@given(kube_nodes())
def test_names_are_the_nodes_own_and_a_pods_instance_is_its_workspaces(node):
    series, naming = node
    found = names(series, naming)
    inventory = {gpu.id: gpu for gpu in naming.kube_gpus}
    named = [name for name in found if name is not None]
    assert len(named) == len(set(named)), "an inventory GPU is named by one series at most"
    for one, name in zip(series, found, strict=True):
        if name in inventory:
            assert inventory[name].profile == one.profile, "a whole GPU for a whole GPU, an instance of its profile"
        elif name is not None:
            assert (name, inventory) == (one.uuid, {}), "a UUID names a series only of a node the inventory lacks"
    for profile in PROFILES:
        of_profile = [(s, n) for s, n in zip(series, found, strict=True) if s.profile == profile]
        instances = [gpu for gpu in naming.kube_gpus if gpu.profile == profile]
        assert sum(n is not None for _, n in of_profile) == min(len(of_profile), len(instances)), "none left out"
        held = Counter(gpu.holder for gpu in instances)
        for workspace in ("ml", "cv"):
            pods = [n for s, n in of_profile if NAMESPACES.get(("east", s.namespace or "")) == workspace]
            if len(pods) <= held[workspace]:
                assert all(inventory[n].holder == workspace for n in pods), "a pod's instance is its workspace's"
