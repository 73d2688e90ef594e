"""Kubernetes Node objects read as egs-hub nodes and GPUs; pure functions on plain dicts.

Vocabulary: a *GPU node* has ``status.allocatable["nvidia.com/gpu"] > 0`` (the
NVIDIA device plugin's resource); its *shape* comes from GPU Feature Discovery
(GFD) labels: ``nvidia.com/gpu.product`` (``NVIDIA-H100-80GB-HBM3``: GFD puts
dashes for spaces), ``nvidia.com/gpu.memory`` (MiB per GPU) and
``nvidia.com/gpu.count``. A *managed* node carries the label ``egs.io/slice``:
``free`` in the pool, or the name of the slice it is bound to, with
``egs.io/gpr`` naming the GPR.

Nodes expose no GPU UUIDs, so a GPU's id is ``<cluster>/<node>/gpu<i>``: stable
while the node keeps its name, and unique across clusters (GPU ids are global).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...core.model import GPU, Node, Shape
from ...core.node_pools import POOL_LABEL
from ..local.nvml import gpu_model

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
COUNT_LABEL = "nvidia.com/gpu.count"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
SLICE_LABEL = "egs.io/slice"
GPR_LABEL = "egs.io/gpr"
FREE = "free"


class NodeUnusable(ValueError):
    """A GPU node that cannot be described (labels missing or wrong); the message says which."""


@dataclass(frozen=True)
class FoundNode:
    """A GPU node as read from its object: the core node and GPUs, and what Kubernetes says of it.

    ``schedulable`` on ``node`` is Ready and not cordoned; ``allocatable`` GPUs are
    those the device plugin offers (the others are unhealthy); ``slice`` is the
    ``egs.io/slice`` label (None on an unmanaged node) and ``gpr`` the ``egs.io/gpr`` one.
    """

    node: Node
    gpus: tuple[GPU, ...]
    ready: bool
    cordoned: bool
    allocatable: int
    slice: str | None
    gpr: str | None
    instance_type: str | None


def gpu_id(cluster: str, node: str, index: int) -> str:
    return f"{cluster}/{node}/gpu{index}"


def _count(value: object, what: str) -> int:
    """A non-negative whole number from a label or quantity string ("8"); NodeUnusable otherwise."""
    text = str(value).strip()
    if not text.isdigit():
        raise NodeUnusable(f"{what} is {value!r}, not a whole number")
    return int(text)


def allocatable_gpus(obj: Mapping) -> int:
    value = ((obj.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    if value is None:
        return 0
    return _count(value, f"status.allocatable[{GPU_RESOURCE!r}]")


def is_ready(obj: Mapping) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def product_model(product: str) -> str:
    """The short model of a GFD product label: "NVIDIA-H100-80GB-HBM3" -> "H100" (as NVML names map)."""
    return gpu_model(product.replace("-", " "))


def read_node(obj: Mapping, cluster: str) -> FoundNode | None:
    """The node as egs-hub sees it; None for a node without GPUs; NodeUnusable when GFD labels are missing."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    allocatable = allocatable_gpus(obj)
    if allocatable == 0:
        return None
    labels = meta.get("labels") or {}
    product = labels.get(PRODUCT_LABEL)
    if not product:
        raise NodeUnusable(f"node {name} has no {PRODUCT_LABEL} label: is GPU Feature Discovery running?")
    if MEMORY_LABEL not in labels:
        raise NodeUnusable(f"node {name} has no {MEMORY_LABEL} label: is GPU Feature Discovery running?")
    memory_mib = _count(labels[MEMORY_LABEL], f"node {name}'s label {MEMORY_LABEL}")
    if memory_mib == 0:
        raise NodeUnusable(f"node {name}'s label {MEMORY_LABEL} is 0 MiB")
    count = _count(labels[COUNT_LABEL], f"node {name}'s label {COUNT_LABEL}") if COUNT_LABEL in labels else 0
    # GFD counts the GPUs on the node; the device plugin leaves unhealthy ones out of allocatable.
    count = max(count, allocatable)
    ready = is_ready(obj)
    cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
    shape = Shape(product_model(product), round(memory_mib / 1024), count)
    gpus = tuple(
        GPU(
            uuid=gpu_id(cluster, name, index),
            index=index,
            node=name,
            cluster=cluster,
            model=product,
            memory_mib=memory_mib,
            healthy=index < allocatable,
        )
        for index in range(count)
    )
    node = Node(
        name=name,
        cluster=cluster,
        shape=shape,
        gpus=tuple(g.uuid for g in gpus),
        schedulable=ready and not cordoned,
        pool=labels.get(POOL_LABEL),
    )
    return FoundNode(
        node=node,
        gpus=gpus,
        ready=ready,
        cordoned=cordoned,
        allocatable=allocatable,
        slice=labels.get(SLICE_LABEL),
        gpr=labels.get(GPR_LABEL),
        instance_type=labels.get(INSTANCE_TYPE_LABEL),
    )


@dataclass(frozen=True)
class NodeInventory:
    """The GPU nodes found, and why the others were left out (node name -> reason)."""

    found: tuple[FoundNode, ...]
    unusable: dict[str, str]

    @property
    def nodes(self) -> list[Node]:
        return [f.node for f in self.found]

    @property
    def gpus(self) -> list[GPU]:
        return [g for f in self.found for g in f.gpus]


def read_nodes(objects: Iterable[Mapping], cluster: str) -> NodeInventory:
    found, unusable = [], {}
    for obj in sorted(objects, key=lambda o: (o.get("metadata") or {}).get("name") or ""):
        try:
            node = read_node(obj, cluster)
        except NodeUnusable as e:
            unusable[(obj.get("metadata") or {}).get("name") or "?"] = str(e)
            continue
        if node is not None:
            found.append(node)
    return NodeInventory(tuple(found), unusable)


def entry_problems(found: FoundNode | None, name: str, gpr_id: int, slice_name: str, gpus: int) -> list[str]:
    """Why the node cannot enter the GPR's slice (empty when it can): the pre-checks of entry.

    ``gpus`` are the GPR's GPUs on this node. A node already entered for this
    same GPR passes, so that binding again after a restart is harmless.
    """
    if found is None:
        return [f"node {name} has no allocatable {GPU_RESOURCE}"]
    problems = []
    if not found.ready:
        problems.append(f"node {name} is not Ready")
    if found.cordoned:
        problems.append(f"node {name} is cordoned (spec.unschedulable)")
    if found.allocatable < gpus:
        problems.append(f"node {name} has {found.allocatable} allocatable {GPU_RESOURCE}, the GPR needs {gpus}")
    entered = found.slice == slice_name and found.gpr == str(gpr_id)
    if found.slice != FREE and not entered:
        held = f"slice {found.slice!r}" + (f" (GPR {found.gpr})" if found.gpr else "")
        problems.append(
            f"node {name} is not in the free pool: {SLICE_LABEL} is {held}"
            if found.slice
            else f"node {name} is not managed by egs-hub (no {SLICE_LABEL} label)"
        )
    return problems
