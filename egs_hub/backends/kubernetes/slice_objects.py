"""A slice on a cluster as Kubernetes objects; pure functions from names, templates and a GPU count.

Vocabulary: the slice's *namespaces* on a cluster are labelled
``egs.io/slice=<slice>``; one egs-hub *created* carries the annotation
``egs.io/created-by=egs-hub`` (and is deleted with the slice), one that existed
before was *adopted* (and is only *released*: unlabelled, emptied of what
egs-hub put in it). The slice's *home* namespace is its first: it holds the
slice's *ServiceAccount* ``egs-<slice>``. Every namespace holds, per role
template, a Role and a RoleBinding ``egs-<template>`` (roles.py), and the
ResourceQuota ``egs-gpus`` capping ``requests.nvidia.com/gpu`` at the GPUs the
slice holds on the cluster (and ``requests.nvidia.com/mig-<profile>`` or
``requests.nvidia.com/gpu.shared`` at the MIG instances or shares it holds,
shares.py). These *managed objects* carry the labels ``egs.io/slice=<slice>``
and ``app.kubernetes.io/managed-by=egs-hub``, by which egs-hub finds (and prunes) them.

Before them, each namespace holds the RoleBinding ``egs:<cluster role>`` of
each *namespace grant* (roles.py), managed the same way: it is made first (the
rights it grants are the ones the rest is written with) and deleted last,
the first grant (the service's own) after the others.

The quota is per namespace, so a slice with several namespaces may request up
to that many GPUs in each; the node selector and taint (webhook.py, objects.py)
keep its pods on the nodes it holds all the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .nodes import SLICE_LABEL
from .roles import RBAC_GROUP, NamespaceGrant, RoleTemplate, render_subject

CREATED_BY = "egs.io/created-by"
MANAGED_BY = "app.kubernetes.io/managed-by"
EGS_HUB = "egs-hub"
QUOTA_NAME = "egs-gpus"
# The kinds of managed objects, in the order they are applied (a RoleBinding names its Role).
MANAGED_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ResourceQuota")
API_VERSIONS = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "ResourceQuota": "v1",
    "Role": f"{RBAC_GROUP}/v1",
    "RoleBinding": f"{RBAC_GROUP}/v1",
}


class SliceConflict(Exception):
    """The slice cannot be set up on the cluster as asked; the message names each namespace and why."""


def managed_selector(slice_name: str) -> str:
    return f"{SLICE_LABEL}={slice_name},{MANAGED_BY}={EGS_HUB}"


def service_account_name(slice_name: str) -> str:
    return f"egs-{slice_name}"


def home_namespace(namespaces: Sequence[str]) -> str:
    if not namespaces:
        raise ValueError("a slice on a cluster needs at least one namespace")
    return namespaces[0]


def _metadata(slice_name: str, name: str, namespace: str | None = None) -> dict:
    meta = {"name": name, "labels": {SLICE_LABEL: slice_name, MANAGED_BY: EGS_HUB}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _object(kind: str, metadata: dict, **fields) -> dict:
    return {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": metadata, **fields}


# Namespaces


def new_namespace(slice_name: str, name: str) -> dict:
    """A namespace egs-hub creates for the slice."""
    meta = {"name": name, "labels": {SLICE_LABEL: slice_name}, "annotations": {CREATED_BY: EGS_HUB}}
    return _object("Namespace", meta)


def adopt_patch(slice_name: str) -> dict:
    return {"metadata": {"labels": {SLICE_LABEL: slice_name}}}


def release_patch() -> dict:
    """Give an adopted namespace back: no slice label (a merge patch's null deletes it)."""
    return {"metadata": {"labels": {SLICE_LABEL: None}}}


def created_by_egs_hub(namespace: Mapping) -> bool:
    return ((namespace.get("metadata") or {}).get("annotations") or {}).get(CREATED_BY) == EGS_HUB


@dataclass(frozen=True)
class NamespacePlan:
    """What to do with each namespace: ``create`` and ``adopt`` the wanted ones missing from the slice, ``keep``
    those in it already; ``release`` (adopted) and ``delete`` (created) those labelled for it no longer wanted;
    ``conflicts`` says why a wanted namespace cannot be used (nothing is done while there are any)."""

    create: tuple[str, ...] = ()
    adopt: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    release: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


def plan_namespaces(slice_name: str, wanted: Sequence[str], existing: Mapping[str, Mapping]) -> NamespacePlan:
    """Decide per namespace; ``existing`` has the namespace objects found: the wanted ones that exist and every
    one labelled ``egs.io/slice=<slice>``. Removing the slice is the plan with nothing wanted."""
    create, adopt, keep, conflicts = [], [], [], []
    for name in wanted:
        obj = existing.get(name)
        if obj is None:
            create.append(name)
            continue
        meta = obj.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(SLICE_LABEL)
        if meta.get("deletionTimestamp"):
            conflicts.append(f"namespace {name} is being deleted; try again once it is gone")
        elif owner not in (None, slice_name):
            conflicts.append(f"namespace {name} belongs to slice {owner}")
        elif owner == slice_name:
            keep.append(name)
        else:
            adopt.append(name)
    release, delete = [], []
    for name, obj in sorted(existing.items()):
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if name in wanted or labels.get(SLICE_LABEL) != slice_name:
            continue
        (delete if created_by_egs_hub(obj) else release).append(name)
    return NamespacePlan(*map(tuple, (create, adopt, keep, release, delete, conflicts)))


# Managed objects in the namespaces


def service_account(slice_name: str, namespace: str) -> dict:
    return _object("ServiceAccount", _metadata(slice_name, service_account_name(slice_name), namespace))


def role(slice_name: str, namespace: str, template: RoleTemplate) -> dict:
    rules = [dict(rule) for rule in template.rules]
    return _object("Role", _metadata(slice_name, f"egs-{template.name}", namespace), rules=rules)


def role_binding(slice_name: str, namespace: str, template: RoleTemplate, home: str) -> dict:
    values = {
        "slice": slice_name,
        "service_account": service_account_name(slice_name),
        "service_account_namespace": home,
    }
    return _object(
        "RoleBinding",
        _metadata(slice_name, f"egs-{template.name}", namespace),
        roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": f"egs-{template.name}"},
        subjects=[render_subject(s, values) for s in template.subjects],
    )


def grant_binding(slice_name: str, namespace: str, grant: NamespaceGrant) -> dict:
    """The RoleBinding of the grant's ClusterRole to its ServiceAccount in the namespace."""
    return _object(
        "RoleBinding",
        _metadata(slice_name, f"egs:{grant.cluster_role}", namespace),
        roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": grant.cluster_role},
        subjects=[{"kind": "ServiceAccount", "name": grant.service_account, "namespace": grant.namespace}],
    )


def grant_bindings(slice_name: str, namespaces: Sequence[str], grants: Sequence[NamespaceGrant]) -> list[dict]:
    """The grants' RoleBindings in the order they are made: per namespace, the first grant (the service's own)
    first."""
    return [grant_binding(slice_name, ns, g) for ns in namespaces for g in grants]


def deletion_order(found: Sequence[Mapping], grants: Sequence[NamespaceGrant]) -> list[Mapping]:
    """The objects found in a namespace in the order to delete them: what the grants allow before the grants,
    and the grants last to first, so the service's own goes last."""
    rank = {f"egs:{g.cluster_role}": i for i, g in enumerate(grants)}

    def order(obj: Mapping) -> int:
        name = obj["metadata"]["name"]
        return -1 - rank[name] if obj["kind"] == "RoleBinding" and name in rank else -len(rank) - 1

    return sorted(found, key=order)


def gpu_quota(slice_name: str, namespace: str, quota: Mapping[str, int]) -> dict:
    """The ResourceQuota capping requests of each resource at its count in ``quota``."""
    negative = {r: n for r, n in quota.items() if n < 0}
    if negative:
        raise ValueError(f"a slice's GPU quota cannot be negative ({negative})")
    hard = {f"requests.{resource}": str(count) for resource, count in sorted(quota.items())}
    return _object("ResourceQuota", _metadata(slice_name, QUOTA_NAME, namespace), spec={"hard": hard})


def managed_objects(
    slice_name: str, namespaces: Sequence[str], templates: Mapping[str, RoleTemplate], quota: Mapping[str, int]
) -> list[dict]:
    """Every managed object of the slice on the cluster, in MANAGED_KINDS order, then by namespace and name.

    No GPU quota while the slice holds no GPUs there: a quota of 0 would make the API server refuse
    GPU pods, where without one they are admitted and stay Pending (the node selector and taint
    keep them off every node) until the slice holds GPUs."""
    home = home_namespace(namespaces)
    objects = [service_account(slice_name, home)]
    ordered = [templates[name] for name in sorted(templates)]
    objects += [role(slice_name, ns, t) for ns in namespaces for t in ordered]
    objects += [role_binding(slice_name, ns, t, home) for ns in namespaces for t in ordered]
    objects += [gpu_quota(slice_name, ns, quota) for ns in namespaces] if quota else []
    return objects


def differs(desired: Mapping, current: Mapping) -> bool:
    """Whether ``current`` lacks what ``desired`` sets: its labels, and every field but metadata and status
    (``spec``, ``rules``, ``roleRef``, ``subjects``) exactly."""
    want_labels = desired["metadata"].get("labels") or {}
    have_labels = (current.get("metadata") or {}).get("labels") or {}
    if any(have_labels.get(k) != v for k, v in want_labels.items()):
        return True
    content = set(desired) - {"apiVersion", "kind", "metadata", "status"}
    return any(current.get(key) != desired[key] for key in content)


def stale(desired: Sequence[Mapping], found: Sequence[Mapping]) -> list[Mapping]:
    """The managed objects found that are not desired (a template or namespace dropped, a new home namespace)."""
    keys = {(d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]) for d in desired}
    return [f for f in found if (f["kind"], f["metadata"]["namespace"], f["metadata"]["name"]) not in keys]
