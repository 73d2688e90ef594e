"""What names the DCGM exporter's series now (core/gpu_names.py): the Kubernetes clusters' GPUs
with the workspaces holding them and the workspaces' namespaces, read from the store at each
metrics pass (one query each), and this host's MIG instances as NVML found them."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..backends.kubernetes import KubernetesBackend
from ..core.gpu_names import KubeGPU, Naming
from ..store import queries
from ..store.models import Slice, SliceNamespace


def naming(session: Session, instances: Mapping[tuple[str, int], str]) -> Naming:
    holders = queries.gpu_holders(session)
    kube_gpus = [
        KubeGPU(
            id=gpu.uuid,
            cluster=cluster.name,
            node=node.name,
            index=gpu.index,
            profile=gpu.mig_profile,
            holder=holders[gpu.uuid][0] if gpu.uuid in holders else None,
            share=gpu.parent_uuid is not None and gpu.mig_profile is None,
        )
        for cluster, node, gpu in queries.present_gpus(session)
        if cluster.kind == KubernetesBackend.kind  # GPUs without UUIDs
    ]
    if not kube_gpus:
        return Naming(instances=dict(instances))
    query = select(SliceNamespace.cluster, SliceNamespace.namespace, Slice.name).join(Slice)
    namespaces = {(cluster, namespace): name for cluster, namespace, name in session.execute(query)}
    return Naming(instances=dict(instances), kube_gpus=kube_gpus, namespaces=namespaces)
