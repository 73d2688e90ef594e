"""Patches and request bodies the Kubernetes backend sends; plain functions that return new objects.

Vocabulary: *entry* moves a free node into a GPR's slice, *exit* moves it back;
the slice taint is ``egs.io/slice=<slice>:NoSchedule`` (``free`` in the pool).
Node patches are strategic merge patches (what kubernetes_asyncio sends for a
dict): labels merge key by key and null deletes one, while ``spec.taints``
declares no patch strategy and is replaced whole, so the taint patches carry
the node's other taints along.

| what            | label egs.io/slice | label egs.io/gpr | taint egs.io/slice | unschedulable          |
|-----------------|--------------------|------------------|--------------------|------------------------|
| entry           | <slice>            | <GPR id>         | <slice>            | unchanged              |
| exit: cordon    | unchanged          | unchanged        | unchanged          | true (noted if we did) |
| exit: return    | free               | removed          | free               | false if we cordoned   |

A node that failed its exit checks is *quarantined*: cordoned (noted if we did) and labelled
``egs.io/quarantined=true``; *clearing* it removes the label and uncordons it if quarantine did.
"""

from __future__ import annotations

from collections.abc import Mapping

from .nodes import FREE, GPR_LABEL, SLICE_LABEL

TAINT_EFFECT = "NoSchedule"
# When exit began (ISO 8601), and whether exit cordoned the node (so only then does it uncordon).
EXIT_STARTED = "egs.io/exit-started"
EXIT_CORDONED = "egs.io/exit-cordoned"


def slice_taint(slice_name: str) -> dict:
    return {"key": SLICE_LABEL, "value": slice_name, "effect": TAINT_EFFECT}


def _taints_with(obj: Mapping, slice_name: str) -> list[dict]:
    """The node's taints with the slice taint set to ``slice_name`` (other taints kept, in order)."""
    others = [t for t in (obj.get("spec") or {}).get("taints") or [] if t.get("key") != SLICE_LABEL]
    return [*others, slice_taint(slice_name)]


def entry_patch(obj: Mapping, slice_name: str, gpr_id: int) -> dict:
    return {
        "metadata": {"labels": {SLICE_LABEL: slice_name, GPR_LABEL: str(gpr_id)}},
        "spec": {"taints": _taints_with(obj, slice_name)},
    }


def cordon_patch(obj: Mapping, started: str) -> dict:
    """Cordon for exit and note when exit began; a node cordoned already stays cordoned after exit."""
    already = bool((obj.get("spec") or {}).get("unschedulable"))
    annotations = {EXIT_STARTED: started, EXIT_CORDONED: "false" if already else "true"}
    return {"metadata": {"annotations": annotations}, "spec": {"unschedulable": True}}


def return_patch(obj: Mapping) -> dict:
    """Back to the free pool: labels and taint ``free``, no GPR, uncordoned if exit cordoned it."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    spec: dict = {"taints": _taints_with(obj, FREE)}
    if annotations.get(EXIT_CORDONED) == "true":
        spec["unschedulable"] = False
    return {
        "metadata": {
            "labels": {SLICE_LABEL: FREE, GPR_LABEL: None},
            "annotations": {EXIT_STARTED: None, EXIT_CORDONED: None},
        },
        "spec": spec,
    }


QUARANTINED = "egs.io/quarantined"
QUARANTINE_REASON = "egs.io/quarantine-reason"
QUARANTINE_CORDONED = "egs.io/quarantine-cordoned"


def quarantine_patch(obj: Mapping, reason: str) -> dict:
    """Cordon and label the node quarantined, noting why and whether it was cordoned already."""
    metadata = obj.get("metadata") or {}
    if ((metadata.get("labels") or {}).get(QUARANTINED)) == "true":
        cordoned = (metadata.get("annotations") or {}).get(QUARANTINE_CORDONED, "false")
    else:
        cordoned = "false" if (obj.get("spec") or {}).get("unschedulable") else "true"
    return {
        "metadata": {
            "labels": {QUARANTINED: "true"},
            "annotations": {QUARANTINE_REASON: reason[:1000], QUARANTINE_CORDONED: cordoned},
        },
        "spec": {"unschedulable": True},
    }


def clear_patch(obj: Mapping) -> dict:
    """Out of quarantine: label and notes removed, uncordoned if quarantine cordoned it."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    patch: dict = {
        "metadata": {
            "labels": {QUARANTINED: None},
            "annotations": {QUARANTINE_REASON: None, QUARANTINE_CORDONED: None},
        }
    }
    if annotations.get(QUARANTINE_CORDONED) == "true":
        patch["spec"] = {"unschedulable": False}
    return patch


def eviction(name: str, namespace: str) -> dict:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
