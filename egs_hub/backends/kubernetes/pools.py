"""Dynamic node pools on Kubernetes, through the Cluster Autoscaler's ProvisioningRequest API.

Vocabulary: a pool's nodes carry the label ``egs.io/pool=<pool>`` (and ``egs.io/slice=free`` with its
taint, as every managed node), put there by the node group the cluster autoscaler scales. To grow a pool
by N nodes the backend makes, in the *pools namespace* (created when missing, no slice's), a PodTemplate
asking for one whole node of the pool (its GPUs as ``nvidia.com/gpu``, the pool's node selector, the
slice taint tolerated) and a ``ProvisioningRequest`` (``autoscaling.x-k8s.io/v1``) for N such pods in
the pool's provisioning class: ``best-effort-atomic-scale-up`` adds all N nodes or none,
``check-capacity`` only books capacity the cluster has. Both are labelled with the pool. The request's
conditions say what became of it (``request_state``); the service deletes it once its nodes joined or
it failed.

Scale-down is egs-hub's decision: a pool node carries the autoscaler's
``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` while egs-hub keeps it (``keep_patch``);
to give it back the backend cordons it, labels it ``egs.io/pool-released`` and removes that annotation
(``give_back_patch``), and the autoscaler removes the empty node.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from ...core.node_pools import POOL_LABEL, NodePool
from .nodes import FREE, GPU_RESOURCE, SLICE_LABEL
from .objects import TAINT_EFFECT

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
RELEASED_LABEL = "egs.io/pool-released"
MANAGED_BY = {"app.kubernetes.io/managed-by": "egs-hub"}
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class PoolRequest:
    """A ProvisioningRequest of a pool: ``state`` pending, provisioned, failed or expired (its booking
    expired or its capacity was revoked), with the condition's message."""

    name: str
    nodes: int
    created: str
    state: str
    message: str = ""


def request_name(pool: str) -> str:
    return f"egs-{pool}-{secrets.token_hex(3)}"


def pod_template(pool: NodePool, name: str, namespace: str) -> dict:
    """One whole node of the pool, as the pods of the request."""
    gpus = str(pool.shape.gpus_per_node)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": {POOL_LABEL: pool.name, **MANAGED_BY}},
        "template": {
            "metadata": {"labels": {POOL_LABEL: pool.name}},
            "spec": {
                "nodeSelector": {POOL_LABEL: pool.name},
                "tolerations": [{"key": SLICE_LABEL, "operator": "Equal", "value": FREE, "effect": TAINT_EFFECT}],
                "containers": [
                    {
                        "name": "capacity",
                        "image": PAUSE_IMAGE,
                        "resources": {"requests": {GPU_RESOURCE: gpus}, "limits": {GPU_RESOURCE: gpus}},
                    }
                ],
            },
        },
    }


def provisioning_request(pool: NodePool, name: str, namespace: str, nodes: int) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": namespace, "labels": {POOL_LABEL: pool.name, **MANAGED_BY}},
        "spec": {
            "provisioningClassName": pool.provisioning_class,
            "podSets": [{"count": nodes, "podTemplateRef": {"name": name}}],
        },
    }


def request_state(obj: Mapping) -> PoolRequest:
    """What became of a ProvisioningRequest, from its conditions (the autoscaler sets them)."""
    metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}

    def true(kind: str) -> bool:
        return (conditions.get(kind) or {}).get("status") == "True"

    state, message = "pending", ""
    for kind, named in (("Failed", "failed"), ("CapacityRevoked", "expired"), ("BookingExpired", "expired")):
        if true(kind):
            state, message = named, (conditions[kind].get("message") or conditions[kind].get("reason") or kind)
            break
    else:
        if true("Provisioned"):
            state = "provisioned"
    nodes = sum(int(s.get("count") or 0) for s in spec.get("podSets") or [])
    return PoolRequest(metadata.get("name", ""), nodes, metadata.get("creationTimestamp", ""), state, message)


def keep_patch() -> dict:
    return {"metadata": {"annotations": {SCALE_DOWN_DISABLED: "true"}}}


def give_back_patch() -> dict:
    return {
        "metadata": {"labels": {RELEASED_LABEL: "true"}, "annotations": {SCALE_DOWN_DISABLED: None}},
        "spec": {"unschedulable": True},
    }
