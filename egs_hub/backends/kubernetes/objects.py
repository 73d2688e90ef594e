"""Patches and request bodies the Kubernetes backend sends; plain functions that return new objects.

Vocabulary: *entry* moves a free node into a GPR's slice, *exit* moves it back;
the slice taint is ``egs.io/slice=<slice>:NoSchedule`` (``free`` in the pool).
Node patches are strategic merge patches (what kubernetes_asyncio sends for a
dict): labels merge key by key and null deletes one, while ``spec.taints``
declares no patch strategy and is replaced whole, so the taint patches carry
the node's other taints along, and are sent with the resourceVersion of the node
they were made from (node_writes.py), made again on a 409.

| what            | label egs.io/slice | label egs.io/gpr | taint egs.io/slice | unschedulable          |
|-----------------|--------------------|------------------|--------------------|------------------------|
| entry           | <slice>            | <GPR id>         | <slice>            | unchanged              |
| exit: cordon    | unchanged          | unchanged        | unchanged          | true (noted if we did) |
| exit: return    | free               | removed          | free               | false if we cordoned   |

A node that failed its exit checks is *quarantined*: cordoned (noted if we did) and labelled
``egs.io/quarantined=true``; *clearing* it removes the label and uncordons it if quarantine did.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .nodes import FREE, GPR_LABEL, GPU_RESOURCE, SLICE_LABEL

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


# A check's Job (checks.py): one run of a nccl or custom check on one node, in the checks namespace.
#
# | Job field                      | from                                                             |
# |--------------------------------|------------------------------------------------------------------|
# | metadata.name                  | egs-<check>-<node>-<suffix> (check_job_name), unique per run     |
# | labels                         | egs.io/check, egs.io/node, egs.io/gpr (for a GPR), managed-by    |
# | backoffLimit                   | 0: a check runs once, its failure is the verdict                 |
# | activeDeadlineSeconds          | the check's timeout                                              |
# | ttlSecondsAfterFinished        | CHECK_JOB_TTL: gone even when the backend could not delete it    |
# | node affinity                  | matchFields metadata.name In [node]: that node, no other         |
# | tolerations                    | egs.io/slice (any slice or free) and node.kubernetes.io/         |
# |                                | unschedulable: a cordoned or quarantined node is checked too      |
# | container image, command       | the check's image; its command (or the kind's default)           |
# | limits nvidia.com/gpu          | the number of GPUs checked                                       |
# | env                            | EGS_NODE, EGS_CLUSTER, EGS_PHASE, EGS_GPUS, EGS_GPR (for a GPR)  |

CHECK_LABEL = "egs.io/check"
NODE_LABEL = "egs.io/node"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
CHECK_CONTAINER = "check"
CHECK_JOB_TTL = 600  # seconds a finished check's Job is kept when the backend could not delete it
_NAME_MAX = 63  # a Job's name is its pods' job-name label value: a DNS-1123 label


def _dns_label(text: str) -> str:
    """``text`` lowercased, with every run of characters a DNS-1123 label cannot hold as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def check_job_name(check: str, node: str, suffix: str) -> str:
    """``egs-<check>-<node>-<suffix>`` as a DNS-1123 label of at most 63 characters (the node's part cut
    to fit); ``suffix`` (lowercase letters and digits) tells runs apart."""
    stem = _dns_label(f"egs-{check}-{node}")[: _NAME_MAX - len(suffix) - 1].rstrip("-")
    return f"{stem}-{suffix}"


def label_value(text: str) -> str:
    """``text`` as a label value: at most 63 characters, beginning and ending with a letter or digit."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:_NAME_MAX].strip("-._")


def check_job_labels(check: str, node: str, gpr_id: int | None) -> dict[str, str]:
    labels = {CHECK_LABEL: check, NODE_LABEL: label_value(node), "app.kubernetes.io/managed-by": "egs-hub"}
    if gpr_id is not None:
        labels[GPR_LABEL] = str(gpr_id)
    return labels


def check_job(
    name: str,
    namespace: str,
    *,
    check: str,
    node: str,
    image: str,
    command: Sequence[str],
    gpus: int,
    env: Mapping[str, str],
    timeout_s: int,
    gpr_id: int | None = None,
) -> dict:
    """The batch/v1 Job that runs ``command`` in ``image`` once on ``node`` with ``gpus`` GPUs (table above)."""
    labels = check_job_labels(check, node, gpr_id)
    on_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    container = {
        "name": CHECK_CONTAINER,
        "image": image,
        "command": list(command),
        "env": [{"name": key, "value": value} for key, value in env.items()],
        "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
    }
    pod_spec = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # a check has no business with the API
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [on_node]}}
        },
        "tolerations": [
            {"key": SLICE_LABEL, "operator": "Exists"},
            {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": TAINT_EFFECT},
        ],
        "containers": [container],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": max(1, timeout_s),
            "ttlSecondsAfterFinished": CHECK_JOB_TTL,
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def own_namespace(name: str) -> dict:
    """A namespace of egs-hub's own objects (check Jobs, pool requests); no egs.io/slice label: it is no slice's."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "egs-hub"}},
    }
