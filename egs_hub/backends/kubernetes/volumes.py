"""Members' home volumes: the PersistentVolumeClaims SliceKubeSpawner makes in a slice's namespaces.

KubeSpawner labels a user's storage ``component=singleuser-storage`` and annotates it with
``hub.jupyter.org/username`` (and ``hub.jupyter.org/servername`` for a named server's);
SliceKubeSpawner adds ``egs.io/slice=<slice>`` (spawners/kube.py). A volume's *size* is what
the cluster provisioned (``status.capacity.storage``) once it is bound, else what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubernetes_asyncio import client

from .api import json_of
from .nodes import SLICE_LABEL

STORAGE_COMPONENT = "singleuser-storage"
USER_ANNOTATION = "hub.jupyter.org/username"
SERVER_ANNOTATION = "hub.jupyter.org/servername"


@dataclass(frozen=True)
class HomeVolume:
    user: str
    server: str
    namespace: str
    name: str
    size: str | None
    storage_class: str | None
    phase: str | None  # Pending, Bound, Lost


def selector(slice_name: str) -> str:
    return f"component={STORAGE_COMPONENT},{SLICE_LABEL}={slice_name}"


def home_volume(pvc: Mapping) -> HomeVolume:
    metadata, spec, status = pvc.get("metadata") or {}, pvc.get("spec") or {}, pvc.get("status") or {}
    annotations = metadata.get("annotations") or {}
    asked = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    return HomeVolume(
        user=annotations.get(USER_ANNOTATION, ""),
        server=annotations.get(SERVER_ANNOTATION, ""),
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        size=(status.get("capacity") or {}).get("storage") or asked,
        storage_class=spec.get("storageClassName"),
        phase=status.get("phase"),
    )


async def list_home_volumes(
    core: client.CoreV1Api, slice_name: str, namespaces: Sequence[str], request_timeout: float
) -> list[HomeVolume]:
    """The slice's home volumes in ``namespaces``, by namespace, user and name."""
    found = []
    for namespace in namespaces:
        listed = await json_of(
            await core.list_namespaced_persistent_volume_claim(
                namespace, label_selector=selector(slice_name), _preload_content=False, _request_timeout=request_timeout
            )
        )
        found += [home_volume(item) for item in listed.get("items") or []]
    return sorted(found, key=lambda v: (v.namespace, v.user, v.name))
