"""Node objects read as egs-hub nodes and GPUs, entry pre-checks, and the node patches: pure, on plain dicts."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from egs_hub.backends.kubernetes import objects
from egs_hub.backends.kubernetes.nodes import NodeUnusable, entry_problems, read_node, read_nodes, read_units
from egs_hub.core.model import Shape

from .builders import cpu_node, gpu_node, mig_mixed_node, mig_single_node, time_sliced_node


def without_label(obj: dict, label: str) -> dict:
    del obj["metadata"]["labels"][label]
    return obj


def with_allocatable(obj: dict, value) -> dict:
    obj["status"]["allocatable"]["nvidia.com/gpu"] = value
    return obj


@dataclass
class ReadCase:
    obj: dict
    want_shape: Shape | None = None  # None: not a GPU node
    want_schedulable: bool = True
    want_healthy: list[bool] = field(default_factory=list)  # per GPU index; empty: all healthy
    want_error: str | None = None  # NodeUnusable's message contains this


READ_CASES = {
    "H100 node from GFD labels": ReadCase(gpu_node("a"), Shape("H100", 80, 8)),
    "A100 40GB": ReadCase(
        gpu_node("a", product="NVIDIA-A100-SXM4-40GB", memory_mib=40960, gpus=4), Shape("A100", 40, 4)
    ),
    "GeForce keeps RTX in the model": ReadCase(
        gpu_node("a", product="NVIDIA-GeForce-RTX-4090", memory_mib=24564, gpus=1), Shape("RTX-4090", 24, 1)
    ),
    "Tesla prefix dropped": ReadCase(
        gpu_node("a", product="Tesla-V100-SXM2-16GB", memory_mib=16384, gpus=8), Shape("V100", 16, 8)
    ),
    "CPU node is not a GPU node": ReadCase(cpu_node("c")),
    "zero allocatable GPUs is not a GPU node": ReadCase(gpu_node("a", allocatable=0)),
    "not Ready is not schedulable": ReadCase(gpu_node("a", ready=False), Shape("H100", 80, 8), want_schedulable=False),
    "cordoned is not schedulable": ReadCase(
        gpu_node("a", unschedulable=True), Shape("H100", 80, 8), want_schedulable=False
    ),
    "GPUs beyond allocatable are unhealthy": ReadCase(
        gpu_node("a", gpus=4, allocatable=3), Shape("H100", 80, 4), want_healthy=[True, True, True, False]
    ),
    "no count label: allocatable counts": ReadCase(
        with_allocatable(without_label(gpu_node("a"), "nvidia.com/gpu.count"), "2"), Shape("H100", 80, 2)
    ),
    "no product label": ReadCase(without_label(gpu_node("a"), "nvidia.com/gpu.product"), want_error="gpu.product"),
    "no memory label": ReadCase(without_label(gpu_node("a"), "nvidia.com/gpu.memory"), want_error="gpu.memory"),
    "memory label not a number": ReadCase(gpu_node("a", labels={"nvidia.com/gpu.memory": "80G"}), want_error="80G"),
    "allocatable not a number": ReadCase(with_allocatable(gpu_node("a"), "lots"), want_error="lots"),
}


@pytest.mark.parametrize("case", READ_CASES.values(), ids=READ_CASES.keys())
def test_read_node(case: ReadCase):
    if case.want_error:
        with pytest.raises(NodeUnusable, match=case.want_error):
            read_node(case.obj, "emu")
        return
    found = read_node(case.obj, "emu")
    if case.want_shape is None:
        assert found is None
        return
    assert found.node.shape == case.want_shape
    assert found.node.schedulable is case.want_schedulable
    assert found.node.gpus == tuple(f"emu/a/gpu{i}" for i in range(case.want_shape.gpus_per_node))
    assert [g.index for g in found.gpus] == list(range(case.want_shape.gpus_per_node))
    assert all(g.node == "a" and g.cluster == "emu" for g in found.gpus)
    assert [g.healthy for g in found.gpus] == (case.want_healthy or [True] * case.want_shape.gpus_per_node)


def test_read_node_keeps_what_kubernetes_says():
    found = read_node(gpu_node("a", slice="team-a", labels={"egs.io/gpr": "7"}), "emu")
    assert (found.slice, found.gpr, found.instance_type, found.allocatable) == ("team-a", "7", "p5.48xlarge", 8)
    assert found.gpus[0].model == "NVIDIA-H100-80GB-HBM3" and found.gpus[0].memory_mib == 81559
    assert read_node(gpu_node("b", slice=None), "emu").slice is None


def test_read_nodes_sorts_and_names_the_unusable():
    inventory = read_nodes(
        [gpu_node("b"), cpu_node("c"), without_label(gpu_node("x"), "nvidia.com/gpu.product"), gpu_node("a")], "emu"
    )
    assert [n.name for n in inventory.nodes] == ["a", "b"]
    assert len(inventory.gpus) == 16
    assert list(inventory.unusable) == ["x"] and "GPU Feature Discovery" in inventory.unusable["x"]


# --- MIG instances and shares, as the GPU Operator offers them -----------------------------


@dataclass
class UnitsCase:
    obj: dict
    whole: Shape | None  # the node's whole GPUs (read_node); None: none
    units: dict[str, Shape]  # planning node -> shape (read_units)


UNITS_CASES = {
    "mixed: every GPU in MIG mode": UnitsCase(
        mig_mixed_node("a", {"1g.10gb": 14, "3g.40gb": 4}, gpus=4),
        whole=None,
        units={"a:1g.10gb": Shape("H100", 80, 14, "1g.10gb"), "a:3g.40gb": Shape("H100", 80, 4, "3g.40gb")},
    ),
    "mixed: whole GPUs beside instances; GFD's count includes both": UnitsCase(
        mig_mixed_node("a", {"1g.10gb": 7}, whole=3, gpus=4),
        whole=Shape("H100", 80, 3),
        units={"a:1g.10gb": Shape("H100", 80, 7, "1g.10gb")},
    ),
    "single: nvidia.com/gpu are instances, the product says the GPU": UnitsCase(
        mig_single_node("a", "2g.20gb", 24), whole=None, units={"a:2g.20gb": Shape("H100", 80, 24, "2g.20gb")}
    ),
    "single strategy on a node without MIG: whole GPUs": UnitsCase(
        gpu_node("a", labels={"nvidia.com/mig.strategy": "single"}), whole=Shape("H100", 80, 8), units={}
    ),
    "time-sliced: GFD counts physical GPUs, -SHARED dropped": UnitsCase(
        time_sliced_node("a", replicas=4, gpus=2), whole=None, units={"a:shared": Shape("H100", 80, 8, replicas=4)}
    ),
    "time-sliced, renamed to nvidia.com/gpu.shared": UnitsCase(
        time_sliced_node("a", replicas=5, gpus=1, renamed=True),
        whole=None,
        units={"a:shared": Shape("H100", 80, 5, replicas=5)},
    ),
    "MPS shares count as shares": UnitsCase(
        time_sliced_node("a", replicas=2, gpus=1, strategy="mps"),
        whole=None,
        units={"a:shared": Shape("H100", 80, 2, replicas=2)},
    ),
    "one replica is no sharing": UnitsCase(
        gpu_node("a", labels={"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none"}),
        whole=Shape("H100", 80, 8),
        units={},
    ),
}


@pytest.mark.parametrize("case", UNITS_CASES.values(), ids=UNITS_CASES.keys())
def test_read_units(case: UnitsCase):
    whole = read_node(case.obj, "emu")
    units = read_units(case.obj, "emu")

    assert (whole.node.shape if whole else None) == case.whole
    assert {f.node.name: f.node.shape for f in units} == case.units
    for found in units:
        assert found.node.gpus == tuple(g.uuid for g in found.gpus)
        assert {(g.node, g.cluster, g.profile) for g in found.gpus} == {
            (found.node.name, "emu", found.node.shape.profile)
        }
        assert [g.index for g in found.gpus] == list(range(found.node.shape.gpus_per_node))
    inventory = read_nodes([case.obj], "emu")
    assert [n.name for n in inventory.nodes] == (["a"] if case.whole else []) + list(case.units)


def test_instance_and_share_ids_say_their_node_and_gpu():
    instances = read_units(mig_mixed_node("a", {"1g.10gb": 2}, unhealthy=1), "emu")[0]
    assert [(g.uuid, g.parent, g.model, g.memory_mib, g.healthy) for g in instances.gpus] == [
        ("emu/a/mig-1g.10gb-0", None, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 10240, True),
        ("emu/a/mig-1g.10gb-1", None, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 10240, False),
    ]
    assert instances.allocatable == 1
    shares = read_units(time_sliced_node("a", replicas=2, gpus=2), "emu")[0]
    assert [(g.uuid, g.parent, g.model) for g in shares.gpus] == [
        ("emu/a/gpu0::0", "emu/a/gpu0", "NVIDIA-H100-80GB-HBM3"),
        ("emu/a/gpu0::1", "emu/a/gpu0", "NVIDIA-H100-80GB-HBM3"),
        ("emu/a/gpu1::0", "emu/a/gpu1", "NVIDIA-H100-80GB-HBM3"),
        ("emu/a/gpu1::1", "emu/a/gpu1", "NVIDIA-H100-80GB-HBM3"),
    ]


def with_labels(obj: dict, labels: dict[str, str]) -> dict:
    obj["metadata"]["labels"].update(labels)
    return obj


UNUSABLE_UNITS = {
    "replicas egs-hub cannot count in GPU-equivalents": (time_sliced_node("a", replicas=11), "gpu.replicas"),
    "replicas not a number": (
        with_labels(time_sliced_node("a"), {"nvidia.com/gpu.replicas": "four"}),
        "'four'",
    ),
    "an unknown MIG profile": (mig_mixed_node("a", {"1c.3g.40gb": 2}), "'1c.3g.40gb'"),
    "an instance larger than the GPU": (
        mig_mixed_node("a", {"7g.80gb": 1}, product="NVIDIA-A100-SXM4-40GB", memory_mib=40960),
        "does not fit a 40 GB A100",
    ),
    "single strategy, product without memory": (
        with_labels(mig_single_node("a"), {"nvidia.com/gpu.product": "NVIDIA-A30-MIG-1g.6gb"}),
        "does not say the GPU's memory",
    ),
}


@pytest.mark.parametrize("obj, error", UNUSABLE_UNITS.values(), ids=UNUSABLE_UNITS.keys())
def test_unusable_units_are_left_out_saying_why(obj: dict, error: str):
    with pytest.raises(NodeUnusable, match=error):
        read_units(obj, "emu")
    inventory = read_nodes([obj], "emu")
    assert inventory.nodes == [] and error.strip("'") in inventory.unusable["a"]


@dataclass
class EntryCase:
    obj: dict | None
    gpus: int = 8
    want: list[str] = field(default_factory=list)  # fragments, one per expected problem


ENTRY_CASES = {
    "free and ready": EntryCase(gpu_node("a")),
    "entered for this GPR already": EntryCase(gpu_node("a", slice="team-a", labels={"egs.io/gpr": "7"})),
    "not Ready": EntryCase(gpu_node("a", ready=False), want=["not Ready"]),
    "cordoned": EntryCase(gpu_node("a", unschedulable=True), want=["cordoned"]),
    "fewer allocatable GPUs than the GPR needs": EntryCase(gpu_node("a", allocatable=6), want=["6 allocatable"]),
    "fewer allocatable but enough": EntryCase(gpu_node("a", allocatable=6), gpus=4),
    "held by another slice": EntryCase(
        gpu_node("a", slice="team-b", labels={"egs.io/gpr": "3"}), want=["slice 'team-b' (GPR 3)"]
    ),
    "held by the same slice for another GPR": EntryCase(
        gpu_node("a", slice="team-a", labels={"egs.io/gpr": "3"}), want=["GPR 3"]
    ),
    "unmanaged": EntryCase(gpu_node("a", slice=None), want=["not managed"]),
    "no GPUs any more": EntryCase(None, want=["no allocatable"]),
    "everything wrong at once": EntryCase(
        gpu_node("a", ready=False, unschedulable=True, slice="team-b"), want=["not Ready", "cordoned", "team-b"]
    ),
}


@pytest.mark.parametrize("case", ENTRY_CASES.values(), ids=ENTRY_CASES.keys())
def test_entry_problems(case: EntryCase):
    found = read_node(case.obj, "emu") if case.obj is not None else None
    problems = entry_problems(found, "a", 7, "team-a", case.gpus)
    assert len(problems) == len(case.want), problems
    for problem, fragment in zip(problems, case.want, strict=True):
        assert fragment in problem and "node a" in problem


def test_entry_patch_sets_slice_and_keeps_other_taints():
    node = gpu_node("a")
    node["spec"]["taints"].insert(0, {"key": "dedicated", "value": "ml", "effect": "NoExecute"})
    assert objects.entry_patch(node, "team-a", 7) == {
        "metadata": {"labels": {"egs.io/slice": "team-a", "egs.io/gpr": "7"}},
        "spec": {
            "taints": [
                {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                {"key": "egs.io/slice", "value": "team-a", "effect": "NoSchedule"},
            ]
        },
    }


def test_exit_uncordons_only_what_it_cordoned():
    node = gpu_node("a", slice="team-a")
    cordon = objects.cordon_patch(node, "2025-01-01T00:00:00+00:00")
    assert cordon["spec"] == {"unschedulable": True}
    node["metadata"]["annotations"] = cordon["metadata"]["annotations"]
    returned = objects.return_patch(node)
    assert returned["spec"] == {
        "taints": [{"key": "egs.io/slice", "value": "free", "effect": "NoSchedule"}],
        "unschedulable": False,
    }
    assert returned["metadata"]["labels"] == {"egs.io/slice": "free", "egs.io/gpr": None}
    cordoned_before = gpu_node("a", slice="team-a", unschedulable=True)
    cordoned_before["metadata"]["annotations"] = objects.cordon_patch(cordoned_before, "t")["metadata"]["annotations"]
    assert "unschedulable" not in objects.return_patch(cordoned_before)["spec"]
