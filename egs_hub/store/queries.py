"""Reads and writes of the store, in terms of the core's records.

Every function takes an open Session and leaves committing to the caller,
so one API call or one reconcile step is one transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, insert, or_, select
from sqlalchemy.orm import Session, selectinload

from ..core import fairshare, sharing
from ..core import model as core
from ..core.alerts import Alert
from ..core.checks import DEFAULT_CHECKLIST, GpuIdentity
from ..core.errors import PolicyViolation
from ..core.fairshare import Use
from ..core.node_pools import NodePool, PoolState, all_joining
from ..core.promises import ESTIMATE_MOVED
from ..core.requests import CheckSpec, ClusterCreate
from ..core.snapshot import Booking, Estimate, Maintenance, Placement, Request, Snapshot
from ..core.templates import GPRTemplate
from .models import (
    GPU,
    AlertRow,
    Allocation,
    Binding,
    CheckRun,
    Cluster,
    EventRow,
    GPRPastWindow,
    GPRResource,
    GPRRow,
    GPRTemplateRow,
    GPRUtilization,
    LastCheckRun,
    LayoutChangeRow,
    MaintenanceWindow,
    Node,
    NodePoolRow,
    Price,
    Project,
    PromiseRow,
    Server,
    Slice,
    SliceLeftover,
    SliceNamespace,
    WorkspaceRequestRow,
)


def _seconds(value: timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


def _delta(seconds: int | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


# GPRs and events


def to_gpr(row: GPRRow) -> core.GPR:
    return _gpr_of(row, [(a.gpu_uuid, a.node) for a in row.allocations])


def _gpr_of(row, allocations: list[tuple[str, str]]) -> core.GPR:
    """The GPR of a ``gprs`` row (an ORM row or a Core one: the same attributes) with its allocations
    ``(GPU, node)`` in placement order."""
    spec = core.GPRSpec(
        slice=row.slice,
        duration=timedelta(seconds=row.duration_s),
        gpus=row.gpus,
        nodes=row.nodes,
        name=row.name,
        priority=row.priority,
        shape=row.shape,
        cluster=row.cluster,
        start_after=row.start_after,
        idle_timeout=_delta(row.idle_timeout_s),
        preemptible=row.preemptible,
        template=row.template,
        gpu_share=row.gpu_share,
    )
    return core.GPR(
        id=row.id,
        spec=spec,
        requested_by=row.requested_by,
        status=core.Status(row.status),
        status_reason=row.status_reason,
        created_at=row.created_at,
        updated_at=row.updated_at,
        window_start=row.window_start,
        window_end=row.window_end,
        ended_at=row.ended_at,
        end_reason=core.EndReason(row.end_reason) if row.end_reason else None,
        bound_gpus=tuple(gpu for gpu, _ in allocations),
        bound_nodes=tuple(dict.fromkeys(node for _, node in allocations)),
        avoid_nodes=tuple((cluster, node) for cluster, node in row.avoid_nodes or ()),
        replaced=tuple(
            core.NodeReplacement(failed, node, datetime.fromisoformat(at)) for failed, node, at in row.replaced or ()
        ),
        price_per_gpu_hour=row.price_per_gpu_hour,
    )


def new_gpr_row(session: Session, spec: core.GPRSpec, requested_by: str, now: datetime) -> GPRRow:
    """A row for a GPR about to be submitted; flushed so that it has its id."""
    row = GPRRow(
        slice=spec.slice,
        requested_by=requested_by,
        status=core.Status.QUEUED,
        created_at=now,
        updated_at=now,
        priority=spec.priority,
        duration_s=0,
        preemptible=spec.preemptible,
    )
    session.add(row)
    session.flush()
    return row


def add_gprs(session: Session, submitted: list[tuple[core.GPR, core.Event]]) -> list[core.GPR]:
    """Write new GPRs and their events, made by ``lifecycle.submit`` with id 0: the rows are
    inserted together (one INSERT ... RETURNING where the database has it), then the GPRs and
    events take their ids."""
    rows = []
    for gpr, _ in submitted:
        row = GPRRow(created_at=gpr.created_at)
        write_gpr(session, row, gpr)
        rows.append(row)
    session.add_all(rows)
    session.flush()
    made = []
    for row, (gpr, event) in zip(rows, submitted, strict=True):
        add_event(session, dataclasses.replace(event, gpr_id=row.id))
        made.append(dataclasses.replace(gpr, id=row.id))
    return made


def write_gpr(session: Session, row: GPRRow, gpr: core.GPR) -> None:
    """Copy ``gpr`` onto its row; allocations follow ``bound_gpus``."""
    spec = gpr.spec
    row.name = spec.name
    row.slice = spec.slice
    row.requested_by = gpr.requested_by
    row.cluster = spec.cluster
    row.shape = spec.shape
    row.gpus = spec.gpus
    row.nodes = spec.nodes
    row.priority = spec.priority
    row.duration_s = int(spec.duration.total_seconds())
    row.start_after = spec.start_after
    row.idle_timeout_s = _seconds(spec.idle_timeout)
    row.preemptible = spec.preemptible
    row.template = spec.template
    row.gpu_share = spec.gpu_share
    row.price_per_gpu_hour = gpr.price_per_gpu_hour
    row.status = gpr.status.value
    row.status_reason = gpr.status_reason
    row.window_start = gpr.window_start
    row.window_end = gpr.window_end
    row.ended_at = gpr.ended_at
    row.end_reason = gpr.end_reason.value if gpr.end_reason else None
    row.avoid_nodes = [list(pair) for pair in gpr.avoid_nodes]
    row.replaced = [[r.failed_node, r.node, r.at.isoformat()] for r in gpr.replaced]
    row.updated_at = gpr.updated_at
    if tuple(a.gpu_uuid for a in row.allocations) != gpr.bound_gpus:
        node_of = dict(
            session.execute(select(GPU.uuid, Node.name).join(Node).where(GPU.uuid.in_(gpr.bound_gpus))).all()
        )
        row.allocations.clear()
        session.flush()
        row.allocations.extend(
            Allocation(gpu_uuid=uuid, node=node_of[uuid], position=i) for i, uuid in enumerate(gpr.bound_gpus)
        )


def add_event(session: Session, event: core.Event) -> EventRow:
    row = EventRow(
        time=event.time,
        kind=event.kind,
        actor=event.actor,
        reason=event.reason,
        gpr_id=event.gpr_id,
        slice=event.slice,
        from_status=event.from_status.value if event.from_status else None,
        to_status=event.to_status.value if event.to_status else None,
        data=event.data,
    )
    session.add(row)
    return row


def apply(session: Session, row: GPRRow, change: tuple[core.GPR, core.Event]) -> core.GPR:
    """Write a lifecycle function's result: the GPR and its audit event, together."""
    gpr, event = change
    write_gpr(session, row, gpr)
    add_event(session, event)
    return gpr


def evictions_in_flight(session: Session) -> list[int]:
    """GPRs evicted whose GPUs are not back yet."""
    query = select(GPRRow.id).where(
        GPRRow.status == core.Status.RELEASING.value, GPRRow.end_reason == core.EndReason.EVICTED.value
    )
    return list(session.scalars(query.order_by(GPRRow.id)))


def get_gpr_row(session: Session, gpr_id: int, *, lock: bool = False) -> GPRRow | None:
    query = select(GPRRow).where(GPRRow.id == gpr_id).options(selectinload(GPRRow.allocations))
    if lock:
        query = query.with_for_update()
    return session.scalars(query).one_or_none()


def _of_gprs(query, slices: Iterable[str] | None, statuses: Iterable[str] | None):
    """``query`` on ``gprs`` narrowed to these slices and statuses (None: any)."""
    if slices is not None:
        query = query.where(GPRRow.slice.in_(list(slices)))
    if statuses is not None:
        query = query.where(GPRRow.status.in_(list(statuses)))
    return query


def gpr_rows(
    session: Session, *, slices: Iterable[str] | None = None, statuses: Iterable[str] | None = None
) -> list[GPRRow]:
    """In id order."""
    query = select(GPRRow).options(selectinload(GPRRow.allocations)).order_by(GPRRow.id)
    return list(session.scalars(_of_gprs(query, slices, statuses)))


def gprs_page(
    session: Session,
    *,
    slices: Iterable[str] | None = None,
    statuses: Iterable[str] | None = None,
    after_id: int | None = None,
    limit: int,
    known: Mapping[int, core.GPR] | None = None,
) -> list[core.GPR]:
    """The page after ``after_id`` (keyset, on the primary key) of the GPRs in id order, read without
    ORM objects; those in ``known`` (GPRs already in memory, as current as the database) are taken from
    there, and only the others are read."""
    query = _of_gprs(select(GPRRow.id).order_by(GPRRow.id).limit(limit), slices, statuses)
    if after_id is not None:
        query = query.where(GPRRow.id > after_id)
    ids = list(session.scalars(query))
    known = known or {}
    unknown = [i for i in ids if i not in known]
    read: dict[int, core.GPR] = {}
    if unknown:
        allocations: dict[int, list[tuple[str, str]]] = {i: [] for i in unknown}
        held = (
            select(Allocation.gpr_id, Allocation.gpu_uuid, Allocation.node)
            .where(Allocation.gpr_id.in_(unknown))
            .order_by(Allocation.gpr_id, Allocation.position)
        )
        for gpr_id, gpu, node in session.execute(held):
            allocations[gpr_id].append((gpu, node))
        for row in session.execute(select(GPRRow.__table__).where(GPRRow.id.in_(unknown))):
            read[row.id] = _gpr_of(row, allocations[row.id])
    return [known[i] if i in known else read[i] for i in ids if i in known or i in read]


# Bindings: a GPU bound to at most one slice, enforced by the primary key.


def bind(session: Session, gpr: core.GPR) -> None:
    existing = set(session.scalars(select(Binding.gpu_uuid).where(Binding.gpr_id == gpr.id)))
    session.add_all(
        Binding(gpu_uuid=uuid, gpr_id=gpr.id, slice=gpr.spec.slice) for uuid in gpr.bound_gpus if uuid not in existing
    )
    session.flush()


def swap_bindings(session: Session, gpr: core.GPR, old: Iterable[str]) -> None:
    """The GPR's bindings after a replacement: ``old`` GPUs' removed, its new ones added."""
    session.execute(delete(Binding).where(Binding.gpr_id == gpr.id, Binding.gpu_uuid.in_(list(old))))
    bind(session, gpr)


def unbind(session: Session, gpr_id: int) -> None:
    session.execute(delete(Binding).where(Binding.gpr_id == gpr_id))


def gpu_holders(session: Session) -> dict[str, tuple[str, int]]:
    """GPU UUID -> (slice, GPR id) of every GPU bound now."""
    query = select(Binding.gpu_uuid, Binding.slice, Binding.gpr_id)
    return {uuid: (slice_name, gpr_id) for uuid, slice_name, gpr_id in session.execute(query)}


def slice_usable_gpus(session: Session, slice_name: str, cluster: str | None = None) -> list[tuple[str, int]]:
    """(GPU UUID, GPR id) a slice's servers may use now: bound, and not being released; on ``cluster`` only
    when it is given."""
    query = (
        select(Binding.gpu_uuid, Binding.gpr_id)
        .join(GPRRow, GPRRow.id == Binding.gpr_id)
        .join(GPU, GPU.uuid == Binding.gpu_uuid)
        .join(Node)
        .where(
            Binding.slice == slice_name,
            GPRRow.status.in_([core.Status.PROVISIONING.value, core.Status.PROVISIONED.value]),
        )
        .order_by(Node.name, GPU.index)
    )
    if cluster is not None:
        query = query.join(Cluster, Cluster.id == Node.cluster_id).where(Cluster.name == cluster)
    return [(uuid, gpr_id) for uuid, gpr_id in session.execute(query)]


def devices(session: Session, uuids: Sequence[str]) -> list[str]:
    """What a server is given for the units ``uuids``: a share of a time-sliced GPU is the GPU itself
    (core/sharing.py), once however many of its shares there are; GPUs and MIG instances are themselves."""
    parents = dict(
        session.execute(
            select(GPU.uuid, GPU.parent_uuid).join(Node).where(GPU.uuid.in_(list(uuids)), Node.replicas > 1)
        ).all()
    )
    return list(dict.fromkeys(parents.get(uuid) or uuid for uuid in uuids))


# Slices


def get_slice(session: Session, name: str) -> Slice | None:
    return session.scalars(
        select(Slice).where(Slice.name == name).options(selectinload(Slice.namespaces))
    ).one_or_none()


def all_slices(session: Session) -> list[Slice]:
    return list(session.scalars(select(Slice).options(selectinload(Slice.namespaces)).order_by(Slice.name)))


def slice_policy(row: Slice) -> core.SlicePolicy:
    return core.SlicePolicy(
        max_gpus=row.max_gpus,
        max_duration=_delta(row.max_duration_s),
        max_priority=row.max_priority,
        auto_approve_max_gpus=row.auto_approve_max_gpus,
        max_active_gprs=row.max_active_gprs,
        restart_servers=row.restart_servers,
        max_gpu_hours=row.max_gpu_hours,
        max_cost_month=row.max_cost_month,
        reject_over_limits=row.reject_over_limits,
        eviction=row.eviction,
        requeue_evicted=row.requeue_evicted,
        share=row.share,
        idle_timeout=_delta(row.idle_timeout_s),
        max_idle_timeout=_delta(row.max_idle_timeout_s),
        bind_failure=row.bind_failure,
        remediation=row.remediation,
        maintenance_crossing=row.maintenance_crossing,
        auto_gpr=row.auto_gpr,
        home_volume_size=row.home_volume_size,
        home_volume_class=row.home_volume_class,
        gpu_sharing=row.gpu_sharing,
    )


def write_slice_policy(row: Slice, policy: core.SlicePolicy) -> None:
    row.max_gpus = policy.max_gpus
    row.max_duration_s = _seconds(policy.max_duration)
    row.max_priority = policy.max_priority
    row.auto_approve_max_gpus = policy.auto_approve_max_gpus
    row.max_active_gprs = policy.max_active_gprs
    row.restart_servers = policy.restart_servers
    row.max_gpu_hours = policy.max_gpu_hours
    row.max_cost_month = policy.max_cost_month
    row.reject_over_limits = policy.reject_over_limits
    row.eviction = policy.eviction
    row.requeue_evicted = policy.requeue_evicted
    row.share = policy.share
    row.idle_timeout_s = _seconds(policy.idle_timeout)
    row.max_idle_timeout_s = _seconds(policy.max_idle_timeout)
    row.bind_failure = policy.bind_failure
    row.remediation = policy.remediation
    row.maintenance_crossing = policy.maintenance_crossing
    row.auto_gpr = policy.auto_gpr
    row.home_volume_size = policy.home_volume_size
    row.home_volume_class = policy.home_volume_class
    row.gpu_sharing = policy.gpu_sharing


def set_namespaces(session: Session, row: Slice, namespaces: dict[str, tuple[str, ...]]) -> None:
    row.namespaces.clear()
    session.flush()
    row.namespaces.extend(
        SliceNamespace(cluster=cluster, namespace=name)
        for cluster, names in sorted(namespaces.items())
        for name in names
    )


def slice_namespaces(row: Slice) -> dict[str, tuple[str, ...]]:
    """The slice's namespaces by cluster, each cluster's in the order given (the first is its home)."""
    found: dict[str, list[str]] = {}
    for ns in row.namespaces:
        found.setdefault(ns.cluster, []).append(ns.namespace)
    return {cluster: tuple(names) for cluster, names in found.items()}


def leave_behind(session: Session, slice_name: str, clusters: Iterable[str]) -> None:
    """Record that the slice's setup stays on these clusters (not registered now) until they are again."""
    for cluster in clusters:
        session.merge(SliceLeftover(slice=slice_name, cluster=cluster))


def leftovers(session: Session) -> list[tuple[str, str]]:
    """Every (slice, cluster) whose setup is still to be removed from the cluster."""
    rows = session.scalars(select(SliceLeftover).order_by(SliceLeftover.cluster, SliceLeftover.slice))
    return [(r.slice, r.cluster) for r in rows]


def forget_leftover(session: Session, slice_name: str, cluster: str) -> None:
    session.execute(delete(SliceLeftover).where(SliceLeftover.slice == slice_name, SliceLeftover.cluster == cluster))


def slice_of_namespace(session: Session, cluster: str, namespace: str) -> str | None:
    """The slice a namespace on a cluster belongs to, if any."""
    found = namespace_slice(session, cluster, namespace)
    return None if found is None else found[0]


def namespace_slice(session: Session, cluster: str, namespace: str) -> tuple[str, str | None] | None:
    """The slice a namespace on a cluster belongs to and its policy's auto_gpr template, if any."""
    query = (
        select(Slice.name, Slice.auto_gpr)
        .join(SliceNamespace, SliceNamespace.slice_id == Slice.id)
        .where(SliceNamespace.cluster == cluster, SliceNamespace.namespace == namespace)
    )
    found = session.execute(query).one_or_none()
    return None if found is None else (found[0], found[1])


def bound_gpus(session: Session) -> dict[tuple[str, str], tuple[str, ...]]:
    """The GPUs (and units) each slice holds on each cluster now: (slice, cluster) -> their ids, sorted."""
    query = (
        select(Binding.slice, Cluster.name, Binding.gpu_uuid)
        .join(GPU, GPU.uuid == Binding.gpu_uuid)
        .join(Node, Node.id == GPU.node_id)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .order_by(Binding.slice, Cluster.name, Binding.gpu_uuid)
    )
    held: dict[tuple[str, str], tuple[str, ...]] = {}
    for slice_name, cluster, gpu in session.execute(query):
        held[(slice_name, cluster)] = (*held.get((slice_name, cluster), ()), gpu)
    return held


def project_id(session: Session, now: datetime) -> int:
    """The default project's id, created on first use."""
    found = session.scalar(select(Project.id).where(Project.name == core.DEFAULT_PROJECT))
    if found is not None:
        return found
    project = Project(name=core.DEFAULT_PROJECT, created_at=now)
    session.add(project)
    session.flush()
    return project.id


def to_project(row: Project) -> core.Project:
    return core.Project(
        name=row.name,
        display_name=row.display_name,
        admin_group=row.admin_group,
        max_gpus=row.max_gpus,
        max_gpu_hours=row.max_gpu_hours,
        max_cost_month=row.max_cost_month,
        share=row.share,
    )


def write_project(row: Project, project: core.Project, now: datetime) -> None:
    row.display_name = project.display_name
    row.admin_group = project.admin_group
    row.max_gpus = project.max_gpus
    row.max_gpu_hours = project.max_gpu_hours
    row.max_cost_month = project.max_cost_month
    row.share = project.share
    row.updated_at = now


def get_project_row(session: Session, name: str) -> Project | None:
    return session.scalars(select(Project).where(Project.name == name)).one_or_none()


def all_projects(session: Session) -> list[Project]:
    return list(session.scalars(select(Project).order_by(Project.name)))


def project_slices(session: Session, project_id: int) -> list[str]:
    return list(session.scalars(select(Slice.name).where(Slice.project_id == project_id).order_by(Slice.name)))


def project_clusters(session: Session, project_id: int) -> list[str]:
    """The clusters the project holds (a project with clusters cannot be deleted)."""
    query = select(Cluster.name).where(Cluster.project_id == project_id)
    return list(session.scalars(query.order_by(Cluster.name)))


def project_of_slice(session: Session, slice_name: str) -> str | None:
    """The name of the project slice ``slice_name`` belongs to (None: no such slice)."""
    query = select(Project.name).join(Slice, Slice.project_id == Project.id).where(Slice.name == slice_name)
    return session.scalar(query)


def project_exists(session: Session, name: str) -> bool:
    return session.scalar(select(Project.id).where(Project.name == name)) is not None


# GPR templates


def to_template(row: GPRTemplateRow) -> GPRTemplate:
    return GPRTemplate(
        name=row.name,
        description=row.description,
        project=row.project,
        slice=row.slice,
        cluster=row.cluster,
        shape=row.shape,
        gpus=row.gpus,
        nodes=row.nodes,
        duration=timedelta(seconds=row.duration_s),
        priority=row.priority,
        idle_timeout=_delta(row.idle_timeout_s),
        preemptible=row.preemptible,
        created_by=row.created_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def write_template(row: GPRTemplateRow, template: GPRTemplate, now: datetime) -> None:
    """Copy ``template``'s fields (all but its name and creation) onto its row."""
    row.description = template.description
    row.project = template.project
    row.slice = template.slice
    row.cluster = template.cluster
    row.shape = template.shape
    row.gpus = template.gpus
    row.nodes = template.nodes
    row.duration_s = int(template.duration.total_seconds())
    row.priority = template.priority
    row.idle_timeout_s = _seconds(template.idle_timeout)
    row.preemptible = template.preemptible
    row.updated_at = now


def get_template_row(session: Session, name: str) -> GPRTemplateRow | None:
    return session.get(GPRTemplateRow, name)


def get_template(session: Session, name: str) -> GPRTemplate | None:
    row = get_template_row(session, name)
    return None if row is None else to_template(row)


def templates(session: Session, slices: Iterable[str] | None = None) -> list[GPRTemplate]:
    """The templates by name; with ``slices``, those usable in one of them (global ones, the
    ones of their projects and their own)."""
    query = select(GPRTemplateRow).order_by(GPRTemplateRow.name)
    if slices is not None:
        slices = list(slices)
        projects = select(Project.name).join(Slice, Slice.project_id == Project.id).where(Slice.name.in_(slices))
        query = query.where(
            or_(
                GPRTemplateRow.slice.in_(slices),
                and_(GPRTemplateRow.slice.is_(None), GPRTemplateRow.project.is_(None)),
                and_(GPRTemplateRow.slice.is_(None), GPRTemplateRow.project.in_(projects)),
            )
        )
    return [to_template(row) for row in session.scalars(query)]


def delete_slice_templates(session: Session, slice_name: str) -> list[str]:
    """Delete the templates only ``slice_name`` could use (it is being deleted); their names."""
    rows = list(session.scalars(select(GPRTemplateRow).where(GPRTemplateRow.slice == slice_name)))
    for row in rows:
        session.delete(row)
    return [row.name for row in rows]


# Workspace requests


def get_workspace_request(session: Session, request_id: int, *, lock: bool = False) -> WorkspaceRequestRow | None:
    query = select(WorkspaceRequestRow).where(WorkspaceRequestRow.id == request_id)
    return session.scalars(query.with_for_update() if lock else query).one_or_none()


def workspace_requests(
    session: Session, status: str | None, requested_by: str | None = None, projects: Iterable[str] | None = None
) -> list[WorkspaceRequestRow]:
    """Newest first; with ``requested_by`` and ``projects``, those of that user or of those projects."""
    query = select(WorkspaceRequestRow).order_by(WorkspaceRequestRow.id.desc())
    if status is not None:
        query = query.where(WorkspaceRequestRow.status == status)
    if requested_by is not None:
        query = query.where(
            or_(WorkspaceRequestRow.requested_by == requested_by, WorkspaceRequestRow.project.in_(list(projects or ())))
        )
    return list(session.scalars(query))


def pending_workspace_request(session: Session, name: str) -> WorkspaceRequestRow | None:
    query = select(WorkspaceRequestRow).where(WorkspaceRequestRow.name == name, WorkspaceRequestRow.status == "pending")
    return session.scalars(query.limit(1)).one_or_none()


# Prices (core/cost.py)


def prices(session: Session, clusters: Iterable[str] | None = None) -> dict[tuple[str, str], float]:
    """``(cluster, shape) -> price per GPU-hour``, of ``clusters`` (None: every cluster)."""
    query = select(Price)
    if clusters is not None:
        query = query.where(Price.cluster.in_(list(clusters)))
    return {(p.cluster, p.shape): p.price_per_gpu_hour for p in session.scalars(query)}


def set_prices(session: Session, cluster: str, by_shape: Mapping[str, float]) -> None:
    """Replace cluster ``cluster``'s prices with ``by_shape`` (row by row, so the planning state sees even
    an emptied table change)."""
    for row in session.scalars(select(Price).where(Price.cluster == cluster)):
        session.delete(row)
    session.flush()
    session.add_all(Price(cluster=cluster, shape=shape, price_per_gpu_hour=p) for shape, p in by_shape.items())


def cluster_shapes(session: Session, cluster: str) -> set[str]:
    """The names of the shapes of ``cluster``'s nodes present now and of its node pools."""
    query = (
        select(Node.gpu_model, Node.gpu_memory_gb, Node.gpus_per_node, Node.mig_profile, Node.replicas)
        .join(Cluster)
        .where(Cluster.name == cluster, Node.present.is_(True))
        .distinct()
    )
    pooled = select(NodePoolRow.gpu_model, NodePoolRow.gpu_memory_gb, NodePoolRow.gpus_per_node).where(
        NodePoolRow.cluster == cluster
    )
    return {core.Shape(*row).name for row in (*session.execute(query), *session.execute(pooled))}


def price_of(session: Session, cluster: str, shape: str) -> float | None:
    """The price per GPU-hour of ``shape`` (a shape's name) on ``cluster``; None: no price."""
    row = session.get(Price, (cluster, shape))
    return None if row is None else row.price_per_gpu_hour


# Checklists (core/checks.py)


def cluster_checklist(session: Session, cluster: str) -> tuple[CheckSpec, ...]:
    """The checklist of ``cluster``'s nodes: the admin's, else the default."""
    row = session.scalar(select(Cluster).where(Cluster.name == cluster))
    if row is None or row.checks is None:
        return DEFAULT_CHECKLIST
    return tuple(CheckSpec.model_validate(spec) for spec in row.checks)


def set_cluster_checklist(session: Session, cluster: str, checklist: Sequence[CheckSpec] | None) -> None:
    """Set the cluster's checklist (None: back to the default)."""
    row = session.scalar(select(Cluster).where(Cluster.name == cluster))
    # as the body gave it, the timeout in seconds (the body reads those back)
    row.checks = (
        None
        if checklist is None
        else [{**spec.model_dump(mode="json"), "timeout": int(spec.timeout.total_seconds())} for spec in checklist]
    )


def gpu_identities(session: Session, uuids: Iterable[str]) -> dict[str, GpuIdentity]:
    """Each GPU of ``uuids`` with its node, index and cluster, by UUID."""
    query = (
        select(GPU.uuid, Node.name, GPU.index, Cluster.name)
        .join(Node, Node.id == GPU.node_id)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(GPU.uuid.in_(list(uuids)))
    )
    return {row[0]: GpuIdentity(*row) for row in session.execute(query)}


def has_gpr_event(session: Session, gpr_id: int, kind: str, **data) -> bool:
    """Whether the GPR has an event of ``kind`` whose data holds ``data``."""
    query = select(EventRow.data).where(EventRow.gpr_id == gpr_id, EventRow.kind == kind)
    return any(all((found or {}).get(k) == v for k, v in data.items()) for found in session.scalars(query))


def gpus_by_node(session: Session, uuids: Iterable[str]) -> dict[str, list[str]]:
    """The GPUs of ``uuids`` grouped by their node's name, in index order."""
    found: dict[str, list[str]] = {}
    for gpu in sorted(gpu_identities(session, uuids).values(), key=lambda g: (g.node, g.index)):
        found.setdefault(gpu.node, []).append(gpu.uuid)
    return found


def gpr_check_runs(session: Session, gpr_id: int) -> list[CheckRun]:
    return list(session.scalars(select(CheckRun).where(CheckRun.gpr_id == gpr_id).order_by(CheckRun.id)))


def node_rows(session: Session, cluster: str | None = None) -> list[tuple[str, Node]]:
    """(cluster name, node) of every node known (of ``cluster``), by cluster and name, with its GPUs."""
    query = select(Cluster.name, Node).join(Cluster, Cluster.id == Node.cluster_id).options(selectinload(Node.gpus))
    if cluster is not None:
        query = query.where(Cluster.name == cluster)
    return [(name, node) for name, node in session.execute(query.order_by(Cluster.name, Node.name))]


def node_holders(session: Session) -> dict[tuple[str, str], dict[int, str]]:
    """The GPRs holding GPUs now with their slices, by (cluster, node)."""
    query = (
        select(Cluster.name, Node.name, Allocation.gpr_id, GPRRow.slice)
        .join(GPU, GPU.uuid == Allocation.gpu_uuid)
        .join(Node, Node.id == GPU.node_id)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .join(GPRRow, GPRRow.id == Allocation.gpr_id)
        .where(GPRRow.status.in_([s.value for s in core.HOLDING_STATUSES]))
    )
    held: dict[tuple[str, str], dict[int, str]] = {}
    for cluster, node, gpr_id, slice_name in session.execute(query):
        held.setdefault((cluster, node), {})[gpr_id] = slice_name
    return held


def maintenance_by_node(session: Session, now: datetime) -> dict[tuple[str, str], list[MaintenanceWindow]]:
    """The maintenance windows that have not ended by ``now``, by (cluster, node), by start."""
    query = select(MaintenanceWindow).where(MaintenanceWindow.end > now).order_by(MaintenanceWindow.start)
    found: dict[tuple[str, str], list[MaintenanceWindow]] = {}
    for row in session.scalars(query):
        found.setdefault((row.cluster, row.node), []).append(row)
    return found


def last_check_runs(
    session: Session, cluster: str | None = None, node: str | None = None
) -> dict[tuple[str, str], list[CheckRun]]:
    """The last run of each check of each node (of ``cluster``; ``node`` only), per phase, by (cluster, node)."""
    query = select(CheckRun).join(LastCheckRun, LastCheckRun.run_id == CheckRun.id)
    if cluster is not None:
        query = query.where(LastCheckRun.cluster == cluster)
    if node is not None:
        query = query.where(LastCheckRun.node == node)
    found: dict[tuple[str, str], list[CheckRun]] = {}
    for run in session.scalars(query.order_by(CheckRun.name, CheckRun.phase)):
        found.setdefault((run.cluster, run.node), []).append(run)
    return found


def note_check_runs(session: Session, runs: Iterable[CheckRun]) -> None:
    """Make ``runs`` (flushed) the last of their nodes' checks."""
    for run in runs:
        session.merge(LastCheckRun(cluster=run.cluster, node=run.node, phase=run.phase, name=run.name, run_id=run.id))


# Usage (core/usage.py)


def gprs_held_between(
    session: Session, since: datetime, until: datetime, slices: Iterable[str] | None = None
) -> list[core.GPR]:
    """The GPRs whose windows started before ``until`` and that had not ended by ``since``; and each past
    window of a re-queued GPR in that span as the GPR holding it (complete, its window ending when it was
    taken back: past_window_gpr)."""
    query = (
        select(GPRRow)
        .where(
            GPRRow.window_start.is_not(None),
            GPRRow.window_start < until,
            or_(GPRRow.ended_at.is_(None), GPRRow.ended_at >= since),
        )
        .options(selectinload(GPRRow.allocations))
        .order_by(GPRRow.id)
    )
    past = (
        select(GPRPastWindow, GPRRow)
        .join(GPRRow, GPRRow.id == GPRPastWindow.gpr_id)
        .where(GPRPastWindow.window_start < until, GPRPastWindow.ended_at >= since)
        .options(selectinload(GPRRow.allocations))
        .order_by(GPRPastWindow.id)
    )
    if slices is not None:
        query = query.where(GPRRow.slice.in_(list(slices)))
        past = past.where(GPRRow.slice.in_(list(slices)))
    held = [to_gpr(row) for row in session.scalars(query)]
    return held + [past_window_gpr(to_gpr(row), window) for window, row in session.execute(past)]


def past_window_gpr(gpr: core.GPR, window: GPRPastWindow) -> core.GPR:
    return dataclasses.replace(
        gpr,
        status=core.Status.COMPLETE,
        window_start=window.window_start,
        window_end=window.ended_at,
        ended_at=window.ended_at,
        end_reason=core.EndReason.EVICTED,
        bound_gpus=tuple(window.gpus),
        price_per_gpu_hour=window.price_per_gpu_hour,
    )


def add_past_window(session: Session, gpr: core.GPR, ended_at: datetime) -> None:
    """Keep the window ``gpr`` (evicted, being queued again) held until ``ended_at``."""
    session.add(
        GPRPastWindow(
            gpr_id=gpr.id,
            window_start=gpr.window_start,
            ended_at=ended_at,
            gpus=list(gpr.bound_gpus),
            price_per_gpu_hour=gpr.price_per_gpu_hour,
        )
    )


def cluster_projects(session: Session) -> dict[str, str]:
    """The project of each cluster that is not the default project's (core.model.serves)."""
    query = (
        select(Cluster.name, Project.name)
        .join(Project, Cluster.project_id == Project.id)
        .where(Project.name != core.DEFAULT_PROJECT)
    )
    return dict(session.execute(query).all())


def slice_projects(session: Session) -> dict[str, str]:
    """Every slice's project, by slice name."""
    query = select(Slice.name, Project.name).join(Project, Slice.project_id == Project.id)
    return dict(session.execute(query).all())


def add_readings(session: Session, totals: Mapping[int, tuple[float, int]], day: datetime) -> None:
    """Add utilisation readings (per GPR id: their sum and count) to the GPRs' totals of ``day``."""
    for gpr_id, (total, count) in totals.items():
        row = session.get(GPRUtilization, (gpr_id, day))
        if row is None:
            session.add(GPRUtilization(gpr_id=gpr_id, day=day, total=total, readings=count))
        else:
            row.total += total
            row.readings += count


def readings(session: Session, gpr_ids: Iterable[int], since: datetime, until: datetime) -> dict:
    """``(GPR id, day) -> (sum, count)`` of the readings of ``gpr_ids`` on the days from ``since`` to ``until``."""
    found: dict[tuple[int, datetime], tuple[float, int]] = {}
    ids = sorted(set(gpr_ids))
    for i in range(0, len(ids), 500):
        query = select(GPRUtilization).where(
            GPRUtilization.gpr_id.in_(ids[i : i + 500]),
            GPRUtilization.day > since - timedelta(days=1),
            GPRUtilization.day < until,
        )
        for row in session.scalars(query):
            found[(row.gpr_id, row.day)] = (row.total, row.readings)
    return found


# Inventory


def node_shape(row: Node) -> core.Shape:
    return core.Shape(row.gpu_model, row.gpu_memory_gb, row.gpus_per_node, row.mig_profile, row.replicas)


def to_node(row: Node) -> core.Node:
    shape = node_shape(row)
    gpus = tuple(g.uuid for g in row.gpus if g.present)
    return core.Node(
        name=row.name,
        cluster=row.cluster.name,
        shape=shape,
        gpus=gpus,
        schedulable=row.schedulable,
        declared=row.declared,
        whole=row.whole,
        pool=row.pool,
    )


def history_rows(session: Session, since: datetime) -> list[GPRRow]:
    """GPRs submitted since ``since`` that queued and were not cancelled, rejected or failed before they
    started (sim/history.py), by id."""
    never_ran = [core.Status.CANCELLED.value, core.Status.REJECTED.value, core.Status.FAILED.value]
    query = (
        select(GPRRow)
        .where(GPRRow.created_at >= since, GPRRow.status != core.Status.PENDING_APPROVAL.value)
        .where(or_(GPRRow.window_start.is_not(None), GPRRow.status.not_in(never_ran)))
        .options(selectinload(GPRRow.allocations))
        .order_by(GPRRow.id)
    )
    return list(session.scalars(query))


def planned_node_shapes(session: Session) -> list[tuple[str, core.Shape]]:
    """(cluster, shape) of every node planned on now: present and not quarantined."""
    query = (
        select(Cluster.name, Node.gpu_model, Node.gpu_memory_gb, Node.gpus_per_node, Node.mig_profile, Node.replicas)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(Node.present.is_(True), Node.quarantined_at.is_(None))
        .order_by(Cluster.name, Node.name)
    )
    rows = session.execute(query)
    return [(cluster, core.Shape(*shape)) for cluster, *shape in rows]


def inventory_rows(session: Session) -> list[Cluster]:
    query = select(Cluster).options(selectinload(Cluster.nodes).selectinload(Node.gpus)).order_by(Cluster.name)
    return list(session.scalars(query))


def present_gpus(session: Session) -> Iterator[tuple[Cluster, Node, GPU]]:
    """(cluster, node, GPU) of every GPU present now, in inventory order."""
    for cluster in inventory_rows(session):
        for node in cluster.nodes:
            if node.present:
                yield from ((cluster, node, gpu) for gpu in node.gpus if gpu.present)


def sync_inventory(
    session: Session, cluster: str, kind: str, nodes: list[core.Node], gpus: list[core.GPU], now: datetime
) -> list[core.Event]:
    """Make the cluster's stored nodes and GPUs those discovered; return what changed.

    Nodes and GPUs that are no longer found stay (allocations refer to them)
    but are marked not present, so the planner stops using them.
    """
    row = session.scalar(select(Cluster).where(Cluster.name == cluster))
    if row is None:
        row = Cluster(name=cluster, kind=kind, project_id=project_id(session, now), created_at=now)
        session.add(row)
        session.flush()
    stored_nodes = {n.name: n for n in session.scalars(select(Node).where(Node.cluster_id == row.id))}
    stored_gpus = {g.uuid: g for g in session.scalars(select(GPU).join(Node).where(Node.cluster_id == row.id))}
    events = []
    for node in nodes:
        node_row = stored_nodes.pop(node.name, None)
        if node_row is None:
            node_row = Node(cluster_id=row.id, name=node.name)
            session.add(node_row)
            events.append(_inventory_event("node-added", cluster, node.name, now))
        elif not node_row.present:
            events.append(_inventory_event("node-back", cluster, node.name, now))
        node_row.gpu_model = node.shape.model
        node_row.gpu_memory_gb = node.shape.memory_gb
        node_row.gpus_per_node = node.shape.gpus_per_node
        node_row.mig_profile = node.shape.profile
        node_row.replicas = node.shape.replicas
        node_row.schedulable = node.schedulable
        node_row.declared = node.declared
        node_row.whole = node.whole
        node_row.pool = node.pool
        node_row.present = True
        node_row.updated_at = now
        session.flush()
        for gpu in (g for g in gpus if g.node == node.name):
            gpu_row = stored_gpus.pop(gpu.uuid, None)
            if gpu_row is None:
                gpu_row = GPU(uuid=gpu.uuid)
                session.add(gpu_row)
            elif not gpu_row.present:
                events.append(_inventory_event("gpu-back", cluster, node.name, now, gpu.uuid))
            gpu_row.node_id = node_row.id
            gpu_row.index = gpu.index
            gpu_row.product = gpu.model
            gpu_row.memory_mib = gpu.memory_mib
            gpu_row.parent_uuid = gpu.parent
            gpu_row.mig_profile = gpu.profile
            gpu_row.declared = gpu.declared
            gpu_row.healthy = gpu.healthy
            gpu_row.present = True
    for node_row in stored_nodes.values():
        if node_row.present:
            node_row.present = False
            node_row.updated_at = now
            events.append(_inventory_event("node-lost", cluster, node_row.name, now))
    for gpu_row in stored_gpus.values():
        if gpu_row.present:
            gpu_row.present = False
            events.append(_inventory_event("gpu-lost", cluster, gpu_row.node.name, now, gpu_row.uuid))
    session.flush()
    return events


# Clusters


def registered_clusters(session: Session) -> list[Cluster]:
    """Clusters registered through the API, by name."""
    return list(session.scalars(select(Cluster).where(Cluster.registered.is_(True)).order_by(Cluster.name)))


def register_cluster(session: Session, spec: ClusterCreate, kind: str, now: datetime) -> Cluster:
    """Record how to reach a cluster registered through the API, and its settings (a cluster
    known before, say removed, keeps its row: its nodes and allocations refer to it)."""
    row = session.scalar(select(Cluster).where(Cluster.name == spec.name))
    if row is None:
        row = Cluster(name=spec.name, kind=kind, project_id=project_id(session, now), created_at=now)
        session.add(row)
    row.project_id = project_row_of(session, spec.project).id
    row.kind = kind
    row.registered = True
    row.kubeconfig, row.context, row.in_cluster = spec.kubeconfig, spec.context, spec.in_cluster
    row.node_selector, row.exit_grace_s = spec.node_selector, _seconds(spec.exit_grace)
    session.flush()
    return row


def cluster_spec(row: Cluster) -> ClusterCreate:
    """How a registered cluster is reached, as it was registered; settings stored before they
    existed (NULL) are the defaults."""
    settings = {"node_selector": row.node_selector, "exit_grace": _delta(row.exit_grace_s)}
    return ClusterCreate(
        name=row.name,
        kubeconfig=row.kubeconfig,
        context=row.context,
        in_cluster=row.in_cluster,
        project=row.project.name,
        **{name: value for name, value in settings.items() if value is not None},
    )


def project_row_of(session: Session, name: str) -> Project:
    """Project ``name``'s row; PolicyViolation naming ``project`` when there is none."""
    row = get_project_row(session, name)
    if row is None:
        raise PolicyViolation("project", f"no project named {name!r}; GET /projects lists them")
    return row


def set_cluster_project(session: Session, cluster: str, kind: str, project: str, now: datetime) -> None:
    """Put ``cluster`` (its row made when it has none yet) in ``project``."""
    row = session.scalar(select(Cluster).where(Cluster.name == cluster))
    if row is None:
        row = Cluster(name=cluster, kind=kind, project_id=project_id(session, now), created_at=now)
        session.add(row)
    row.project_id = project_row_of(session, project).id


def unregister_cluster(session: Session, name: str, now: datetime) -> None:
    """Forget how to reach a cluster removed through the API; its row stays (its nodes are referred to),
    back in the default project (a removed cluster holds no project up)."""
    row = session.scalar(select(Cluster).where(Cluster.name == name))
    if row is not None:
        row.registered = False
        row.kubeconfig, row.context, row.in_cluster = None, None, False
        row.node_selector, row.exit_grace_s = None, None
        row.project_id = project_id(session, now)


def bound_cluster(session: Session, gpr_id: int) -> str | None:
    """The cluster of the GPUs the GPR was given (one placement is on one cluster)."""
    query = (
        select(Cluster.name)
        .join(Node, Node.cluster_id == Cluster.id)
        .join(GPU, GPU.node_id == Node.id)
        .join(Allocation, Allocation.gpu_uuid == GPU.uuid)
        .where(Allocation.gpr_id == gpr_id)
        .limit(1)
    )
    return session.scalar(query)


def gprs_on_cluster(session: Session, cluster: str) -> list[int]:
    """GPRs that hold GPUs of the cluster now, or wait for that cluster only."""
    holding = (
        select(GPRRow.id)
        .join(Allocation, Allocation.gpr_id == GPRRow.id)
        .join(GPU, GPU.uuid == Allocation.gpu_uuid)
        .join(Node, Node.id == GPU.node_id)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(Cluster.name == cluster, GPRRow.status.in_([s.value for s in core.HOLDING_STATUSES]))
    )
    waiting = select(GPRRow.id).where(
        GPRRow.cluster == cluster,
        GPRRow.status.in_([core.Status.QUEUED.value, core.Status.PENDING_APPROVAL.value]),
    )
    return sorted(set(session.scalars(holding)) | set(session.scalars(waiting)))


def cluster_users_outside(session: Session, cluster: str, project: str) -> list[str]:
    """What uses ``cluster`` and would not be served were it ``project``'s (core.model.serves): the slices of
    other projects with namespaces there, and their GPRs holding its GPUs or waiting for it only."""
    if project == core.DEFAULT_PROJECT:
        return []
    others = (
        select(Slice.name)
        .join(Project, Slice.project_id == Project.id)
        .join(SliceNamespace, SliceNamespace.slice_id == Slice.id)
        .where(SliceNamespace.cluster == cluster, Project.name != project)
        .distinct()
    )
    found = [f"slice {name}" for name in sorted(session.scalars(others))]
    gprs = gprs_on_cluster(session, cluster)
    if gprs:
        outside = (
            select(GPRRow.id)
            .join(Slice, Slice.name == GPRRow.slice)
            .join(Project, Slice.project_id == Project.id)
            .where(GPRRow.id.in_(gprs), Project.name != project)
        )
        found += [f"GPR {gpr_id}" for gpr_id in sorted(session.scalars(outside))]
    return found


def maintenance_ahead(session: Session, now: datetime) -> tuple[Maintenance, ...]:
    """The nodes' maintenance windows that have not ended by ``now`` (the planner plans around them)."""
    query = select(MaintenanceWindow).where(MaintenanceWindow.end > now).order_by(MaintenanceWindow.start)
    return tuple(Maintenance(m.cluster, m.node, m.start, m.end) for m in session.scalars(query))


def maintenance_under_way(session: Session, now: datetime) -> list[MaintenanceWindow]:
    """The maintenance windows that have started and not ended by ``now``."""
    query = select(MaintenanceWindow).where(MaintenanceWindow.end > now, MaintenanceWindow.start <= now)
    return list(session.scalars(query.order_by(MaintenanceWindow.start)))


def node_maintenance(session: Session, cluster: str, node: str, now: datetime) -> list[MaintenanceWindow]:
    """The node's maintenance windows that have not ended by ``now``, by start."""
    query = select(MaintenanceWindow).where(
        MaintenanceWindow.cluster == cluster, MaintenanceWindow.node == node, MaintenanceWindow.end > now
    )
    return list(session.scalars(query.order_by(MaintenanceWindow.start)))


# Dynamic node pools (core/node_pools.py)


def to_pool(row: NodePoolRow) -> NodePool:
    return NodePool(
        cluster=row.cluster,
        name=row.name,
        shape=core.Shape(row.gpu_model, row.gpu_memory_gb, row.gpus_per_node),
        min_nodes=row.min_nodes,
        max_nodes=row.max_nodes,
        scale_up_delay=timedelta(seconds=row.scale_up_delay_s),
        scale_down_idle=timedelta(seconds=row.scale_down_idle_s),
        provisioning_class=row.provisioning_class,
    )


def pool_row(pool: NodePool, created_by: str, now: datetime) -> NodePoolRow:
    """A new pool's row (``to_pool`` read back), nothing asked of it yet."""
    return NodePoolRow(
        cluster=pool.cluster,
        name=pool.name,
        gpu_model=pool.shape.model,
        gpu_memory_gb=pool.shape.memory_gb,
        gpus_per_node=pool.shape.gpus_per_node,
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        scale_up_delay_s=int(pool.scale_up_delay.total_seconds()),
        scale_down_idle_s=int(pool.scale_down_idle.total_seconds()),
        provisioning_class=pool.provisioning_class,
        target=0,
        created_by=created_by,
        created_at=now,
    )


def pool_state(row: NodePoolRow) -> PoolState:
    return PoolState(row.target, row.asked_at, row.retry_at)


def pool_rows(session: Session, cluster: str | None = None) -> list[NodePoolRow]:
    query = select(NodePoolRow).order_by(NodePoolRow.cluster, NodePoolRow.name)
    if cluster is not None:
        query = query.where(NodePoolRow.cluster == cluster)
    return list(session.scalars(query))


def find_pool(session: Session, cluster: str, name: str) -> NodePoolRow | None:
    return session.scalar(select(NodePoolRow).where(NodePoolRow.cluster == cluster, NodePoolRow.name == name))


def pools(session: Session) -> tuple[tuple[NodePool, PoolState], ...]:
    """Every pool with what was asked of it (the planner counts their joining nodes)."""
    return tuple((to_pool(row), pool_state(row)) for row in pool_rows(session))


def pool_members(session: Session, cluster: str, pool: str) -> list[Node]:
    """The pool's nodes present now, by name."""
    query = (
        select(Node)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(Cluster.name == cluster, Node.pool == pool, Node.present.is_(True))
        .order_by(Node.name)
    )
    return list(session.scalars(query))


def held_pool_nodes(session: Session, cluster: str, pool: str) -> set[str]:
    """The pool's nodes a GPR holds GPUs of now (provisioning, provisioned or releasing)."""
    query = (
        select(Node.name)
        .join(GPU, GPU.node_id == Node.id)
        .join(Allocation, Allocation.gpu_uuid == GPU.uuid)
        .join(GPRRow, GPRRow.id == Allocation.gpr_id)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(
            Cluster.name == cluster,
            Node.pool == pool,
            GPRRow.status.in_([s.value for s in core.HOLDING_STATUSES]),
        )
    )
    return set(session.scalars(query))


def find_node(session: Session, cluster: str, node: str) -> Node | None:
    query = select(Node).join(Cluster, Cluster.id == Node.cluster_id).where(Cluster.name == cluster, Node.name == node)
    return session.scalar(query.options(selectinload(Node.gpus)))


def host_inventory(session: Session, cluster: str, host: str) -> tuple[list[core.Node], list[core.GPU]]:
    """The present planning nodes of machine ``host`` (core/layouts.py) and their present GPUs."""
    query = (
        select(Node)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(Cluster.name == cluster, Node.present.is_(True))
        .where(or_(Node.name == host, Node.name.startswith(f"{host}:", autoescape=True)))
        .options(selectinload(Node.gpus))
        .order_by(Node.name)
    )
    rows = list(session.scalars(query))
    gpus = [
        core.GPU(
            uuid=g.uuid,
            index=g.index,
            node=row.name,
            cluster=cluster,
            model=g.product,
            memory_mib=g.memory_mib,
            declared=g.declared,
            healthy=g.healthy,
            parent=g.parent_uuid,
            profile=g.mig_profile,
        )
        for row in rows
        for g in row.gpus
        if g.present
    ]
    return [to_node(row) for row in rows], gpus


def layout_changes(session: Session, cluster: str, host: str, limit: int = 20) -> list[LayoutChangeRow]:
    """The latest changes of ``host``'s layout, the latest first."""
    query = (
        select(LayoutChangeRow)
        .where(LayoutChangeRow.cluster == cluster, LayoutChangeRow.node == host)
        .order_by(LayoutChangeRow.id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def last_done_layout(changes: list[LayoutChangeRow]) -> dict[str, int] | None:
    """The layout the latest done one of ``changes`` (the latest first) gave; None when none is done."""
    return next((row.mig for row in changes if row.state == "done"), None)


def pending_layout_changes(session: Session) -> list[LayoutChangeRow]:
    """The layout changes not done or failed yet (few: one per node at most), by id."""
    query = select(LayoutChangeRow).where(LayoutChangeRow.state == "pending").order_by(LayoutChangeRow.id)
    return list(session.scalars(query))


def declared_layouts(session: Session, cluster: str) -> dict[str, dict[str, int] | None]:
    """The layout of each node of ``cluster`` its last change not failed gave (a declared inventory
    is re-partitioned in the backend's memory: a restarted service gives it these again)."""
    query = (
        select(LayoutChangeRow)
        .where(LayoutChangeRow.cluster == cluster, LayoutChangeRow.state != "failed")
        .order_by(LayoutChangeRow.id)
    )
    return {row.node: row.mig for row in session.scalars(query)}


def gprs_holding_node(session: Session, cluster: str, node: str) -> list[core.GPR]:
    """The GPRs holding GPUs of the node now."""
    on_node = (
        select(Allocation.gpr_id)
        .join(GPU, GPU.uuid == Allocation.gpu_uuid)
        .join(Node, Node.id == GPU.node_id)
        .join(Cluster, Cluster.id == Node.cluster_id)
        .where(Cluster.name == cluster, Node.name == node)
    )
    query = (
        select(GPRRow)
        .where(GPRRow.id.in_(on_node), GPRRow.status.in_([s.value for s in core.HOLDING_STATUSES]))
        .options(selectinload(GPRRow.allocations))
        .order_by(GPRRow.id)
    )
    return [to_gpr(row) for row in session.scalars(query)]


def _inventory_event(kind: str, cluster: str, node: str, now: datetime, gpu: str | None = None) -> core.Event:
    what = f"GPU {gpu} on node {node}" if gpu else f"node {node}"
    data = {"cluster": cluster, "node": node} | ({"gpu": gpu} if gpu else {})
    return core.Event(kind=kind, actor="inventory", reason=f"{what} in cluster {cluster}", time=now, data=data)


# The planner's snapshot

# Fair-share usage looks back this many half-lives; older use weighs under 0.4%.
USAGE_HALF_LIVES = 8


def gpu_uses(session: Session, since: datetime, now: datetime, slices: Iterable[str] | None = None) -> list[Use]:
    """GPU-equivalents each GPR held over its window, for windows that overlap [since, now).

    A window lasts from its start to when its GPR ended (``ended_at``), or to ``now`` while
    it still holds its GPUs; the GPUs are those it was given, a MIG instance counting as its
    share of a GPU (core/sharing.py). A GPR that was evicted and re-queued counts the window it
    held before as well (its past window).
    """
    query = (
        select(
            GPRRow.id,
            GPRRow.slice,
            GPRRow.window_start,
            GPRRow.ended_at,
            Node.gpu_model,
            GPU.mig_profile,
            Node.replicas,
            func.count(Allocation.gpu_uuid),
        )
        .join(Allocation, Allocation.gpr_id == GPRRow.id)
        .join(GPU, GPU.uuid == Allocation.gpu_uuid)
        .join(Node, Node.id == GPU.node_id)
        .where(
            GPRRow.window_start.is_not(None),
            GPRRow.window_start < now,
            or_(GPRRow.ended_at.is_(None), GPRRow.ended_at > since),
        )
        .group_by(GPRRow.id, GPRRow.slice, GPRRow.window_start, GPRRow.ended_at)
        .group_by(Node.gpu_model, GPU.mig_profile, Node.replicas)
        .order_by(GPRRow.id)
    )
    past = (
        select(GPRRow.slice, GPRPastWindow.window_start, GPRPastWindow.ended_at, GPRPastWindow.gpus)
        .join(GPRRow, GPRRow.id == GPRPastWindow.gpr_id)
        .where(GPRPastWindow.window_start < now, GPRPastWindow.ended_at > since)
        .order_by(GPRPastWindow.id)
    )
    if slices is not None:
        query = query.where(GPRRow.slice.in_(list(slices)))
        past = past.where(GPRRow.slice.in_(list(slices)))
    held: dict[int, Use] = {}
    for gpr_id, name, start, ended, model, profile, replicas, count in session.execute(query):
        gpus = count * float(sharing.equivalents(model, profile, replicas))
        before = held.get(gpr_id)
        held[gpr_id] = Use(name, gpus + (before.gpus if before else 0.0), start, min(ended or now, now))
    past_windows = session.execute(past).all()
    fractions = unit_fractions(session, {g for *_, gpus in past_windows for g in gpus})
    earlier = [
        Use(slice=name, gpus=sum(fractions.get(g, 1.0) for g in gpus), start=start, end=min(ended, now))
        for name, start, ended, gpus in past_windows
    ]
    return list(held.values()) + earlier


def unit_fractions(session: Session, uuids: Iterable[str]) -> dict[str, float]:
    """GPU-equivalents of those of ``uuids`` that are MIG instances or shares of a GPU (core/sharing.py)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return {}
    query = (
        select(GPU.uuid, Node.gpu_model, GPU.mig_profile, Node.replicas)
        .join(Node, Node.id == GPU.node_id)
        .where(GPU.uuid.in_(wanted), or_(GPU.mig_profile.is_not(None), Node.replicas > 1))
    )
    return {u: float(sharing.equivalents(m, p, r)) for u, m, p, r in session.execute(query)}


def planning_inventory(session: Session) -> tuple[tuple[core.Node, ...], frozenset[str]]:
    """The nodes present now, and the GPUs the planner may not give (unhealthy, gone, or on a
    quarantined node)."""
    present = [n for cluster in inventory_rows(session) for n in cluster.nodes if n.present]
    unhealthy = frozenset(session.scalars(select(GPU.uuid).where((GPU.healthy.is_(False)) | (GPU.present.is_(False)))))
    quarantined = {g.uuid for n in present if n.quarantined_at is not None for g in n.gpus}
    return tuple(to_node(n) for n in present), unhealthy | quarantined


def load_snapshot(
    session: Session,
    now: datetime,
    *,
    half_life: timedelta = fairshare.HALF_LIFE,
    previous: Mapping[int, Estimate] | None = None,
) -> Snapshot:
    """What the planner needs at ``now``: inventory, GPRs, policies, each slice's decayed
    usage (fair share, with ``half_life``), and ``previous``, the last plan's estimates."""
    nodes, unhealthy = planning_inventory(session)
    nodes += all_joining(pools(session), nodes, now)
    rows = gpr_rows(
        session,
        statuses=[s.value for s in core.HOLDING_STATUSES] + [core.Status.QUEUED, core.Status.PENDING_APPROVAL],
    )
    bookings, queue, pending = [], [], []
    for row in rows:
        gpr = to_gpr(row)
        if gpr.status.holds_gpus:
            bookings.append(Booking.of(gpr))
        elif gpr.status is core.Status.QUEUED:
            queue.append(Request(gpr.id, gpr.spec, gpr.created_at, frozenset(gpr.avoid_nodes)))
        else:
            pending.append(Request(gpr.id, gpr.spec, gpr.created_at))
    slices = all_slices(session)
    policies = {s.name: slice_policy(s) for s in slices}
    uses = gpu_uses(session, now - USAGE_HALF_LIVES * half_life, now)
    return Snapshot(
        nodes=nodes,
        bookings=tuple(bookings),
        queue=tuple(queue),
        pending=tuple(pending),
        policies=policies,
        unhealthy_gpus=unhealthy,
        usage=fairshare.decayed_usage(uses, now, half_life),
        previous=dict(previous or {}),
        projects={s.name: s.project.name for s in slices},
        project_policies={p.name: to_project(p) for p in all_projects(session)},
        cluster_projects=cluster_projects(session),
        maintenance=maintenance_ahead(session, now),
    )


# The planner's promises (service/planning.py)


def _placement_json(placement: Placement | None) -> dict | None:
    if placement is None:
        return None
    shape = placement.shape
    return {
        "cluster": placement.cluster,
        "shape": {"model": shape.model, "memory_gb": shape.memory_gb, "gpus_per_node": shape.gpus_per_node},
        "nodes": list(placement.nodes),
        "gpus": list(placement.gpus),
        "count": placement.count,
    }


def _placement(data: dict | None) -> Placement | None:
    if data is None:
        return None
    return Placement(
        cluster=data["cluster"],
        shape=core.Shape(**data["shape"]),
        nodes=tuple(data["nodes"]),
        gpus=tuple(data["gpus"]),
        count=data["count"],
    )


def load_promises(session: Session) -> list[tuple[Estimate, int, datetime | None]]:
    """Every stored promise as (estimate, band, first start)."""
    return [
        (Estimate(r.gpr_id, r.position, r.start, r.end, _placement(r.placement)), r.band, r.first_start)
        for r in session.scalars(select(PromiseRow).order_by(PromiseRow.gpr_id))
    ]


def last_moves(session: Session) -> dict[int, datetime]:
    """For each GPR with a promise, the start its last ``estimate-moved`` event moved it to (where it had one)."""
    moved = (
        select(EventRow.gpr_id, EventRow.data)
        .join(PromiseRow, PromiseRow.gpr_id == EventRow.gpr_id)
        .where(EventRow.kind == ESTIMATE_MOVED)
        .order_by(EventRow.id)
    )
    return {gpr_id: datetime.fromisoformat(data["to"]) for gpr_id, data in session.execute(moved)}


def save_promises(
    session: Session, changed: Mapping[int, tuple[Estimate, int, datetime | None]], gone: Iterable[int]
) -> None:
    """Write the ``changed`` promises (GPR id -> (estimate, band, first start)); delete the ``gone`` ones."""
    replaced = [*gone, *changed]
    if replaced:
        session.execute(delete(PromiseRow).where(PromiseRow.gpr_id.in_(replaced)))
    if changed:  # many rows at once: no ORM object per row (a plan pass may change thousands)
        rows = [
            {
                "gpr_id": gpr_id,
                "position": estimate.position,
                "start": estimate.start,
                "end": estimate.end,
                "placement": _placement_json(estimate.placement),
                "band": band,
                "first_start": first_start,
            }
            for gpr_id, (estimate, band, first_start) in changed.items()
        ]
        session.execute(insert(PromiseRow), rows)


# Servers started in slices


def record_server(
    session: Session, user: str, server_name: str, slice_name: str, gpus: list[str], now: datetime
) -> None:
    row = session.scalar(select(Server).where(Server.user == user, Server.server_name == server_name))
    if row is None:
        row = Server(user=user, server_name=server_name)
        session.add(row)
    row.slice = slice_name
    row.gpus = list(gpus)
    row.started_at = now


def forget_server(session: Session, user: str, server_name: str) -> None:
    session.execute(delete(Server).where(Server.user == user, Server.server_name == server_name))


def servers_holding(session: Session, gpus: Iterable[str]) -> list[Server]:
    """Servers that were started with any of these GPUs."""
    wanted = set(gpus)
    return [s for s in session.scalars(select(Server).order_by(Server.id)) if wanted & set(s.gpus)]


def slice_servers(session: Session, slice_name: str) -> list[Server]:
    return list(session.scalars(select(Server).where(Server.slice == slice_name).order_by(Server.id)))


# GPU alerts


def add_alert(session: Session, alert: Alert, cluster: str | None, holder: tuple[str, int] | None) -> AlertRow:
    slice_name, gpr_id = holder or (None, None)
    row = AlertRow(
        kind=alert.kind.value,
        gpu_uuid=alert.uuid,
        node=alert.node,
        cluster=cluster,
        slice=slice_name,
        gpr_id=gpr_id,
        message=alert.message,
        value=alert.value,
        threshold=alert.threshold,
        raised_at=alert.raised_at,
    )
    session.add(row)
    session.flush()
    return row


def clear_alert(session: Session, alert: Alert, now: datetime) -> AlertRow | None:
    """Mark the active alert of this GPU and kind cleared; None when none is active."""
    row = session.scalar(
        select(AlertRow).where(
            AlertRow.gpu_uuid == alert.uuid, AlertRow.kind == alert.kind.value, AlertRow.cleared_at.is_(None)
        )
    )
    if row is not None:
        row.cleared_at = now
    return row


def active_alert_rows(session: Session) -> list[AlertRow]:
    return list(session.scalars(select(AlertRow).where(AlertRow.cleared_at.is_(None)).order_by(AlertRow.id)))


def alert_rows(
    session: Session,
    *,
    slices: Iterable[str] | None,
    since: datetime | None,
    active: bool | None,
    limit: int,
    before: tuple[datetime, int] | None = None,
) -> list[AlertRow]:
    """Newest first, (raised_at, id) descending; ``before``: only those after that key in this
    order (keyset pages). ``since``: those active at some time from then on. ``slices`` None:
    every alert, also on GPUs nobody held."""
    query = select(AlertRow).order_by(AlertRow.raised_at.desc(), AlertRow.id.desc()).limit(limit)
    if before is not None:
        raised_at, alert_id = before
        query = query.where(
            or_(AlertRow.raised_at < raised_at, and_(AlertRow.raised_at == raised_at, AlertRow.id < alert_id))
        )
    if slices is not None:
        query = query.where(AlertRow.slice.in_(list(slices)))
    if since is not None:
        query = query.where(or_(AlertRow.cleared_at.is_(None), AlertRow.cleared_at >= since))
    if active is not None:
        query = query.where(AlertRow.cleared_at.is_(None) if active else AlertRow.cleared_at.is_not(None))
    return list(session.scalars(query))


# GPRs made from GPR custom resources


def link_gpr_resource(
    session: Session, gpr_id: int, cluster: str, namespace: str, name: str, uid: str, generation: int | None
) -> GPRResource:
    row = GPRResource(gpr_id=gpr_id, cluster=cluster, namespace=namespace, name=name, uid=uid, generation=generation)
    session.add(row)
    return row


def gpr_resource_links(session: Session, cluster: str) -> list[GPRResource]:
    """Every GPR resource link on the cluster, gone ones too (so a resource is never made a GPR twice)."""
    query = select(GPRResource).where(GPRResource.cluster == cluster).options(selectinload(GPRResource.gpr))
    return list(session.scalars(query.order_by(GPRResource.gpr_id)))


def live_gpr_resource(session: Session, gpr_id: int) -> GPRResource | None:
    """The resource a GPR was made from, while it exists."""
    row = session.get(GPRResource, gpr_id)
    return row if row is not None and row.deleted_at is None else None


def last_gpr_change(session: Session) -> tuple[int, datetime | None]:
    """How many GPRs there are and when one last changed: a cheap sign that GPR views may differ."""
    count, latest = session.execute(select(func.count(GPRRow.id), func.max(GPRRow.updated_at))).one()
    return count, latest
