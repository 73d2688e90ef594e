"""Records as the API writes them: times ISO-8601 UTC, durations in seconds."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..core.model import GPR, Shape
from ..core.samples import GpuSample
from ..core.snapshot import Estimate, Eviction, Option
from ..core.units import format_time
from ..store import queries
from ..store.models import AlertRow, Cluster, EventRow, Slice

if TYPE_CHECKING:
    from .clusters import ClusterState


def _seconds(value: timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


def gpr_json(gpr: GPR, estimate: Estimate | None, *, redact: bool = False) -> dict:
    """A GPR; ``redact`` hides who asked and what they named it (others' slices).

    A queued GPR's plan: ``planned_nodes`` and ``planned_gpu_count`` always, ``planned_gpus``
    (exact UUIDs) only when it is admitted now; which GPUs of its nodes a later start gets
    is decided when its window starts.
    """
    spec = gpr.spec
    queued = estimate is not None
    placement = estimate.placement if queued else None
    return {
        "id": gpr.id,
        "name": None if redact else spec.name,
        "slice": spec.slice,
        "requested_by": None if redact else gpr.requested_by,
        "cluster": spec.cluster,
        "shape": spec.shape,
        "gpus": spec.gpus,
        "nodes": spec.nodes,
        "priority": spec.priority,
        "duration": _seconds(spec.duration),
        "start_after": format_time(spec.start_after),
        "idle_timeout": _seconds(spec.idle_timeout),
        "preemptible": spec.preemptible,
        "status": gpr.status.value,
        "status_reason": gpr.status_reason,
        "estimated_start": format_time(estimate.start) if queued else None,
        "queue_position": estimate.position if queued else None,
        "planned_gpus": list(placement.gpus) if placement else [],
        "planned_nodes": list(placement.nodes) if placement else [],
        "planned_gpu_count": placement.count if placement else None,
        "window_start": format_time(gpr.window_start),
        "window_end": format_time(gpr.window_end),
        "bound_gpus": list(gpr.bound_gpus),
        "bound_nodes": list(gpr.bound_nodes),
        "avoid_nodes": [{"cluster": cluster, "node": node} for cluster, node in gpr.avoid_nodes],
        "end_reason": gpr.end_reason.value if gpr.end_reason else None,
        "created_at": format_time(gpr.created_at),
        "updated_at": format_time(gpr.updated_at),
        "ended_at": format_time(gpr.ended_at),
    }


def slice_json(row: Slice, members: list[str], gpus: list[str], usage: dict) -> dict:
    """A slice; ``usage``: its ``gpu_hours_week``, ``decayed_gpu_hours`` and ``fair_share_factor``."""
    namespaces = {cluster: list(names) for cluster, names in queries.slice_namespaces(row).items()}
    return {
        "name": row.name,
        "display_name": row.display_name,
        "group": row.group_name,
        "members": members,
        "quota": {"max_gpus": row.max_gpus, "max_gpu_hours": row.max_gpu_hours},
        "policy": {
            "max_duration": row.max_duration_s,
            "max_priority": row.max_priority,
            "auto_approve_max_gpus": row.auto_approve_max_gpus,
            "max_active_gprs": row.max_active_gprs,
            "restart_servers": row.restart_servers,
            "reject_over_limits": row.reject_over_limits,
            "eviction": row.eviction,
            "requeue_evicted": row.requeue_evicted,
            "share": row.share,
            "idle_timeout": row.idle_timeout_s,
            "max_idle_timeout": row.max_idle_timeout_s,
            "bind_failure": row.bind_failure,
        },
        "usage": usage,
        "namespaces": namespaces,
        "gpus": gpus,
        "created_at": format_time(row.created_at),
        "updated_at": format_time(row.updated_at),
    }


def event_json(row: EventRow) -> dict:
    return {
        "id": row.id,
        "time": format_time(row.time),
        "kind": row.kind,
        "actor": row.actor,
        "reason": row.reason,
        "gpr": row.gpr_id,
        "slice": row.slice,
        "from_status": row.from_status,
        "to_status": row.to_status,
        "data": row.data or {},
    }


def shape_json(shape: Shape) -> dict:
    return {
        "name": shape.name,
        "model": shape.model,
        "memory_gb": shape.memory_gb,
        "gpus_per_node": shape.gpus_per_node,
    }


def option_json(option: Option) -> dict:
    return {
        "cluster": option.cluster,
        "shape": shape_json(option.shape),
        "estimated_start": format_time(option.start),
        "wait_seconds": int(option.wait.total_seconds()),
        "nodes": list(option.placement.nodes),
        "gpus": option.placement.count,
    }


def eviction_json(eviction: Eviction, victims: list[GPR]) -> dict:
    """A proposed (or issued) eviction: the GPR it lets start and what its victims hold."""
    return {
        "gpr_id": eviction.gpr_id,
        "victims": [
            {
                "id": v.id,
                "slice": v.spec.slice,
                "priority": v.spec.priority,
                "gpus": len(v.bound_gpus),
                "window_end": format_time(v.window_end),
                "status": v.status.value,
            }
            for v in victims
        ],
        "automatic": eviction.automatic,
    }


def inventory_json(
    clusters: list[Cluster], bound: dict[str, tuple[str, int]], live: Mapping[str, ClusterState]
) -> dict:
    """The ``live`` clusters (those the service drives) with nodes and GPUs; ``bound`` maps a GPU to
    (slice, GPR) now. A whole node with any GPU bound has none free (it is one GPR's)."""
    shapes: dict[tuple[str, str], dict] = {}
    out_clusters, total, free = [], 0, 0
    for cluster in clusters:
        state = live.get(cluster.name)
        if state is None:
            continue
        nodes = []
        for node in cluster.nodes:
            if not node.present:
                continue
            shape = Shape(node.gpu_model, node.gpu_memory_gb, node.gpus_per_node)
            entry = shapes.setdefault(
                (cluster.name, shape.name),
                {"cluster": cluster.name, **shape_json(shape), "gpus": 0, "free": 0},
            )
            taken = node.whole and any(gpu.present and gpu.uuid in bound for gpu in node.gpus)
            gpus = []
            for gpu in node.gpus:
                if not gpu.present:
                    continue
                slice_name, gpr_id = bound.get(gpu.uuid, (None, None))
                usable = gpu.healthy and node.schedulable and slice_name is None and not taken
                entry["gpus"] += 1
                entry["free"] += usable
                total += 1
                free += usable
                gpus.append(
                    {
                        "uuid": gpu.uuid,
                        "index": gpu.index,
                        "product": gpu.product,
                        "memory_mib": gpu.memory_mib,
                        "declared": gpu.declared,
                        "healthy": gpu.healthy,
                        "slice": slice_name,
                        "gpr": gpr_id,
                    }
                )
            nodes.append(
                {
                    "name": node.name,
                    "shape": shape.name,
                    "schedulable": node.schedulable,
                    "declared": node.declared,
                    "whole": node.whole,
                    "gpus": gpus,
                }
            )
        out_clusters.append(
            {
                "name": cluster.name,
                "kind": cluster.kind,
                "source": state.source,
                "health": state.health,
                "message": state.error,
                "nodes": nodes,
            }
        )
    return {
        "clusters": out_clusters,
        "shapes": sorted(shapes.values(), key=lambda s: (s["cluster"], s["name"])),
        "gpus": total,
        "free": free,
    }


def cluster_json(state: ClusterState, row: Cluster | None) -> dict:
    """A cluster the service drives; ``row`` is its stored inventory (None before its first refresh)."""
    nodes = [n for n in row.nodes if n.present] if row is not None else []
    return {
        "name": state.name,
        "kind": state.backend.kind,
        "origin": state.origin,
        "where": state.where,
        "health": state.health,
        "message": state.error,
        "source": state.source,
        "nodes": len(nodes),
        "gpus": sum(1 for n in nodes for g in n.gpus if g.present),
        "node_selector": state.spec.node_selector if state.spec else None,
        "exit_grace": _seconds(state.spec.exit_grace) if state.spec else None,
    }


def window_json(
    gpr_id: int,
    slice_name: str,
    gpus: list[str],
    start: datetime,
    end: datetime,
    state: str,
    status: str,
    gpu_count: int | None = None,
) -> dict:
    """One GPR's window on one node; a planned window later than now names no GPUs, only
    how many (``gpu_count``)."""
    return {
        "gpr": gpr_id,
        "slice": slice_name,
        "gpus": gpus,
        "gpu_count": len(gpus) if gpu_count is None else gpu_count,
        "start": format_time(start),
        "end": format_time(end),
        "state": state,
        "status": status,
    }


def sample_json(sample: GpuSample | None) -> dict | None:
    """A GPU's readings: percent, MiB, °C, W, MHz; None where the source gives none."""
    if sample is None:
        return None
    return {
        "time": format_time(sample.time),
        "utilization": sample.utilization,
        "memory_utilization": sample.memory_utilization,
        "memory_used_mib": sample.memory_used_mib,
        "memory_total_mib": sample.memory_total_mib,
        "temperature_c": sample.temperature_c,
        "power_w": sample.power_w,
        "power_limit_w": sample.power_limit_w,
        "sm_clock_mhz": sample.sm_clock_mhz,
        "throttle_reasons": list(sample.throttle_reasons),
        "ecc_errors": sample.ecc_errors,
        "xid": sample.xid,
        "processes": None
        if sample.processes is None
        else [{"pid": p.pid, "used_mib": p.used_mib, "user": p.user, "server": p.server} for p in sample.processes],
        "pod": sample.pod,
        "namespace": sample.namespace,
    }


def alert_json(row: AlertRow) -> dict:
    return {
        "id": row.id,
        "kind": row.kind,
        "gpu": row.gpu_uuid,
        "node": row.node,
        "cluster": row.cluster,
        "slice": row.slice,
        "gpr": row.gpr_id,
        "message": row.message,
        "value": row.value,
        "threshold": row.threshold,
        "raised_at": format_time(row.raised_at),
        "cleared_at": format_time(row.cleared_at),
        "active": row.cleared_at is None,
    }
