"""The API's answers (core/resources.py) built from core's records and the store's rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..core import cost, layouts
from ..core import resources as api
from ..core.model import DEFAULT_PROJECT, GPR, Shape
from ..core.requests import CheckSpec
from ..core.samples import GpuSample
from ..core.snapshot import Estimate, Eviction, Option
from ..core.templates import GPRTemplate
from ..store import queries
from ..store.models import (
    AlertRow,
    CheckRun,
    Cluster,
    EventRow,
    LayoutChangeRow,
    MaintenanceWindow,
    Node,
    NodePoolRow,
    Project,
    Slice,
    WorkspaceRequestRow,
)

if TYPE_CHECKING:
    from .clusters import ClusterState
    from .visibility import Viewer


def gpr_resource(
    gpr: GPR,
    estimate: Estimate | None,
    now: datetime,
    *,
    redact: bool = False,
    model: type[api.GPR] = api.GPR,
    **more: Any,
) -> api.GPR:
    """A GPR (or a ``model`` that adds ``more`` to it) at ``now`` (its used cost so far); ``redact`` shows
    another workspace's (visibility.py): how it asks and where it waits, without its id, names, slice,
    template, reasons or node history (``model`` must allow a null id and slice: QueuedGPR).

    A queued GPR's plan: ``planned_nodes`` and ``planned_gpu_count`` always, ``planned_gpus``
    (exact UUIDs) only when it is admitted now; which GPUs of its nodes a later start gets
    is decided when its window starts.
    """
    spec = gpr.spec
    queued = estimate is not None
    placement = estimate.placement if queued else None
    return model(
        id=None if redact else gpr.id,
        name=None if redact else spec.name,
        slice=None if redact else spec.slice,
        requested_by=None if redact else gpr.requested_by,
        cluster=spec.cluster,
        shape=spec.shape,
        gpus=spec.gpus,
        nodes=spec.nodes,
        priority=spec.priority,
        duration=spec.duration,
        start_after=spec.start_after,
        idle_timeout=spec.idle_timeout,
        preemptible=spec.preemptible,
        template=None if redact else spec.template,
        gpu_share=spec.gpu_share,
        status=gpr.status.value,
        status_reason="" if redact else gpr.status_reason,
        estimated_start=estimate.start if queued else None,
        queue_position=estimate.position if queued else None,
        planned_gpus=placement.gpus if placement else (),
        planned_nodes=placement.nodes if placement else (),
        planned_gpu_count=placement.count if placement else None,
        window_start=gpr.window_start,
        window_end=gpr.window_end,
        bound_gpus=gpr.bound_gpus,
        bound_nodes=gpr.bound_nodes,
        avoid_nodes=[] if redact else [api.NodeRef(cluster=cluster, node=node) for cluster, node in gpr.avoid_nodes],
        replaced=[]
        if redact
        else [api.NodeReplacement(failed_node=r.failed_node, node=r.node, at=r.at) for r in gpr.replaced],
        end_reason=gpr.end_reason.value if gpr.end_reason else None,
        created_at=gpr.created_at,
        updated_at=gpr.updated_at,
        ended_at=gpr.ended_at,
        price_per_gpu_hour=gpr.price_per_gpu_hour,
        cost_per_hour=cost.cost_per_hour(gpr.price_per_gpu_hour, len(gpr.bound_gpus)) if gpr.bound_gpus else None,
        reserved_cost=cost.reserved_cost(gpr),
        used_cost=cost.used_cost(gpr, now),
        **more,
    )


def slice_resource(row: Slice, members: list[str], gpus: list[str], usage: dict) -> api.Slice:
    """A slice; ``usage``: its ``gpu_hours_week``, ``decayed_gpu_hours`` and ``fair_share_factor``.
    Its quota and policy are the store's (queries.slice_policy), split as the API shows them."""
    policy = queries.slice_policy(row)
    return api.Slice(
        name=row.name,
        display_name=row.display_name,
        project=row.project.name,
        group=row.group_name,
        members=members,
        quota=quota_resource(policy),
        policy=api.SlicePolicy(**{name: getattr(policy, name) for name in api.SlicePolicy.model_fields}),
        usage=api.Usage(**usage),
        namespaces=queries.slice_namespaces(row),
        gpus=gpus,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def quota_resource(source: Any) -> api.Quota:
    """The quota fields of a slice's policy or a project (the same names)."""
    return api.Quota(**{key: getattr(source, key) for key in api.Quota.model_fields})


def event_resource(row: EventRow) -> api.Event:
    return api.Event(
        id=row.id,
        time=row.time,
        kind=row.kind,
        actor=row.actor,
        reason=row.reason,
        gpr=row.gpr_id,
        slice=row.slice,
        from_status=row.from_status,
        to_status=row.to_status,
        data=row.data or {},
    )


def _shape(shape: Shape) -> dict[str, Any]:
    return {
        "name": shape.name,
        "model": shape.model,
        "memory_gb": shape.memory_gb,
        "gpus_per_node": shape.gpus_per_node,
        "mig_profile": shape.profile,
        "gpu_equivalents": float(shape.equivalents),
        "replicas": shape.replicas,
    }


def option_resource(option: Option, duration: timedelta, prices: cost.Prices) -> api.WaitTimeOption:
    """Where and when a request of ``duration`` would start, and what it would cost at ``prices``."""
    price = prices.get((option.cluster, option.shape.name))
    return api.WaitTimeOption(
        cluster=option.cluster,
        shape=api.Shape(**_shape(option.shape)),
        estimated_start=option.start,
        wait=option.wait,
        nodes=option.placement.nodes,
        gpus=option.placement.count,
        cost_per_hour=cost.cost_per_hour(price, option.placement.count),
        estimated_cost=cost.estimated_cost(price, option.placement.count, duration),
    )


def eviction_resource(eviction: Eviction, victims: list[GPR]) -> api.Eviction:
    """A proposed (or issued) eviction: the GPR it lets start and what its victims hold."""
    return api.Eviction(
        gpr_id=eviction.gpr_id,
        victims=[
            api.EvictionVictim(
                id=v.id,
                slice=v.spec.slice,
                priority=v.spec.priority,
                gpus=len(v.bound_gpus),
                window_end=v.window_end,
                status=v.status.value,
            )
            for v in victims
        ],
        automatic=eviction.automatic,
    )


def inventory_resource(
    clusters: list[Cluster],
    bound: dict[str, tuple[str, int]],
    live: Mapping[str, ClusterState],
    prices: cost.Prices,
    viewer: Viewer,
) -> api.Inventory:
    """The ``live`` clusters (those the service drives) with nodes and GPUs; ``bound`` maps a GPU to
    (slice, GPR) now, shown where the ``viewer`` sees the slice. A whole node with any GPU bound has none
    free (it is one GPR's)."""
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
            shape = queries.node_shape(node)
            entry = shapes.setdefault(
                (cluster.name, shape.name),
                {
                    "cluster": cluster.name,
                    **_shape(shape),
                    "gpus": 0,
                    "free": 0,
                    "price_per_gpu_hour": prices.get((cluster.name, shape.name)),
                },
            )
            taken = node.whole and any(gpu.present and gpu.uuid in bound for gpu in node.gpus)
            gpus = []
            for gpu in node.gpus:
                if not gpu.present:
                    continue
                slice_name, gpr_id = bound.get(gpu.uuid, (None, None))
                usable = gpu.healthy and node.schedulable and slice_name is None and not taken
                shown = viewer.sees(slice_name)
                entry["gpus"] += 1
                entry["free"] += usable
                total += 1
                free += usable
                gpus.append(
                    api.InventoryGPU(
                        uuid=gpu.uuid,
                        index=gpu.index,
                        product=gpu.product,
                        memory_mib=gpu.memory_mib,
                        declared=gpu.declared,
                        healthy=gpu.healthy,
                        parent_uuid=gpu.parent_uuid,
                        mig_profile=gpu.mig_profile,
                        bound=slice_name is not None,
                        slice=slice_name if shown else None,
                        gpr=gpr_id if shown else None,
                    )
                )
            nodes.append(
                api.InventoryNode(
                    name=node.name,
                    shape=shape.name,
                    schedulable=node.schedulable,
                    declared=node.declared,
                    whole=node.whole,
                    gpus=gpus,
                )
            )
        out_clusters.append(
            api.InventoryCluster(
                name=cluster.name,
                kind=cluster.kind,
                source=state.source,
                health=state.health,
                message=state.error,
                nodes=nodes,
            )
        )
    return api.Inventory(
        clusters=out_clusters,
        shapes=[api.InventoryShape(**entry) for _, entry in sorted(shapes.items())],
        gpus=total,
        free=free,
    )


def cluster_resource(state: ClusterState, row: Cluster | None) -> api.Cluster:
    """A cluster the service drives; ``row`` is its stored inventory (None before its first refresh)."""
    nodes = [n for n in row.nodes if n.present] if row is not None else []
    return api.Cluster(
        name=state.name,
        kind=state.backend.kind,
        origin=state.origin,
        where=state.where,
        project=row.project.name if row is not None else state.spec.project if state.spec else DEFAULT_PROJECT,
        health=state.health,
        message=state.error,
        source=state.source,
        nodes=len(nodes),
        gpus=sum(1 for n in nodes for g in n.gpus if g.present),
        node_selector=state.spec.node_selector if state.spec else None,
        exit_grace=state.spec.exit_grace if state.spec else None,
    )


def window_resource(
    gpr_id: int,
    slice_name: str,
    gpus: list[str],
    on_gpus: list[str],
    start: datetime,
    end: datetime,
    state: str,
    status: str,
    count: int,
    viewer: Viewer,
) -> api.Window:
    """One GPR's window on one node; a planned window later than now names no GPUs, only
    how many (``count``). ``on_gpus``: the physical GPUs that its MIG instances or shares are on.
    Its GPR and slice are shown where the ``viewer`` sees the slice."""
    shown = viewer.sees(slice_name)
    return api.Window(
        gpr=gpr_id if shown else None,
        slice=slice_name if shown else None,
        gpus=gpus,
        on_gpus=on_gpus,
        gpu_count=count,
        start=start,
        end=end,
        state=state,
        status=status,
    )


def sample_resource(sample: GpuSample | None) -> api.GPUSample | None:
    """A GPU's readings: percent, MiB, °C, W, MHz; None where the source gives none."""
    if sample is None:
        return None
    return api.GPUSample(
        time=sample.time,
        utilization=sample.utilization,
        memory_utilization=sample.memory_utilization,
        memory_used_mib=sample.memory_used_mib,
        memory_total_mib=sample.memory_total_mib,
        temperature_c=sample.temperature_c,
        power_w=sample.power_w,
        power_limit_w=sample.power_limit_w,
        sm_clock_mhz=sample.sm_clock_mhz,
        throttle_reasons=sample.throttle_reasons,
        ecc_errors=sample.ecc_errors,
        xid=sample.xid,
        processes=None
        if sample.processes is None
        else [api.GPUProcess(pid=p.pid, used_mib=p.used_mib, user=p.user, server=p.server) for p in sample.processes],
        pod=sample.pod,
        namespace=sample.namespace,
    )


def alert_resource(row: AlertRow) -> api.Alert:
    return api.Alert(
        id=row.id,
        kind=row.kind,
        gpu=row.gpu_uuid,
        node=row.node,
        cluster=row.cluster,
        slice=row.slice,
        gpr=row.gpr_id,
        message=row.message,
        value=row.value,
        threshold=row.threshold,
        raised_at=row.raised_at,
        cleared_at=row.cleared_at,
        active=row.cleared_at is None,
    )


def template_resource(template: GPRTemplate) -> api.Template:
    return api.Template(
        scope=template.scope, **{f.name: getattr(template, f.name) for f in dataclasses.fields(template)}
    )


def project_resource(row: Project, admins: list[str], slices: list[str], clusters: list[str]) -> api.Project:
    return api.Project(
        name=row.name,
        display_name=row.display_name,
        admin_group=row.admin_group,
        admins=admins,
        quota=quota_resource(row),
        share=row.share,
        slices=slices,
        clusters=clusters,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def workspace_request_resource(row: WorkspaceRequestRow) -> api.WorkspaceRequest:
    return api.WorkspaceRequest(
        id=row.id,
        project=row.project,
        name=row.name,
        display_name=row.display_name,
        purpose=row.purpose,
        members=row.members,
        quota=api.Quota(**{key: row.quota.get(key) for key in api.Quota.model_fields}),  # as asked: a dict
        clusters=row.clusters,
        requested_by=row.requested_by,
        status=row.status,
        reason=row.reason,
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        slice=row.slice,
        created_at=row.created_at,
    )


def maintenance_resource(row: MaintenanceWindow, crossing: list[int]) -> api.MaintenanceWindow:
    return api.MaintenanceWindow(
        id=row.id,
        cluster=row.cluster,
        node=row.node,
        start=row.start,
        end=row.end,
        reason=row.reason,
        created_by=row.created_by,
        created_at=row.created_at,
        crossing=crossing,
    )


def layout_change_resource(row: LayoutChangeRow) -> api.LayoutChange:
    return api.LayoutChange(
        id=row.id,
        cluster=row.cluster,
        node=row.node,
        mig=row.mig,
        layout=layouts.describe(row.mig),
        mig_config=row.mig_config,
        state=row.state,
        message=row.message,
        reason=row.reason,
        created_by=row.created_by,
        created_at=row.created_at,
        ready_by=row.ready_by,
        finished_at=row.finished_at,
    )


def pool_resource(row: NodePoolRow, members: Sequence[Node]) -> api.NodePool:
    pool, state = queries.to_pool(row), queries.pool_state(row)
    live = [n for n in members if n.schedulable]
    return api.NodePool(
        cluster=pool.cluster,
        name=pool.name,
        shape=pool.shape.name,
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        scale_up_delay=pool.scale_up_delay,
        scale_down_idle=pool.scale_down_idle,
        provisioning_class=pool.provisioning_class,
        nodes=[api.PoolMember(name=n.name, schedulable=n.schedulable, idle_since=n.idle_since) for n in members],
        coming=max(state.target - len(live), 0),
        asked_at=state.asked_at,
        retry_at=state.retry_at,
        last_error=row.last_error,
        created_by=row.created_by,
        created_at=row.created_at,
    )


def check_item(spec: CheckSpec) -> api.CheckItem:
    """A check as the body gave it (the same fields)."""
    return api.CheckItem(**{name: getattr(spec, name) for name in api.CheckItem.model_fields})


def check_run_resource(row: CheckRun) -> api.CheckRun:
    ended = row.finished_at is not None and row.started_at is not None
    return api.CheckRun(
        id=row.id,
        gpr=row.gpr_id,
        cluster=row.cluster,
        node=row.node,
        name=row.name,
        kind=row.kind,
        phase=row.phase,
        status=row.status,
        started_at=row.started_at,
        finished_at=row.finished_at,
        duration=row.finished_at - row.started_at if ended else None,
        values=row.values,
        log=row.log,
    )


def node_health(row: Node) -> str:
    if not row.present:
        return "unknown"
    if row.quarantined_at is not None:
        return "quarantined"
    if not row.schedulable or any(not g.healthy or not g.present for g in row.gpus):
        return "unhealthy"
    return "healthy"


def maintenance_span(row: MaintenanceWindow, viewer: Viewer) -> api.MaintenanceSpan:
    """A node's maintenance window; why, to admins only."""
    return api.MaintenanceSpan(start=row.start, end=row.end, reason=row.reason if viewer.admin else None)


def node_resource(
    row: Node,
    cluster: str,
    held_by: Sequence[int],
    maintenance: Sequence[MaintenanceWindow],
    checks: Sequence[CheckRun],
    viewer: Viewer,
) -> api.Node:
    """A node as the ``viewer`` may see it: ``held_by`` and ``checks`` are the caller's to pass filtered
    (the GPRs and check runs it sees); why it is quarantined or in maintenance, to admins only."""
    return api.Node(
        cluster=cluster,
        name=row.name,
        shape=queries.node_shape(row).name,
        health=node_health(row),
        schedulable=row.schedulable,
        present=row.present,
        gpus=[api.NodeGPU(uuid=g.uuid, index=g.index, healthy=g.healthy, present=g.present) for g in row.gpus],
        quarantined_at=row.quarantined_at,
        quarantine_reason=row.quarantine_reason if viewer.admin else None,
        held_by=sorted(held_by),
        maintenance=[maintenance_span(m, viewer) for m in maintenance],
        checks=[check_run_resource(run) for run in checks],
    )
