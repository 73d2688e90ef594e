"""SQLAlchemy 2 tables of egs-hub.

Vocabulary as in DESIGN.md. Two tables carry invariants in the database itself:
``bindings`` has one row per GPU (a GPU is bound to at most one slice at any
instant); ``allocations`` keeps which GPUs each GPR had, for the schedule.
GPRs and events name their slice by name, so history outlives a deleted slice.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from ..core.model import DEFAULT_HOME_VOLUME_SIZE

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes in, aware UTC datetimes out; naive UTC in the column."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: egs-hub stores aware UTC times")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Project(Base):
    """The top tenant (DESIGN.md): it holds clusters and slices. Its admins are the members of hub
    group ``admin_group``; its quota caps the sum of its slices (core.model.Project)."""

    __tablename__ = "projects"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    display_name: Mapped[str] = mapped_column(String(100), default="", server_default="")
    admin_group: Mapped[str | None] = mapped_column(String(255), nullable=True)
    owns_group: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    max_gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_gpu_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_cost_month: Mapped[float | None] = mapped_column(Float, nullable=True)
    share: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Cluster(Base):
    """A place with GPUs. ``registered``: added through the API (POST /clusters), reached by
    ``kubeconfig`` and ``context`` or ``in_cluster``; the service connects to it at every start
    until it is removed. The local host and clusters from config are not registered here."""

    __tablename__ = "clusters"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    name: Mapped[str] = mapped_column(String(63), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    registered: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    kubeconfig: Mapped[str | None] = mapped_column(Text, nullable=True)
    context: Mapped[str | None] = mapped_column(String(253), nullable=True)
    in_cluster: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # settings of a registered cluster (core.requests.ClusterCreate); NULL: the default
    node_selector: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    exit_grace_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # the checklist of its nodes (core.requests.CheckSpec as JSON); NULL: core.checks.DEFAULT_CHECKLIST
    checks: Mapped[list | None] = mapped_column(JSON, nullable=True)
    nodes: Mapped[list[Node]] = relationship(back_populates="cluster", order_by="Node.name")
    project: Mapped[Project] = relationship(lazy="joined")


class Node(Base):
    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("cluster_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(253))
    gpu_model: Mapped[str] = mapped_column(String(64))
    gpu_memory_gb: Mapped[int] = mapped_column(Integer)
    gpus_per_node: Mapped[int] = mapped_column(Integer)
    mig_profile: Mapped[str | None] = mapped_column(String(32), nullable=True)  # its units' (core/sharing.py)
    replicas: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # shares of a time-sliced GPU
    schedulable: Mapped[bool] = mapped_column(Boolean, default=True)
    declared: Mapped[bool] = mapped_column(Boolean, default=False)
    present: Mapped[bool] = mapped_column(Boolean, default=True)
    # bound to one GPR at a time (core.model.Node.whole)
    whole: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # quarantined (core/checks.py): not planned on until cleared; why, and since when
    quarantined_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    quarantine_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the dynamic node pool it joined from (core/node_pools.py), and since when no GPR holds it
    pool: Mapped[str | None] = mapped_column(String(63), nullable=True)
    idle_since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    cluster: Mapped[Cluster] = relationship(back_populates="nodes")
    gpus: Mapped[list[GPU]] = relationship(back_populates="node", order_by="GPU.index")


class GPU(Base):
    __tablename__ = "gpus"
    uuid: Mapped[str] = mapped_column(String(96), primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    product: Mapped[str] = mapped_column(String(128))
    memory_mib: Mapped[int] = mapped_column(Integer)
    # a MIG instance: the GPU it is part of, and its profile
    parent_uuid: Mapped[str | None] = mapped_column(String(96), nullable=True)
    mig_profile: Mapped[str | None] = mapped_column(String(32), nullable=True)
    declared: Mapped[bool] = mapped_column(Boolean, default=False)
    healthy: Mapped[bool] = mapped_column(Boolean, default=True)
    present: Mapped[bool] = mapped_column(Boolean, default=True)
    node: Mapped[Node] = relationship(back_populates="gpus")


class Slice(Base):
    __tablename__ = "slices"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    name: Mapped[str] = mapped_column(String(63), unique=True)
    display_name: Mapped[str] = mapped_column(String(100), default="")
    group_name: Mapped[str] = mapped_column(String(255))
    owns_group: Mapped[bool] = mapped_column(Boolean, default=False)
    # quota
    max_gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_gpu_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_cost_month: Mapped[float | None] = mapped_column(Float, nullable=True)
    # policy
    max_duration_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_priority: Mapped[int] = mapped_column(Integer)
    auto_approve_max_gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_active_gprs: Mapped[int] = mapped_column(Integer)
    restart_servers: Mapped[bool] = mapped_column(Boolean, default=False)
    # server defaults: what slices made before migration 0002 get
    reject_over_limits: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    eviction: Mapped[str] = mapped_column(String(16), default="confirm", server_default="confirm")
    requeue_evicted: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    share: Mapped[float | None] = mapped_column(Float, nullable=True)
    idle_timeout_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_idle_timeout_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    bind_failure: Mapped[str] = mapped_column(String(16), default="fail", server_default="fail")
    remediation: Mapped[str] = mapped_column(String(16), default="replace", server_default="replace")
    maintenance_crossing: Mapped[str] = mapped_column(String(16), default="ask", server_default="ask")
    auto_gpr: Mapped[str | None] = mapped_column(String(63), nullable=True)
    home_volume_size: Mapped[str | None] = mapped_column(
        String(32), nullable=True, default=DEFAULT_HOME_VOLUME_SIZE, server_default=DEFAULT_HOME_VOLUME_SIZE
    )
    home_volume_class: Mapped[str | None] = mapped_column(String(253), nullable=True)
    gpu_sharing: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    project: Mapped[Project] = relationship(lazy="joined")
    namespaces: Mapped[list[SliceNamespace]] = relationship(
        back_populates="slice",
        cascade="all, delete-orphan",
        # Per cluster in the order given: the first is the slice's home namespace there.
        order_by="(SliceNamespace.cluster, SliceNamespace.id)",
    )


class SliceNamespace(Base):
    __tablename__ = "slice_namespaces"
    __table_args__ = (UniqueConstraint("cluster", "namespace"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slice_id: Mapped[int] = mapped_column(ForeignKey("slices.id", ondelete="CASCADE"), index=True)
    cluster: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(63))
    slice: Mapped[Slice] = relationship(back_populates="namespaces")


class GPRRow(Base):
    __tablename__ = "gprs"
    # window_start: the GPRs that held GPUs within a period (GET /usage)
    __table_args__ = (Index("ix_gprs_status_slice", "status", "slice"), Index("ix_gprs_window_start", "window_start"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    slice: Mapped[str] = mapped_column(String(63))
    requested_by: Mapped[str] = mapped_column(String(255))
    cluster: Mapped[str | None] = mapped_column(String(100), nullable=True)
    shape: Mapped[str | None] = mapped_column(String(100), nullable=True)
    gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    nodes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    priority: Mapped[int] = mapped_column(Integer)
    duration_s: Mapped[int] = mapped_column(Integer)
    start_after: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    idle_timeout_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    preemptible: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(32))
    status_reason: Mapped[str] = mapped_column(Text, default="")
    window_start: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    window_end: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    end_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    template: Mapped[str | None] = mapped_column(String(63), nullable=True)
    gpu_share: Mapped[float | None] = mapped_column(Float, nullable=True)  # a share of a time-sliced GPU
    price_per_gpu_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    # [cluster, node] pairs that failed this GPR's pre-checks (core.model.GPR.avoid_nodes)
    avoid_nodes: Mapped[list] = mapped_column(JSON, default=list, server_default="[]")
    # [failed node, node, ISO time] of each node replaced during its window (core.model.GPR.replaced)
    replaced: Mapped[list] = mapped_column(JSON, default=list, server_default="[]")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    allocations: Mapped[list[Allocation]] = relationship(cascade="all, delete-orphan", order_by="Allocation.position")


class GPRTemplateRow(Base):
    """A GPR template (core/templates.py). ``project``/``slice`` name its scope (both NULL: global);
    a slice's templates go with it."""

    __tablename__ = "gpr_templates"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="")
    project: Mapped[str | None] = mapped_column(String(63), nullable=True, index=True)
    slice: Mapped[str | None] = mapped_column(String(63), nullable=True, index=True)
    cluster: Mapped[str | None] = mapped_column(String(100), nullable=True)
    shape: Mapped[str | None] = mapped_column(String(100), nullable=True)
    gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    nodes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    duration_s: Mapped[int] = mapped_column(Integer)
    priority: Mapped[int | None] = mapped_column(Integer, nullable=True)
    idle_timeout_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    preemptible: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    created_by: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Price(Base):
    """An admin's price per GPU-hour of one shape (as /inventory names it) on one cluster (core/cost.py)."""

    __tablename__ = "prices"
    cluster: Mapped[str] = mapped_column(String(63), primary_key=True)
    shape: Mapped[str] = mapped_column(String(100), primary_key=True)
    price_per_gpu_hour: Mapped[float] = mapped_column(Float)


class GPRUtilization(Base):
    """The utilisation readings of a GPR's bound GPUs, summed per UTC day: the mean utilisation of
    what it held (GET /usage) outlives the service's in-memory history."""

    __tablename__ = "gpr_utilization"
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id", ondelete="CASCADE"), primary_key=True)
    day: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    total: Mapped[float] = mapped_column(Float)
    readings: Mapped[int] = mapped_column(Integer)


class GPRPastWindow(Base):
    """A window an evicted GPR held before it was queued again (its row then holds the next window):
    what it held (``gpus``), from ``window_start`` until it was taken back (``ended_at``), at its price.
    Usage, cost and budgets count it as they count the GPR's current window."""

    __tablename__ = "gpr_past_windows"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id", ondelete="CASCADE"), index=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    ended_at: Mapped[datetime] = mapped_column(UTCDateTime)
    gpus: Mapped[list] = mapped_column(JSON, default=list)
    price_per_gpu_hour: Mapped[float | None] = mapped_column(Float, nullable=True)


class MaintenanceWindow(Base):
    """A node out of service from ``start`` to ``end`` (an admin's), which the planner plans around."""

    __tablename__ = "maintenance_windows"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63))
    node: Mapped[str] = mapped_column(String(253))
    start: Mapped[datetime] = mapped_column(UTCDateTime)
    end: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    __table_args__ = (Index("ix_maintenance_windows_cluster_node", "cluster", "node"),)


class LayoutChangeRow(Base):
    """A change of a node's MIG layout (core/layouts.py): ``mig`` the instances per GPU by profile
    (NULL: whole GPUs), ``state`` pending, done or failed, ``message`` the backend's last word."""

    __tablename__ = "layout_changes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63))
    node: Mapped[str] = mapped_column(String(253))
    mig: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    mig_config: Mapped[str | None] = mapped_column(String(63), nullable=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    message: Mapped[str] = mapped_column(Text, default="")
    reason: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ready_by: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    __table_args__ = (Index("ix_layout_changes_cluster_node", "cluster", "node"),)


class NodePoolRow(Base):
    """A dynamic node pool of a cluster (core.node_pools.NodePool) and what egs-hub asked of it
    (core.node_pools.PoolState); ``last_error``: why the last ask failed."""

    __tablename__ = "node_pools"
    __table_args__ = (UniqueConstraint("cluster", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(63))
    gpu_model: Mapped[str] = mapped_column(String(64))
    gpu_memory_gb: Mapped[int] = mapped_column(Integer)
    gpus_per_node: Mapped[int] = mapped_column(Integer)
    min_nodes: Mapped[int] = mapped_column(Integer)
    max_nodes: Mapped[int] = mapped_column(Integer)
    scale_up_delay_s: Mapped[int] = mapped_column(Integer)
    scale_down_idle_s: Mapped[int] = mapped_column(Integer)
    provisioning_class: Mapped[str] = mapped_column(String(100))
    target: Mapped[int] = mapped_column(Integer, default=0)
    asked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_by: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class CheckRun(Base):
    """One check of a node's checklist run for one phase (core/checks.py): for a GPR's entry or exit,
    or (``gpr_id`` NULL) when an admin asked for the node's checks."""

    __tablename__ = "check_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gpr_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    cluster: Mapped[str] = mapped_column(String(63))
    node: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(16))
    phase: Mapped[str] = mapped_column(String(8))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    values: Mapped[dict] = mapped_column(JSON, default=dict)
    log: Mapped[str] = mapped_column(Text, default="")
    __table_args__ = (Index("ix_check_runs_cluster_node", "cluster", "node"),)


class LastCheckRun(Base):
    """The last run of each check of each node, per phase (GET /nodes reads these, not every run); apart
    from ``nodes`` so that recording a run changes nothing the planning state reads."""

    __tablename__ = "last_check_runs"
    cluster: Mapped[str] = mapped_column(String(63), primary_key=True)
    node: Mapped[str] = mapped_column(String(253), primary_key=True)
    phase: Mapped[str] = mapped_column(String(8), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    run_id: Mapped[int] = mapped_column(Integer)


class WorkspaceRequestRow(Base):
    """A user's request for a new workspace (slice) in a project, and what a project admin decided:
    ``status`` pending, approved (``slice`` is the slice made) or denied (``reason``)."""

    __tablename__ = "workspace_requests"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(String(63), index=True)
    name: Mapped[str] = mapped_column(String(63))
    display_name: Mapped[str] = mapped_column(String(100), default="")
    purpose: Mapped[str] = mapped_column(Text, default="")
    members: Mapped[list] = mapped_column(JSON, default=list)
    quota: Mapped[dict] = mapped_column(JSON, default=dict)
    clusters: Mapped[list] = mapped_column(JSON, default=list)
    requested_by: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    decided_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    slice: Mapped[str | None] = mapped_column(String(63), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class GPRResource(Base):
    """The GPR custom resource a GPR was made from (kubectl apply), by its uid: a resource already
    linked is never made a GPR again. ``generation``: the resource's generation it was read at;
    ``deleted_at``: when the resource went (or was deleted) and its GPR was ended for it."""

    __tablename__ = "gpr_resources"
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id", ondelete="CASCADE"), primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63), index=True)
    namespace: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    uid: Mapped[str] = mapped_column(String(64), unique=True)
    generation: Mapped[int | None] = mapped_column(Integer, nullable=True)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    gpr: Mapped[GPRRow] = relationship()


class Allocation(Base):
    """The GPUs a GPR was given, in placement order; kept after it ends."""

    __tablename__ = "allocations"
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id", ondelete="CASCADE"), primary_key=True)
    gpu_uuid: Mapped[str] = mapped_column(ForeignKey("gpus.uuid"), primary_key=True)
    node: Mapped[str] = mapped_column(String(253))
    position: Mapped[int] = mapped_column(Integer)


class Binding(Base):
    """A GPU bound to a slice now; one row per GPU at most."""

    __tablename__ = "bindings"
    gpu_uuid: Mapped[str] = mapped_column(ForeignKey("gpus.uuid"), primary_key=True)
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id"), index=True)
    slice: Mapped[str] = mapped_column(String(63), index=True)


class Server(Base):
    """A user's server started inside a slice, and the GPUs it was given."""

    __tablename__ = "servers"
    __table_args__ = (UniqueConstraint("user", "server_name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user: Mapped[str] = mapped_column(String(255))
    server_name: Mapped[str] = mapped_column(String(255), default="")
    slice: Mapped[str] = mapped_column(String(63), index=True)
    gpus: Mapped[list] = mapped_column(JSON, default=list)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)


class EventRow(Base):
    __tablename__ = "events"
    # (time, id): the order GET /events pages on (keyset, service/cursors.py).
    __table_args__ = (Index("ix_events_slice_time", "slice", "time"), Index("ix_events_time_id", "time", "id"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    time: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(64))
    actor: Mapped[str] = mapped_column(String(255))
    reason: Mapped[str] = mapped_column(Text, default="")
    gpr_id: Mapped[int | None] = mapped_column(ForeignKey("gprs.id"), nullable=True, index=True)
    slice: Mapped[str | None] = mapped_column(String(63), nullable=True)
    from_status: Mapped[str | None] = mapped_column(String(32), nullable=True)
    to_status: Mapped[str | None] = mapped_column(String(32), nullable=True)
    data: Mapped[dict] = mapped_column(JSON, default=dict)


class AlertRow(Base):
    """A GPU alert: raised when a reading crossed its threshold, cleared when it came back.

    ``slice``/``gpr_id`` name who held the GPU when the alert was raised (None: nobody).
    """

    __tablename__ = "alerts"
    # (raised_at, id): the order GET /alerts pages on (keyset, service/cursors.py).
    __table_args__ = (
        Index("ix_alerts_slice_raised", "slice", "raised_at"),
        Index("ix_alerts_raised_at_id", "raised_at", "id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    gpu_uuid: Mapped[str] = mapped_column(String(96), index=True)
    node: Mapped[str | None] = mapped_column(String(253), nullable=True)
    cluster: Mapped[str | None] = mapped_column(String(63), nullable=True)
    slice: Mapped[str | None] = mapped_column(String(63), nullable=True)
    gpr_id: Mapped[int | None] = mapped_column(ForeignKey("gprs.id"), nullable=True)
    message: Mapped[str] = mapped_column(Text)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
    raised_at: Mapped[datetime] = mapped_column(UTCDateTime)
    cleared_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class PromiseRow(Base):
    """The last plan's estimate for a queued GPR (service/planning.py's promises), so that a
    restarted service keeps the estimates it gave. ``band`` is the GPR's priority band when
    planned; ``first_start`` the first start ever estimated for it (estimate-error metric)."""

    __tablename__ = "promises"
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    start: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    end: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    placement: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    band: Mapped[int] = mapped_column(Integer)
    first_start: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SliceLeftover(Base):
    """A slice's setup left on a cluster that was not registered when the slice, or its namespaces
    there, went (``DELETE /slices``, ``PATCH /slices``): service/slice_setup.py removes it there
    once the cluster is registered again, and then this row."""

    __tablename__ = "slice_leftovers"
    slice: Mapped[str] = mapped_column(String(63), primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63), primary_key=True)


class LeaderRow(Base):
    """The replica of the service that plans, binds and serves (service/leadership.py): one row.
    ``term`` counts the leaders there have been; a write of a replica whose term is not this one
    is refused (the fence), so a replica that lost its lock without knowing writes nothing.
    ``url`` is where the leader serves, for the standbys that forward to it."""

    __tablename__ = "leader"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term: Mapped[int] = mapped_column(Integer)
    url: Mapped[str] = mapped_column(String(2048))
    holder: Mapped[str] = mapped_column(String(255))
    since: Mapped[datetime] = mapped_column(UTCDateTime)


class EndpointRow(Base):
    """An inference endpoint (core/endpoints.py): ``spec`` what a member asked (store/endpoints.py reads
    and writes it), ``wanted`` the replicas it wants now; ``hold_*`` a member's scale while it lasts;
    ``last_request`` the last request at its proxy path; ``problem`` why it failed (a refused GPR,
    servers that keep exiting), ``refused_at`` when a GPR for it was last refused."""

    __tablename__ = "endpoints"
    __table_args__ = (UniqueConstraint("slice", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slice: Mapped[str] = mapped_column(String(63), ForeignKey("slices.name"))
    name: Mapped[str] = mapped_column(String(63))
    runtime: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict] = mapped_column(JSON)
    wanted: Mapped[int] = mapped_column(Integer, default=0)
    hold_replicas: Mapped[int | None] = mapped_column(Integer, nullable=True)
    hold_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_request: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    problem: Mapped[str | None] = mapped_column(Text, nullable=True)
    refused_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_by: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime)


class EndpointReplicaRow(Base):
    """The GPR of one replica of an endpoint; ``renews``: the GPR whose window ending it replaces."""

    __tablename__ = "endpoint_replicas"
    gpr_id: Mapped[int] = mapped_column(ForeignKey("gprs.id"), primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"), index=True)
    renews: Mapped[int | None] = mapped_column(Integer, nullable=True)


class IdempotencyKeyRow(Base):
    """An ``Idempotency-Key`` a create was sent with (service/idempotency.py), written in the transaction of
    what the create wrote, so that a create committed before a crash is found by its retry: the caller
    (``caller_kind`` user or service, and its name) sent ``key`` to ``operation`` (``POST /gprs``) with a body
    whose SHA-256 is ``fingerprint``, and it made the resource whose id is ``made``. The unique key is what
    lets only one of two concurrent creates with one key commit. Kept at least a day (``created_at``)."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("caller_kind", "caller", "key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    caller_kind: Mapped[str] = mapped_column(String(16))
    caller: Mapped[str] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(255))
    operation: Mapped[str] = mapped_column(String(32))
    fingerprint: Mapped[str] = mapped_column(String(64))
    made: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
