"""Test objects as plain dicts: GPU nodes as GPU Feature Discovery labels them, pods, namespaces, budgets.

``gpu_node`` gives what a node of a GPU cluster looks like to the API: the
NVIDIA device plugin's ``nvidia.com/gpu`` capacity and allocatable, GFD's
``nvidia.com/gpu.*`` labels (product with dashes for spaces, memory in MiB), the
instance type, and a Ready condition. Managed nodes start in the free pool
(label and taint ``egs.io/slice=free``); ``slice=None`` gives an unmanaged node.
"""

from __future__ import annotations

FREE_TAINT = {"key": "egs.io/slice", "value": "free", "effect": "NoSchedule"}


def gpu_node(
    name: str,
    *,
    gpus: int = 8,
    product: str = "NVIDIA-H100-80GB-HBM3",
    memory_mib: int = 81559,
    instance_type: str = "p5.48xlarge",
    allocatable: int | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    slice: str | None = "free",
    labels: dict | None = None,
) -> dict:
    gfd = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.count": str(gpus),
        "node.kubernetes.io/instance-type": instance_type,
        "kubernetes.io/hostname": name,
    }
    managed = {} if slice is None else {"egs.io/slice": slice}
    taints = [] if slice is None else [{**FREE_TAINT, "value": slice}]
    usable = gpus if allocatable is None else allocatable
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**gfd, **managed, **(labels or {})}},
        "spec": {"unschedulable": unschedulable, "taints": taints},
        "status": node_status(gpus, usable, ready),
    }


def mig_mixed_node(name: str, instances: dict[str, int], *, whole: int = 0, unhealthy: int = 0, **node) -> dict:
    """A node under the GPU Operator's mixed MIG strategy: GFD's ``nvidia.com/gpu.*`` labels describe
    its whole GPUs (all of them counted), ``whole`` of which are not in MIG mode (``nvidia.com/gpu``);
    per profile, the resource ``nvidia.com/mig-<profile>`` and GFD's ``.count`` and ``.memory`` labels.
    ``unhealthy`` instances of each profile are left out of allocatable."""
    labels = {"nvidia.com/mig.strategy": "mixed"}
    for profile, count in instances.items():
        labels |= {f"nvidia.com/mig-{profile}.count": str(count), f"nvidia.com/mig-{profile}.memory": "9856"}
    obj = gpu_node(name, labels=labels, **node)
    status = obj["status"]
    status["capacity"]["nvidia.com/gpu"] = status["allocatable"]["nvidia.com/gpu"] = str(whole)
    for profile, count in instances.items():
        status["capacity"][f"nvidia.com/mig-{profile}"] = str(count)
        status["allocatable"][f"nvidia.com/mig-{profile}"] = str(count - unhealthy)
    return obj


def mig_single_node(name: str, profile: str = "1g.10gb", instances: int = 56, **node) -> dict:
    """A node under the single MIG strategy: every GPU split alike, GFD's product, count and memory
    labels overridden to describe the instances, ``nvidia.com/gpu`` counting them."""
    return gpu_node(
        name,
        gpus=instances,
        product=f"NVIDIA-H100-80GB-HBM3-MIG-{profile}",
        memory_mib=9856,
        labels={"nvidia.com/mig.strategy": "single"},
        **node,
    )


def time_sliced_node(
    name: str, replicas: int = 4, gpus: int = 2, renamed: bool = False, strategy: str = "time-slicing"
) -> dict:
    """A node whose GPUs the device plugin time-slices (or shares through MPS) into ``replicas``: GFD
    counts the physical GPUs, adds ``-SHARED`` to the product and labels the replicas and strategy;
    the shares are ``nvidia.com/gpu``, or ``nvidia.com/gpu.shared`` where the plugin renames them
    (then without the suffix)."""
    product = "NVIDIA-H100-80GB-HBM3" + ("" if renamed else "-SHARED")
    labels = {"nvidia.com/gpu.replicas": str(replicas), "nvidia.com/gpu.sharing-strategy": strategy}
    obj = gpu_node(name, gpus=gpus, product=product, labels=labels)
    status = obj["status"]
    if renamed:
        del status["capacity"]["nvidia.com/gpu"], status["allocatable"]["nvidia.com/gpu"]
    resource = "nvidia.com/gpu.shared" if renamed else "nvidia.com/gpu"
    status["capacity"][resource] = status["allocatable"][resource] = str(gpus * replicas)
    return obj


def held_gpus(count: int, node: str = "gpu-a") -> list[str]:
    """The ids of ``count`` whole GPUs a slice holds on ``node`` (as nodes.py names them on cluster emu)."""
    return [f"emu/{node}/gpu{i}" for i in range(count)]


def node_status(gpus: int, allocatable: int, ready: bool) -> dict:
    return {
        "capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": str(gpus)},
        "allocatable": {"cpu": "191", "memory": "2000000Mi", "nvidia.com/gpu": str(allocatable)},
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
    }


def cpu_node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "8"},
            "allocatable": {"cpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def namespace(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def pod(name: str, node: str | None = None, labels: dict | None = None, owner_kind: str | None = None) -> dict:
    meta: dict = {"name": name, "labels": labels or {}}
    if owner_kind:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "u1"}]
    spec: dict = {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pod_disruption_budget(name: str, match_labels: dict, max_unavailable: int = 0) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": match_labels}, "maxUnavailable": max_unavailable},
    }
