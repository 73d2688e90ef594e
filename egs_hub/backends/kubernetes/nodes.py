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

*Shared GPUs*, as the GPU Operator exposes them, are read as planning nodes of
units (core/sharing.py), named ``<node>:<profile>`` or ``<node>:shared``:

- MIG, ``nvidia.com/mig.strategy=mixed``: each resource ``nvidia.com/mig-<profile>``
  (its count in ``status.capacity``, the healthy ones in ``allocatable``) is a
  planning node of instances ``<cluster>/<node>/mig-<profile>-<k>``; GFD's
  ``nvidia.com/gpu.*`` labels describe the whole GPUs, and ``nvidia.com/gpu``
  counts those not in MIG mode.
- MIG, ``nvidia.com/mig.strategy=single``: every GPU is split alike, the product
  label says how (``NVIDIA-H100-80GB-HBM3-MIG-1g.10gb``) and ``nvidia.com/gpu``
  counts the instances; the whole GPU's memory is read from the product name.
- Time-slicing (or MPS): ``nvidia.com/gpu.sharing-strategy`` ``time-slicing`` or
  ``mps`` with ``nvidia.com/gpu.replicas`` above 1; GFD's count is of physical GPUs,
  the product label may end ``-SHARED``, and the shares are ``nvidia.com/gpu``
  (``nvidia.com/gpu.shared`` where the device plugin renames them), ids
  ``<cluster>/<node>/gpu<i>::<k>``.

Kubernetes does not say which GPU an instance is on, so an instance has no parent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...core import sharing
from ...core.model import GPU, Node, Shape
from ...core.node_pools import POOL_LABEL
from ..local.nvml import gpu_model

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"  # time-sliced shares where the device plugin renames them
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"  # + profile: MIG instances under the mixed strategy
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
COUNT_LABEL = "nvidia.com/gpu.count"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # the mig-parted config the mig-manager applies
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # pending, rebooting, success or failed
REPARTITIONING = ("pending", "rebooting")  # the mig-manager is applying a config: nothing runs there
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_STRATEGIES = ("time-slicing", "mps")
SHARED_SUFFIX = "-SHARED"
_SINGLE_MIG_PRODUCT = re.compile(r"(?P<product>.+)-MIG-(?P<profile>[^-]+)")
_PRODUCT_MEMORY = re.compile(r"-(?P<gb>[0-9]+)GB(?:-|$)")
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
    ``host`` is the Kubernetes node (``node`` a planning node of its instances or shares, or the
    node itself) and ``resource`` what a pod asks for one of its GPUs as. ``mig_state`` is the
    mig-manager's ``nvidia.com/mig.config.state``: while it re-partitions the node (pending,
    rebooting) the node is not schedulable.
    """

    node: Node
    gpus: tuple[GPU, ...]
    ready: bool
    cordoned: bool
    allocatable: int
    slice: str | None
    gpr: str | None
    instance_type: str | None
    host: str
    resource: str = GPU_RESOURCE
    mig_state: str | None = None


def gpu_id(cluster: str, node: str, index: int) -> str:
    return f"{cluster}/{node}/gpu{index}"


def _count(value: object, what: str) -> int:
    """A non-negative whole number from a label or quantity string ("8"); NodeUnusable otherwise."""
    text = str(value).strip()
    if not text.isdigit():
        raise NodeUnusable(f"{what} is {value!r}, not a whole number")
    return int(text)


def is_gpu_resource(resource: str) -> bool:
    """Whether an extended resource is a GPU, a MIG instance or a share of a GPU."""
    return resource in (GPU_RESOURCE, SHARED_RESOURCE) or resource.startswith(MIG_RESOURCE_PREFIX)


def _quantity(obj: Mapping, section: str, resource: str) -> int:
    """``status.<section>[resource]`` as a whole number, 0 when absent; NodeUnusable when not a number."""
    value = ((obj.get("status") or {}).get(section) or {}).get(resource)
    if value is None:
        return 0
    return _count(value, f"status.{section}[{resource!r}]")


def allocatable_gpus(obj: Mapping) -> int:
    return _quantity(obj, "allocatable", GPU_RESOURCE)


def is_ready(obj: Mapping) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def product_model(product: str) -> str:
    """The short model of a GFD product label: "NVIDIA-H100-80GB-HBM3" -> "H100" (as NVML names map)."""
    return gpu_model(product.replace("-", " "))


def _shares_gpus(labels: Mapping) -> bool:
    """Whether the device plugin offers the node's GPUs as time-sliced (or MPS) shares."""
    return labels.get(SHARING_LABEL) in SHARING_STRATEGIES and labels.get(REPLICAS_LABEL, "1").strip() != "1"


def _single_mig(labels: Mapping) -> re.Match | None:
    """The product and profile of a node whose ``nvidia.com/gpu`` are MIG instances (single strategy)."""
    if labels.get(MIG_STRATEGY_LABEL) != "single":
        return None
    return _SINGLE_MIG_PRODUCT.fullmatch(labels.get(PRODUCT_LABEL) or "")


def _gfd(labels: Mapping, name: str) -> tuple[str, int]:
    """GFD's product and memory (MiB) labels; NodeUnusable when missing or wrong."""
    product = labels.get(PRODUCT_LABEL)
    if not product:
        raise NodeUnusable(f"node {name} has no {PRODUCT_LABEL} label: is GPU Feature Discovery running?")
    if MEMORY_LABEL not in labels:
        raise NodeUnusable(f"node {name} has no {MEMORY_LABEL} label: is GPU Feature Discovery running?")
    memory_mib = _count(labels[MEMORY_LABEL], f"node {name}'s label {MEMORY_LABEL}")
    if memory_mib == 0:
        raise NodeUnusable(f"node {name}'s label {MEMORY_LABEL} is 0 MiB")
    return product, memory_mib


def read_node(obj: Mapping, cluster: str) -> FoundNode | None:
    """The node's whole GPUs as egs-hub sees them; None for a node without any (no GPUs, or all of
    them MIG instances or shares: ``read_units``); NodeUnusable when GFD labels are missing."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    labels = meta.get("labels") or {}
    if _shares_gpus(labels) or _single_mig(labels):
        return None
    allocatable = allocatable_gpus(obj)
    if allocatable == 0:
        return None
    product, memory_mib = _gfd(labels, name)
    if labels.get(MIG_STRATEGY_LABEL) == "mixed":  # GFD's count includes the GPUs in MIG mode
        count = _quantity(obj, "capacity", GPU_RESOURCE)
    else:
        count = _count(labels[COUNT_LABEL], f"node {name}'s label {COUNT_LABEL}") if COUNT_LABEL in labels else 0
    # The device plugin leaves unhealthy GPUs out of allocatable.
    count = max(count, allocatable)
    shape = Shape(product_model(product), round(memory_mib / 1024), count)
    gpus = [
        GPU(gpu_id(cluster, name, index), index, name, cluster, product, memory_mib, healthy=index < allocatable)
        for index in range(count)
    ]
    return _found(obj, cluster, name, shape, gpus, allocatable, GPU_RESOURCE)


def read_units(obj: Mapping, cluster: str) -> list[FoundNode]:
    """The node's MIG instances and time-sliced shares, one planning node per profile (or of its
    shares); NodeUnusable when their labels or resources are missing or wrong."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    labels = meta.get("labels") or {}
    found = []
    if _shares_gpus(labels):
        found.append(_shares(obj, cluster, name, labels))
    single = _single_mig(labels)
    if single is not None:
        whole = _PRODUCT_MEMORY.search(single["product"])
        if whole is None:
            raise NodeUnusable(
                f"node {name}: the product {single['product']!r} of its MIG instances does not say the GPU's memory"
            )
        found.append(
            _instances(obj, cluster, name, single["product"], int(whole["gb"]), single["profile"], GPU_RESOURCE)
        )
    if labels.get(MIG_STRATEGY_LABEL) == "mixed":
        status = obj.get("status") or {}
        resources = {*(status.get("capacity") or {}), *(status.get("allocatable") or {})}
        profiles = sorted(r.removeprefix(MIG_RESOURCE_PREFIX) for r in resources if r.startswith(MIG_RESOURCE_PREFIX))
        if profiles:
            product, memory_mib = _gfd(labels, name)
            memory_gb = round(memory_mib / 1024)
            for profile in profiles:
                resource = MIG_RESOURCE_PREFIX + profile
                found.append(_instances(obj, cluster, name, product, memory_gb, profile, resource))
    return [f for f in found if f.gpus]


def _instances(
    obj: Mapping, cluster: str, name: str, product: str, memory_gb: int, profile: str, resource: str
) -> FoundNode:
    """The planning node of the node's MIG instances of ``profile``, offered as ``resource``."""
    try:
        instance_gb = sharing.profile_memory_gb(profile)
    except ValueError:
        raise NodeUnusable(f"node {name}: {profile!r} ({resource}) is not a MIG profile egs-hub knows") from None
    model = product_model(product)
    if instance_gb > memory_gb:
        raise NodeUnusable(f"node {name}: a {profile} instance does not fit a {memory_gb} GB {model}")
    allocatable = _quantity(obj, "allocatable", resource)
    count = max(_quantity(obj, "capacity", resource), allocatable)
    unit_node = sharing.unit_node_name(name, profile)
    gpus = [
        GPU(
            f"{cluster}/{name}/mig-{profile}-{k}",
            k,
            unit_node,
            cluster,
            f"{product}-MIG-{profile}",
            instance_gb * 1024,
            healthy=k < allocatable,
            profile=profile,
        )
        for k in range(count)
    ]
    return _found(obj, cluster, unit_node, Shape(model, memory_gb, count, profile), gpus, allocatable, resource)


def _shares(obj: Mapping, cluster: str, name: str, labels: Mapping) -> FoundNode:
    """The planning node of the node's time-sliced (or MPS) shares."""
    try:
        replicas = sharing.check_replicas(_count(labels[REPLICAS_LABEL], f"node {name}'s label {REPLICAS_LABEL}"))
    except sharing.LayoutError as e:
        raise NodeUnusable(f"node {name}'s label {REPLICAS_LABEL}: {e}") from None
    product, memory_mib = _gfd(labels, name)
    resource = SHARED_RESOURCE if _quantity(obj, "capacity", SHARED_RESOURCE) else GPU_RESOURCE
    allocatable = _quantity(obj, "allocatable", resource)
    offered = max(_quantity(obj, "capacity", resource), allocatable)
    if COUNT_LABEL in labels:  # GFD counts the physical GPUs
        physical = _count(labels[COUNT_LABEL], f"node {name}'s label {COUNT_LABEL}")
    else:
        physical = -(-offered // replicas)
    product = product.removesuffix(SHARED_SUFFIX)
    unit_node = sharing.unit_node_name(name, "shared")
    gpus = [
        GPU(
            sharing.replica_uuid(gpu_id(cluster, name, index // replicas), index % replicas),
            index,
            unit_node,
            cluster,
            product,
            memory_mib,
            healthy=index < allocatable,
            parent=gpu_id(cluster, name, index // replicas),
        )
        for index in range(physical * replicas)
    ]
    shape = Shape(product_model(product), round(memory_mib / 1024), len(gpus), replicas=replicas)
    return _found(obj, cluster, unit_node, shape, gpus, allocatable, resource)


def _found(
    obj: Mapping, cluster: str, name: str, shape: Shape, gpus: list[GPU], allocatable: int, resource: str
) -> FoundNode:
    """A planning node ``name`` of the node ``obj`` with ``gpus`` asked for as ``resource``, as Kubernetes
    says of the node."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    ready = is_ready(obj)
    cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
    mig_state = labels.get(MIG_CONFIG_STATE_LABEL)
    node = Node(
        name=name,
        cluster=cluster,
        shape=shape,
        gpus=tuple(g.uuid for g in gpus),
        schedulable=ready and not cordoned and mig_state not in REPARTITIONING,
        pool=labels.get(POOL_LABEL) if shape.whole else None,  # a pool grows by whole nodes
    )
    return FoundNode(
        node=node,
        gpus=tuple(gpus),
        ready=ready,
        cordoned=cordoned,
        allocatable=allocatable,
        slice=labels.get(SLICE_LABEL),
        gpr=labels.get(GPR_LABEL),
        instance_type=labels.get(INSTANCE_TYPE_LABEL),
        host=meta.get("name") or "",
        resource=resource,
        mig_state=mig_state,
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
            units = read_units(obj, cluster)
        except NodeUnusable as e:
            unusable[(obj.get("metadata") or {}).get("name") or "?"] = str(e)
            continue
        found.extend([node, *units] if node is not None else units)
    return NodeInventory(tuple(found), unusable)


def capacity_problems(found: FoundNode, count: int) -> list[str]:
    """Why ``count`` GPUs (or units) of ``found`` cannot be used: its node not Ready or cordoned, fewer allocatable."""
    problems = []
    if not found.ready:
        problems.append(f"node {found.host} is not Ready")
    if found.cordoned:
        problems.append(f"node {found.host} is cordoned (spec.unschedulable)")
    if found.mig_state in REPARTITIONING:
        problems.append(f"node {found.host} is being re-partitioned ({MIG_CONFIG_STATE_LABEL}={found.mig_state})")
    if found.allocatable < count:
        problems.append(
            f"node {found.host} has {found.allocatable} allocatable {found.resource}, the GPR needs {count}"
        )
    return problems


def entry_problems(found: FoundNode | None, name: str, gpr_id: int, slice_name: str, gpus: int) -> list[str]:
    """Why the node cannot enter the GPR's slice (empty when it can): the pre-checks of entry.

    ``gpus`` are the GPR's GPUs on this node. A node already entered for this
    same GPR passes, so that binding again after a restart is harmless.
    """
    if found is None:
        return [f"node {name} has no allocatable {GPU_RESOURCE}"]
    problems = capacity_problems(found, gpus)
    entered = found.slice == slice_name and found.gpr == str(gpr_id)
    if found.slice != FREE and not entered:
        held = f"slice {found.slice!r}" + (f" (GPR {found.gpr})" if found.gpr else "")
        problems.append(
            f"node {name} is not in the free pool: {SLICE_LABEL} is {held}"
            if found.slice
            else f"node {name} is not managed by egs-hub (no {SLICE_LABEL} label)"
        )
    return problems
