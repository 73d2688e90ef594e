"""Share nodes: Kubernetes nodes whose GPUs several slices use at once, as MIG instances or time-sliced shares.

Vocabulary: a *share node* is a managed GPU node whose instances or shares the planner gives to GPRs one
by one (its planning nodes ``<node>:<profile>`` and ``<node>:shared``, nodes.py); it stays in the free
pool (``egs.io/slice=free``, and its taint). A *unit resource* is what a pod asks for one unit as:
``nvidia.com/mig-<profile>`` (the GPU Operator's mixed MIG strategy) or ``nvidia.com/gpu.shared``
(time-slicing with the device plugin's ``renameByDefault``). Units offered as ``nvidia.com/gpu`` (the
single MIG strategy, time-slicing without renaming) are listed, not offered: a pod asking for
``nvidia.com/gpu`` cannot be told from one asking for whole GPUs. Neither are the whole GPUs of a node
that offers units: it cannot enter one slice whole while others use its units.

A slice *holds units* on a share node while one of its GPRs is bound there: the node carries the label
``share.egs.io/<slice>=true``, on which the webhook puts the slice's unit pods (webhook.py), and the
annotation ``share.egs.io/<slice>`` listing those GPRs' ids. Entry adds the GPR; exit takes it out, and
once the slice's last GPR there goes it removes the label (no new pod of the slice lands there), notes
when exit began (``share-exit.egs.io/<slice>``), evicts the slice's pods on the node that ask for a
unit resource, deletes what remains ``exit_grace`` later, and then drops the notes. The device plugin,
not egs-hub, picks which of the node's units a pod gets; the slice's quota (slice_objects.py) caps what
its namespaces may ask for per resource at what it holds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from ...core.sharing import host_of, unit_kind
from .nodes import (
    FREE,
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    SHARED_RESOURCE,
    SLICE_LABEL,
    FoundNode,
    capacity_problems,
)

SHARE_PREFIX = "share.egs.io/"
EXIT_PREFIX = "share-exit.egs.io/"
_INSTANCE_ID = re.compile(r"[^/]+/[^/]+/mig-(?P<profile>.+)-[0-9]+")
_SHARE_ID = re.compile(r"[^/]+/[^/]+/gpu[0-9]+::[0-9]+")


def share_label(slice_name: str) -> str:
    """The label (and annotation) of a share node on which ``slice_name`` holds units."""
    return SHARE_PREFIX + slice_name


def is_unit_resource(resource: str) -> bool:
    return resource == SHARED_RESOURCE or resource.startswith(MIG_RESOURCE_PREFIX)


def resource_of(gpu: str) -> str:
    """What a pod asks for the GPU id ``gpu`` (nodes.py names them) as."""
    if instance := _INSTANCE_ID.fullmatch(gpu):
        return MIG_RESOURCE_PREFIX + instance["profile"]
    return SHARED_RESOURCE if _SHARE_ID.fullmatch(gpu) else GPU_RESOURCE


def planning_resource(planning_node: str) -> str:
    """What a pod asks for a unit of the planning node as (``gpu-a:1g.10gb``, ``gpu-a:shared``, ``gpu-a``)."""
    kind = unit_kind(planning_node)
    if kind is None:
        return GPU_RESOURCE
    return SHARED_RESOURCE if kind == "shared" else MIG_RESOURCE_PREFIX + kind


def resource_counts(gpus: Iterable[str]) -> dict[str, int]:
    """How many of ``gpus`` a pod asks for as each resource."""
    return dict(Counter(resource_of(g) for g in gpus))


def not_offered(found: FoundNode, share_hosts: set[str]) -> str | None:
    """Why the planner may not use the planning node ``found`` (None: it may); ``share_hosts`` are the
    Kubernetes nodes that offer units."""
    if found.node.shape.whole:
        return "its whole GPUs are not offered beside its instances or shares" if found.host in share_hosts else None
    if not is_unit_resource(found.resource):
        return (
            f"its units are {found.resource}, which a pod cannot tell from whole GPUs "
            f"(use the mixed MIG strategy, or time-slicing with renameByDefault: {SHARED_RESOURCE})"
        )
    if found.slice != FREE:
        return f"it is not in the free pool ({SLICE_LABEL} is {found.slice!r})"
    return None


def holders(obj: Mapping, slice_name: str) -> list[str]:
    """The ids of the slice's GPRs that hold units on the node, as its annotation lists them."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return [g for g in (annotations.get(share_label(slice_name)) or "").split(",") if g]


def entry_problems(found: FoundNode | None, name: str, count: int) -> list[str]:
    """Why ``count`` units of the planning node ``name`` cannot be used now (empty when they can)."""
    if found is None:
        return [f"node {host_of(name)} no longer offers the units of {name}"]
    problems = capacity_problems(found, count)
    if found.slice != FREE:
        problems.append(f"node {found.host} is not in the free pool: {SLICE_LABEL} is {found.slice!r}")
    return problems


def entry_patch(obj: Mapping, slice_name: str, gpr_id: int) -> dict:
    """The slice holds units on the node for ``gpr_id`` too: label, and the GPR added to the annotation
    (an exit of the slice's units that had begun there is over)."""
    ids = holders(obj, slice_name)
    if str(gpr_id) not in ids:
        ids.append(str(gpr_id))
    key = share_label(slice_name)
    return {"metadata": {"labels": {key: "true"}, "annotations": {key: ",".join(ids), EXIT_PREFIX + slice_name: None}}}


def keep_patch(obj: Mapping, slice_name: str, gpr_id: int) -> dict:
    """The GPR leaves the node's units while other GPRs of its slice hold some there."""
    ids = [g for g in holders(obj, slice_name) if g != str(gpr_id)]
    return {"metadata": {"annotations": {share_label(slice_name): ",".join(ids)}}}


def undo_patch(obj: Mapping, slice_name: str, gpr_id: int) -> dict | None:
    """An interrupted entry of the GPR's units taken back; None when the node does not list the GPR."""
    ids = holders(obj, slice_name)
    if str(gpr_id) not in ids:
        return None
    return keep_patch(obj, slice_name, gpr_id) if len(ids) > 1 else done_patch(slice_name)


def exit_patch(slice_name: str, started: str) -> dict:
    """The slice's last GPR on the node leaves: no new pod of the slice lands here; exit began at ``started``."""
    return {"metadata": {"labels": {share_label(slice_name): None}, "annotations": {EXIT_PREFIX + slice_name: started}}}


def done_patch(slice_name: str) -> dict:
    """The slice's pods are gone from the node: nothing of the slice is noted on it."""
    key = share_label(slice_name)
    return {"metadata": {"labels": {key: None}, "annotations": {key: None, EXIT_PREFIX + slice_name: None}}}


def exit_started(obj: Mapping, slice_name: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(EXIT_PREFIX + slice_name)
