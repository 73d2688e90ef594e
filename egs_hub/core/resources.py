"""What the REST API answers, as pydantic models: one definition per resource.

The service builds its answers from these models (and writes them with pydantic,
``model_dump_json(by_alias=True)``), the OpenAPI document takes their schemas (``resource_schemas``), and the client
decodes the service's answers into them, so a field added here reaches all three.
Vocabulary as in DESIGN.md: a *slice* (workspace), a *GPR* (GPU Provision Request),
a GPU *shape*, a *window*, an *estimated start*.

On the wire times are ISO-8601 UTC with ``Z`` and durations whole seconds; in Python
they are aware UTC ``datetime``s and ``timedelta``s. A field the service leaves null
is None. A model keeps fields newer than itself (pydantic's ``model_extra``), so an
older client still sees what a newer service added.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema
from pydantic.json_schema import models_json_schema

from .endpoints import REPLICA_STATES, RUNTIMES
from .endpoints import STATUSES as ENDPOINT_STATUSES
from .model import (
    BIND_FAILURES,
    EVICTION_MODES,
    MAINTENANCE_CROSSINGS,
    PRIORITY_MAX,
    PRIORITY_MIN,
    REMEDIATIONS,
    EndReason,
    Status,
)
from .units import format_time
from .usage import GROUPS, PERIODS


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


Time = Annotated[
    datetime,
    AfterValidator(_utc),
    PlainSerializer(format_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
Seconds = Annotated[
    timedelta,
    PlainSerializer(lambda value: int(value.total_seconds()), return_type=int, when_used="json"),
    WithJsonSchema({"type": "integer", "description": "seconds"}),
]
FractionalSeconds = Annotated[
    timedelta,
    PlainSerializer(lambda value: value.total_seconds(), return_type=float, when_used="json"),
    WithJsonSchema({"type": "number", "description": "seconds"}),
]
Names = tuple[str, ...]
if TYPE_CHECKING:  # Literals of the enums' values, which type checkers cannot read from the enums
    StatusName = str
    EndReasonName = str
else:
    StatusName = Literal[tuple(s.value for s in Status)]
    EndReasonName = Literal[tuple(r.value for r in EndReason)]
ClusterHealth = Literal["ok", "unavailable"]
CLUSTER_ORIGINS = ("local", "config", "api")
BANDS = ("low", "medium", "high")
ALERT_KINDS = ("temperature", "power", "memory-full", "ecc", "xid", "gpu-lost")
WORKLOAD_KINDS = ("server", "pod", "process")
WINDOW_STATES = ("past", "current", "planned")


class Resource(BaseModel):
    """An answer of the API (or a part of one): immutable. A client keeps fields newer than the
    model (``extra="allow"``); the document says the service writes no others."""

    model_config = ConfigDict(
        frozen=True, extra="allow", populate_by_name=True, json_schema_extra={"additionalProperties": False}
    )


# errors and health


class Error(Resource):
    """Every 4xx and 5xx answer: the status again, a sentence, and the input field at fault if one is."""

    status: int
    message: str
    field: str | None = Field(None, description="the request's field (body key or parameter) at fault")


class Health(Resource):
    """The service's liveness and database check, and which replica answered."""

    status: str
    version: str | None = None
    database: str
    role: Literal["leader", "standby"] = Field(
        description="leader: this replica plans and answers; standby: it forwards to the leader"
    )
    leader: str | None = Field(None, description="a standby's: where the leader serves")


# slices


class Quota(Resource):
    max_gpus: int | None
    max_gpu_hours: float | None = Field(description="GPU-hours per rolling week")
    max_cost_month: float | None = Field(description="cost per calendar month (UTC) at the prices")


class SlicePolicy(Resource):
    max_duration: Seconds | None
    max_priority: int
    auto_approve_max_gpus: int | None
    max_active_gprs: int
    restart_servers: bool
    reject_over_limits: bool
    eviction: Literal[EVICTION_MODES]  # type: ignore[valid-type]
    requeue_evicted: bool
    share: float | None = Field(description="fair-share weight; null: max_gpus, else 1")
    idle_timeout: Seconds | None = Field(description="default idle timeout of its GPRs")
    max_idle_timeout: Seconds | None = Field(description="longest idle timeout members ask")
    bind_failure: Literal[BIND_FAILURES]  # type: ignore[valid-type]
    remediation: Literal[REMEDIATIONS]  # type: ignore[valid-type]
    maintenance_crossing: Literal[MAINTENANCE_CROSSINGS]  # type: ignore[valid-type]
    auto_gpr: str | None = Field(description="template of the GPR filed when a server asks for GPUs the slice lacks")
    home_volume_size: str | None = Field(description="Kubernetes: each member's home volume; null: none")
    home_volume_class: str | None = Field(description="its storage class; null: the cluster's default")
    gpu_sharing: bool = Field(description="members may ask for a share of a time-sliced GPU (gpu_share)")


class Usage(Resource):
    gpu_hours_week: float = Field(description="GPU-hours used in the rolling week")
    decayed_gpu_hours: float = Field(description="GPU-hours used, each weighed down by its age (fair-share half-life)")
    fair_share_factor: float = Field(
        description="in (0, 1], among its project's slices: 1 used nothing lately, 1/2 used its share; "
        "higher is served first within a band and project"
    )
    project_fair_share_factor: float = Field(
        description="its project's, among projects: a higher one is served first within a band, before the slice's"
    )


class Slice(Resource):
    name: str
    display_name: str
    project: str = Field(description="the project it belongs to")
    group: str
    members: Names
    quota: Quota
    policy: SlicePolicy
    usage: Usage
    namespaces: dict[str, Names] = Field(description="per cluster, the slice's namespaces there (home first)")
    gpus: Names = Field(description="GPU UUIDs the slice's servers may use now")
    created_at: Time
    updated_at: Time


class Slices(Resource):
    slices: tuple[Slice, ...]


class Project(Resource):
    """A project: its slices and clusters, its admins (the members of hub group ``admin_group``) and a
    quota over the sum of its slices."""

    name: str
    display_name: str
    admin_group: str | None = Field(description="hub group whose members are its admins")
    admins: Names
    quota: Quota = Field(description="caps the sum of its slices")
    share: float | None = Field(description="fair-share weight among projects; null: max_gpus, else 1")
    slices: Names
    clusters: Names = Field(description="the clusters it holds: only its slices are planned there (the default's: all)")
    created_at: Time
    updated_at: Time | None


class Projects(Resource):
    projects: tuple[Project, ...]


class WorkspaceRequest(Resource):
    """A user's request for a new workspace in a project; its admins approve (the slice is made) or deny it."""

    id: int
    project: str
    name: str
    display_name: str
    purpose: str
    members: Names
    quota: Quota
    clusters: Names
    requested_by: str
    status: Literal[("pending", "approved", "denied")]  # type: ignore[valid-type]
    reason: str = Field(description="the decision's reason")
    decided_by: str | None
    decided_at: Time | None
    slice: str | None = Field(description="approved: the workspace made")
    created_at: Time


class WorkspaceRequests(Resource):
    workspace_requests: tuple[WorkspaceRequest, ...]


class SliceKubeconfig(Resource):
    """A kubeconfig for a slice's ServiceAccount on ``cluster``, valid until ``expires_at``."""

    slice: str
    cluster: str
    namespace: str = Field(description="the slice's home namespace there (current context)")
    expires_at: Time
    kubeconfig: str = Field(description="YAML: one context per namespace of the slice")


# clusters and inventory


class Cluster(Resource):
    """A registered cluster, whether it answers, and its size."""

    name: str
    kind: str = Field(description="local or kubernetes")
    origin: Literal[CLUSTER_ORIGINS] = Field(  # type: ignore[valid-type]
        description="this host, EGSService.clusters in the config, or POST /clusters"
    )
    where: str = Field(description="how the service reaches it")
    project: str = Field(description="the project holding it (the default project's serve every project)")
    health: ClusterHealth
    message: str | None = Field(description="why it is unavailable")
    source: str = Field(description="what its last inventory said")
    nodes: int = Field(description="nodes with GPUs present now")
    gpus: int
    node_selector: str | None = Field(description="Kubernetes: label selector of the nodes it manages")
    exit_grace: Seconds | None = Field(description="Kubernetes: seconds a slice's pods get to leave a node")


class Clusters(Resource):
    clusters: tuple[Cluster, ...]


class RoleTemplate(Resource):
    name: str
    builtin: bool = Field(description="one of egs-hub's own (deployment, reader), unchanged")
    rules: tuple[dict[str, Any], ...] = Field(description="RBAC PolicyRules of the Role")
    subjects: tuple[dict[str, Any], ...] = Field(description="of the RoleBinding")


class RoleTemplates(Resource):
    role_templates: tuple[RoleTemplate, ...]


class Shape(Resource):
    """What a node offers; a MIG shape's units are instances of ``mig_profile`` (core/sharing.py)."""

    name: str
    model: str
    memory_gb: int
    gpus_per_node: int = Field(description="units per node: GPUs, or MIG instances of a MIG shape")
    mig_profile: str | None = Field(description='the MIG profile of its units ("1g.10gb"); null: whole GPUs')
    gpu_equivalents: float = Field(description="what one unit counts as in quotas and GPU-hours: 1, or 1/7 for a 1g")
    replicas: int = Field(description="a time-sliced shape: the shares each GPU is split into (its units); else 1")


class InventoryGPU(Resource):
    uuid: str
    index: int
    product: str
    memory_mib: int
    declared: bool
    healthy: bool
    parent_uuid: str | None = Field(description="a MIG instance: the UUID of the GPU it is part of")
    mig_profile: str | None = Field(description="a MIG instance: its profile")
    bound: bool = Field(description="bound to a GPR now (whether or not the caller may see which)")
    slice: str | None = Field(description="the slice it is bound to; null: free, or another workspace's")
    gpr: int | None = Field(description="the GPR it is bound to; null: free, or another workspace's")


class InventoryNode(Resource):
    name: str
    shape: str
    schedulable: bool
    declared: bool
    whole: bool = Field(description="bound to one GPR at a time (Kubernetes)")
    gpus: tuple[InventoryGPU, ...]


class InventoryCluster(Resource):
    name: str
    kind: str
    source: str
    health: ClusterHealth
    message: str | None = Field(description="why it is unavailable")
    nodes: tuple[InventoryNode, ...]


class InventoryShape(Shape):
    """A shape on one cluster: how many GPUs of it there are and how many are free now."""

    cluster: str
    gpus: int
    free: int
    price_per_gpu_hour: float | None = Field(description="the admin's price (PUT /clusters/{name}/prices); null: none")


class ClusterPrices(Resource):
    """A cluster's prices per GPU-hour, per shape as GET /inventory names it."""

    cluster: str
    prices: dict[str, float]


class Inventory(Resource):
    clusters: tuple[InventoryCluster, ...]
    shapes: tuple[InventoryShape, ...]
    gpus: int
    free: int


class Window(Resource):
    """One GPR's window on one node: past, current or planned."""

    gpr: int | None = Field(description="null: another workspace's GPR, which the caller may not see")
    slice: str | None = Field(description="null: another workspace's, which the caller may not see")
    gpus: Names = Field(description="empty for a planned window that starts later than now")
    on_gpus: Names = Field(
        description="the physical GPUs (UUIDs) that its units are parts of, where they are MIG instances or "
        "shares of a time-sliced GPU; empty for whole GPUs, and where not known: a planned window whose units "
        "are not chosen yet, or instances whose GPU the cluster does not name (Kubernetes)"
    )
    gpu_count: int
    start: Time
    end: Time
    state: Literal[WINDOW_STATES]  # type: ignore[valid-type]
    status: str


class MaintenanceSpan(Resource):
    start: Time
    end: Time
    reason: str | None = Field(description="why, as the admin said; null to those who are not admins")


class GPUInstances(Resource):
    """A physical GPU of a split machine with the units of one planning node on it: its MIG instances
    of one profile, or its shares when time-sliced (core/sharing.py)."""

    gpu: str | None = Field(
        description="the GPU's UUID; null: the units whose GPU is not known (Kubernetes does not name the GPU "
        "of a MIG instance)"
    )
    index: int | None = Field(
        description="the GPU's index on its machine: its position, from 0, among the machine's GPUs in the order "
        "their units were found (a GPU without units is not counted); null when gpu is"
    )
    instances: Names = Field(description="the ids of the units on it, in index order (a window's gpus name these)")


class NodeSchedule(Resource):
    """One planning node's timeline. A machine whose GPUs are split is planned as one node per MIG profile,
    ``<machine>:<profile>``, and one ``<machine>:shared`` for the shares of its time-sliced GPUs
    (core/sharing.py); ``gpus`` says which of the node's units are on which GPU, and each window's
    ``on_gpus`` which GPUs it runs on."""

    cluster: str
    node: str
    machine: str = Field(description="the machine the node is on: the node itself for whole GPUs")
    profile: str | None = Field(
        description='the MIG profile of its units, "shared" for shares of time-sliced GPUs; null: whole GPUs'
    )
    gpus: tuple[GPUInstances, ...] = Field(
        description="the physical GPUs its units are parts of, by index, those not known last; empty for whole GPUs"
    )
    windows: tuple[Window, ...]
    maintenance: tuple[MaintenanceSpan, ...] = Field(description="its maintenance windows in the range")


class Schedule(Resource):
    start: Time
    end: Time
    nodes: tuple[NodeSchedule, ...]


class MaintenanceWindow(Resource):
    """A node out of service: nothing is planned on it from ``start`` to ``end``."""

    id: int
    cluster: str
    node: str
    start: Time
    end: Time
    reason: str
    created_by: str
    created_at: Time
    crossing: tuple[int, ...] = Field(
        description="GPRs holding the node whose windows run past the start (they were told)"
    )


class MaintenanceWindows(Resource):
    maintenance: tuple[MaintenanceWindow, ...]


class LayoutChange(Resource):
    """A change of a node's MIG layout (core/layouts.py): the node is out of service until
    ``ready_by``, and the change pending until its backend has made it (then done, or failed)."""

    id: int
    cluster: str
    node: str
    mig: dict[str, int] | None = Field(description="instances per GPU by MIG profile; null: whole GPUs")
    layout: str = Field(description='the layout in words, like "7 x 1g.10gb per GPU"')
    mig_config: str | None = Field(description="Kubernetes: the mig-parted config the node was labelled with")
    state: Literal["pending", "done", "failed"]
    message: str = Field(description="what the backend said last")
    reason: str
    created_by: str
    created_at: Time
    ready_by: Time = Field(description="when the node is expected back, in the new layout")
    finished_at: Time | None


class NodeLayout(Resource):
    """A machine's MIG layout now, and its changes, the latest first."""

    cluster: str
    node: str
    mig: dict[str, int] | None = Field(
        description="instances per GPU by MIG profile; null: whole GPUs, or not known per GPU (a Kubernetes "
        "node split other than by egs-hub: the layout says so)"
    )
    instances: dict[str, int] = Field(description="its MIG instances by profile, all GPUs together")
    layout: str = Field(description='the layout in words, like "7 x 1g.10gb per GPU"')
    changes: tuple[LayoutChange, ...]


# Dynamic node pools (core/node_pools.py)


class PoolMember(Resource):
    name: str
    schedulable: bool
    idle_since: Time | None = Field(description="null while a GPR holds it")


class NodePool(Resource):
    """Nodes the cluster's autoscaler adds when egs-hub asks and removes when egs-hub gives them back."""

    cluster: str
    name: str
    shape: str
    min_nodes: int
    max_nodes: int
    scale_up_delay: Seconds
    scale_down_idle: Seconds
    provisioning_class: str
    nodes: tuple[PoolMember, ...] = Field(description="its nodes that joined and were not given back")
    coming: int = Field(description="nodes asked for that have not joined")
    asked_at: Time | None = Field(description="when nodes were last asked for")
    retry_at: Time | None = Field(description="after a failed ask: none is asked before then")
    last_error: str | None = Field(description="why the last ask failed")
    created_by: str
    created_at: Time


class NodePools(Resource):
    pools: tuple[NodePool, ...]


# Node checks and health (core/checks.py)

CHECK_STATUSES = ("pending", "running", "passed", "failed", "skipped")
NODE_HEALTH = ("healthy", "unhealthy", "quarantined", "unknown")


class CheckItem(Resource):
    """One check of a cluster's checklist (the body of PUT /clusters/{name}/checks takes the same fields)."""

    name: str
    kind: Literal["gpu-health", "nccl", "rdma", "pvc", "custom"]
    at: tuple[Literal["entry", "exit"], ...]
    timeout: Seconds
    thresholds: dict[str, float]
    command: Names | None
    image: str | None


class ClusterChecklist(Resource):
    cluster: str
    checks: tuple[CheckItem, ...]
    default: bool = Field(description="true: no admin set one; this is egs-hub's default checklist")
    runs_here: Names = Field(description="the kinds of check this cluster's backend can run")


class CheckRun(Resource):
    """One check on one node at a GPR's entry or exit (or asked for by an admin: ``gpr`` null)."""

    id: int
    gpr: int | None
    cluster: str
    node: str
    name: str
    kind: str
    phase: Literal["entry", "exit"]
    status: Literal[CHECK_STATUSES]  # type: ignore[valid-type]
    started_at: Time | None
    finished_at: Time | None
    duration: FractionalSeconds | None = Field(description="how long it ran; null until it ends")
    values: dict[str, float | int | str] = Field(description="what it measured, by name")
    log: str = Field(description="what it said: the end of its output, or why it failed or was skipped")


class GPRChecks(Resource):
    gpr: int
    checks: tuple[CheckRun, ...] = Field(description="by node, entry before exit, in the checklist's order")


class NodeGPU(Resource):
    uuid: str
    index: int
    healthy: bool
    present: bool


class Node(Resource):
    """A node of the inventory, with its health: quarantined (by its exit checks or an admin), unhealthy
    (a GPU failing or the node cordoned), unknown (no longer found: gone, or its cluster unreachable),
    else healthy."""

    cluster: str
    name: str
    shape: str
    health: Literal[NODE_HEALTH]  # type: ignore[valid-type]
    schedulable: bool
    present: bool
    gpus: tuple[NodeGPU, ...]
    quarantined_at: Time | None
    quarantine_reason: str | None
    held_by: tuple[int, ...] = Field(description="the GPRs holding its GPUs now")
    maintenance: tuple[MaintenanceSpan, ...] = Field(description="its maintenance windows that have not ended")
    checks: tuple[CheckRun, ...] = Field(description="the last run of each of its checks, per phase")


class Nodes(Resource):
    nodes: tuple[Node, ...]


# GPRs, wait times and the queue


class NodeRef(Resource):
    cluster: str
    node: str


class NodeReplacement(Resource):
    failed_node: str
    node: str
    at: Time


class GPR(Resource):
    id: int
    name: str | None
    slice: str
    requested_by: str | None
    cluster: str | None
    shape: str | None
    gpus: int | None
    nodes: int | None
    priority: int = Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)
    duration: Seconds
    start_after: Time | None
    idle_timeout: Seconds | None = Field(description="released after its GPUs idle this long")
    preemptible: bool
    template: str | None = Field(description="the GPR template it was asked from")
    gpu_share: float | None = Field(description="a share of one time-sliced GPU it asked for; null: whole units")
    status: StatusName
    status_reason: str
    estimated_start: Time | None = Field(description="queued GPRs: when the planner starts it")
    queue_position: int | None
    planned_gpus: Names = Field(description="queued GPRs admitted now: the GPUs they get")
    planned_nodes: Names = Field(description="queued GPRs: the nodes planned for them")
    planned_gpu_count: int | None = Field(description="queued GPRs: GPUs planned on those nodes")
    window_start: Time | None
    window_end: Time | None
    bound_gpus: Names
    bound_nodes: Names
    avoid_nodes: tuple[NodeRef, ...] = Field(
        description="nodes that failed this GPR's pre-checks: it is not placed on them again"
    )
    replaced: tuple[NodeReplacement, ...] = Field(
        description="failed nodes replaced by healthy ones during its window, oldest first"
    )
    end_reason: EndReasonName | None
    created_at: Time
    updated_at: Time
    ended_at: Time | None
    price_per_gpu_hour: float | None = Field(description="the price when its window started; null: none")
    cost_per_hour: float | None = Field(description="what its bound GPUs cost an hour")
    reserved_cost: float | None = Field(description="its GPUs over its whole window")
    used_cost: float | None = Field(description="its GPUs while they were bound (until now, while held)")

    @property
    def gpu_count(self) -> int | None:
        """The GPUs it holds, else the GPUs it is planned for, else the GPUs it asked for."""
        return len(self.bound_gpus) or self.planned_gpu_count or self.gpus


class GPRPage(Resource):
    gprs: tuple[GPR, ...]
    next_cursor: str | None


class QueuedGPR(GPR):
    """A queued GPR as GET /queue lists it: with its priority band and its slice's fair-share factor.
    Another workspace's shows how it asks and where it waits, without its id, names, slice or reasons."""

    id: int | None = Field(description="null: another workspace's GPR, which the caller may not see")  # type: ignore[assignment]
    slice: str | None = Field(description="null: another workspace's, which the caller may not see")  # type: ignore[assignment]
    band: Literal[BANDS]  # type: ignore[valid-type]
    fair_share_factor: float = Field(description="of the GPR's slice within its project, in (0, 1]")
    project_fair_share_factor: float = Field(description="of the GPR's project among projects, in (0, 1]")


class QueuePage(Resource):
    planned_at: Time = Field(
        description="when the plan the positions and estimates come from was made (GPRs submitted since are "
        "placed on it; other changes show from the next plan, made within a reconcile pass)"
    )
    queue: tuple[QueuedGPR, ...]
    next_cursor: str | None


class Template(Resource):
    """A GPR template: a named GPR shape; a GPR that names it takes the fields it leaves out from it."""

    name: str
    description: str
    scope: str = Field(description="who may use it: global, project NAME or slice NAME")
    project: str | None = Field(description="only this project's slices may use it")
    slice: str | None = Field(description="only this slice may use it")
    cluster: str | None
    shape: str | None
    gpus: int | None
    nodes: int | None
    duration: Seconds
    priority: int | None = Field(description="null: the GPR's default")
    idle_timeout: Seconds | None
    preemptible: bool | None = Field(description="null: the GPR's default")
    created_by: str
    created_at: Time
    updated_at: Time


class Templates(Resource):
    templates: tuple[Template, ...]


class UsageRow(Resource):
    """One period's GPU use and cost of one project, slice or user (core/usage.py)."""

    period_start: Time
    key: str = Field(description="the project, slice or user")
    gpu_hours_reserved: float = Field(description="of the windows of its GPRs in the period")
    gpu_hours_used: float = Field(description="while their GPUs were bound, in the period")
    reserved_cost: float | None = Field(description="of the GPU-hours reserved; null: none had a price")
    cost: float | None = Field(description="of the GPU-hours used, at each GPR's price; null: none had a price")
    unpriced_gpu_hours: float = Field(description="GPU-hours used without a price (not in cost)")
    mean_utilization: float | None = Field(description="percent, mean of the bound GPUs' readings; null: none")


class UsageReport(Resource):
    group_by: Literal[GROUPS]  # type: ignore[valid-type]
    period: Literal[PERIODS]  # type: ignore[valid-type]
    since: Time = Field(description="the start of the first period")
    until: Time = Field(description="now: the end of the last period so far")
    rows: tuple[UsageRow, ...]


class WaitTimeOption(Resource):
    """Where and when a GPR like the one asked about would start."""

    cluster: str
    shape: Shape
    estimated_start: Time
    wait: Seconds = Field(alias="wait_seconds", ge=timedelta(0))
    nodes: Names
    gpus: int = Field(description="GPUs it would get on those nodes")
    cost_per_hour: float | None = Field(description="what those GPUs cost an hour; null: no price")
    estimated_cost: float | None = Field(description="cost_per_hour times the duration in hours; null: no price")


class WaitTimes(Resource):
    options: tuple[WaitTimeOption, ...]
    needs_approval: Names = Field(description="why a GPR like this would wait for an admin")


class EvictionVictim(Resource):
    id: int
    slice: str
    priority: int
    gpus: int
    window_end: Time | None
    status: StatusName


class Eviction(Resource):
    """Provisioned GPRs (victims) whose end lets GPR ``gpr_id`` start now."""

    gpr_id: int = Field(description="the queued GPR that starts once the victims are gone")
    victims: tuple[EvictionVictim, ...]
    automatic: bool = Field(description="the slice's policy evicts without an admin")


class Evictions(Resource):
    evictions: tuple[Eviction, ...]


# the audit log


class Event(Resource):
    id: int
    time: Time
    kind: str
    actor: str
    reason: str
    gpr: int | None
    slice: str | None
    from_status: str | None
    to_status: str | None
    data: dict[str, Any]


class EventPage(Resource):
    events: tuple[Event, ...]
    next_cursor: str | None


# GPU metrics and alerts


class MetricSource(Resource):
    """Where the service's GPU readings come from; ``error`` says why there are none."""

    name: str | None = Field(description="nvml, prometheus, or null: none configured")
    interval: FractionalSeconds = Field(description="seconds between samples")
    sampled_at: Time | None
    error: str | None = Field(description="why there are no current readings, if so")


class GPUProcess(Resource):
    pid: int
    used_mib: float | None
    user: str | None
    server: str | None


class GPUSample(Resource):
    """A GPU's latest readings: percent, MiB, °C, W, MHz; None where the source gives none."""

    time: Time
    utilization: float | None
    memory_utilization: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    throttle_reasons: Names
    ecc_errors: int | None
    xid: int | None
    processes: tuple[GPUProcess, ...] | None = Field(description="null: the source cannot list processes")
    pod: str | None
    namespace: str | None


class GPU(Resource):
    uuid: str
    index: int
    node: str
    cluster: str
    model: str
    memory_mib: int
    declared: bool
    healthy: bool
    parent_uuid: str | None = Field(description="a MIG instance or a share of a time-sliced GPU: the GPU's UUID")
    mig_profile: str | None = Field(description="a MIG instance: its profile")
    slice: str | None = Field(description="the slice holding it now")
    gpr: int | None = Field(description="the GPR holding it now")
    sample: GPUSample | None


class GPUs(Resource):
    source: MetricSource
    gpus: tuple[GPU, ...]


class UsedUtilizationPoint(Resource):
    """One step from ``time``: the mean of the GPUs' readings (None: none), the most GPUs with readings in 5 min."""

    time: Time
    utilization: float | None = Field(description="the mean of the GPUs' readings in the step")
    gpus: int = Field(description="the most GPUs with readings in 5 minutes of the step")


class UsedUtilization(Resource):
    """The used utilisation of the caller's GPUs per ``step`` from ``since`` (the service keeps 24 h)."""

    source: MetricSource
    since: Time
    step: Seconds
    points: tuple[UsedUtilizationPoint, ...]


class MetricPoint(Resource):
    """A GPU's readings averaged over one step from ``time``."""

    time: Time
    utilization: float | None
    memory_utilization: float | None
    memory_used_mib: float | None
    temperature_c: float | None
    power_w: float | None
    sm_clock_mhz: float | None


class GPUMetrics(Resource):
    uuid: str
    since: Time
    step: Seconds
    source: MetricSource
    points: tuple[MetricPoint, ...]


class WorkloadProcess(Resource):
    pid: int
    gpu: str
    used_mib: float | None


class HottestGPU(Resource):
    uuid: str
    node: str | None
    temperature_c: float | None


class MostPowerGPU(Resource):
    uuid: str
    node: str | None
    power_w: float | None


class Workload(Resource):
    """A server, pod or process of a slice with its GPUs; ``utilization`` is their mean."""

    slice: str
    kind: Literal[WORKLOAD_KINDS]  # type: ignore[valid-type]
    name: str
    user: str | None
    gpus: Names
    processes: tuple[WorkloadProcess, ...]
    utilization: float | None = Field(description="mean over its GPUs with a reading")
    hottest_gpu: HottestGPU | None
    most_power_gpu: MostPowerGPU | None


class Workloads(Resource):
    source: MetricSource
    workloads: tuple[Workload, ...]
    next_cursor: str | None


class Alert(Resource):
    id: int
    kind: Literal[ALERT_KINDS]  # type: ignore[valid-type]
    gpu: str
    node: str | None
    cluster: str | None
    slice: str | None = Field(description="who held the GPU when it was raised")
    gpr: int | None
    message: str
    value: float | None
    threshold: float | None
    raised_at: Time
    cleared_at: Time | None
    active: bool


class Alerts(Resource):
    source: MetricSource
    alerts: tuple[Alert, ...]
    next_cursor: str | None


# servers


class Server(Resource):
    """A hub server registered with the service, and the GPUs it was started with."""

    user: str
    server: str
    slice: str
    gpus: Names
    started_at: Time


class Servers(Resource):
    servers: tuple[Server, ...]


class AutoGPR(Resource):
    """The GPR a server that asked for GPUs its slice lacks waits for (the slice policy's auto_gpr)."""

    id: int
    status: StatusName
    filed: bool = Field(description="filed for this start; false: one the slice had waiting already")
    template: str | None
    position: int | None = Field(description="queued: its place in the planner's order (1 first)")
    estimated_start: Time | None = Field(description="queued: when the planner starts it")


class ServerRegistration(Resource):
    """What a starting server may use: its slice's GPUs now (``gpus``: what CUDA_VISIBLE_DEVICES names, a
    share of a time-sliced GPU as the GPU) and the GPRs holding them; with GPUs asked and none held, the GPR
    it waits for (``auto_gpr``) or why none could be filed (``auto_gpr_problem``)."""

    user: str
    server: str
    slice: str
    gpus: Names
    gprs: tuple[int, ...]
    auto_gpr: AutoGPR | None = None
    auto_gpr_problem: str | None = None


class HomeVolume(Resource):
    """A member's home volume: the PersistentVolumeClaim their servers in the slice mount (Kubernetes)."""

    user: str
    server: str = Field(description="the named server it is for; empty: the user's default server")
    cluster: str
    namespace: str
    name: str
    size: str | None = Field(description="what the cluster provisioned once bound, else what was asked (10Gi)")
    storage_class: str | None = Field(description="null: the cluster's default")
    phase: str | None = Field(description="Pending, Bound or Lost")


class HomeVolumes(Resource):
    volumes: tuple[HomeVolume, ...]
    unavailable: dict[str, str] = Field(description="clusters that did not answer, with why")


class ServerRestart(Resource):
    """A restart the service started (in the background) of ``user``'s server ``server``."""

    user: str
    server: str
    restarting: Literal[True] = Field(description="the hub restarts it in the background")


# What-if capacity plans (service/capacity.py, sim/what_if.py)


class Waits(Resource):
    """Waits (start minus asked start) of the GPRs that started; null when none did."""

    gprs: int
    wait_mean_s: float | None
    wait_p50_s: float | None
    wait_p95_s: float | None
    wait_p99_s: float | None


Bound = tuple[tuple[float, float], ...]
BOUND_HELP = "GPUs bound over time: [seconds from the start of the replay, share of the GPUs]"


class RecordedWaits(Waits):
    """What really happened: the waits of the GPRs that started, per workspace, and GPUs bound
    (as a share of the GPUs there now)."""

    slices: dict[str, Waits]
    bound: Bound = Field(description=BOUND_HELP)


class WhatIfCase(RecordedWaits):
    """The replay on one set of nodes: its waits, per workspace, GPUs bound, and its nodes."""

    nodes: str = Field(description="the nodes replayed on")
    capacity_gpus: int
    util_bound: float = Field(description="GPU-seconds bound over the GPUs' over the span")
    capacity_cost: float | None = Field(
        description="the nodes' GPU-hours over the span at their prices per GPU-hour; null when a shape has none"
    )
    estimate_kept_share: float | None = Field(description="share of GPRs that started by their first estimate +60 s")


class WhatIfResult(Resource):
    gprs: int = Field(description="the GPRs replayed")
    recorded: RecordedWaits
    current: WhatIfCase = Field(description="on the nodes as they are")
    changed: WhatIfCase | None = Field(description="on the nodes with the changes; null without any")


class NodeCount(Resource):
    shape: str
    count: int
    price: float | None = Field(description="price per GPU-hour asked for this shape (null: the cluster's)")


class CapacityPlan(Resource):
    """A what-if capacity plan: the service's history replayed in the background (admin)."""

    id: int
    status: Literal["running", "done", "failed"]
    progress: float = Field(description="share of the replays done, 0 to 1")
    since: Seconds
    add_nodes: tuple[NodeCount, ...]
    remove_nodes: tuple[NodeCount, ...]
    started_by: str
    started_at: Time
    finished_at: Time | None
    error: str | None = Field(description="why it failed")
    result: WhatIfResult | None = Field(description="once done")


class CapacityPlans(Resource):
    plans: tuple[CapacityPlan, ...] = Field(description="the latest first; the service keeps the last ten")


class EndpointReplica(Resource):
    """One replica of an endpoint: its GPR, and its server on the GPR's GPUs."""

    gpr: int
    gpr_status: StatusName
    state: Literal[REPLICA_STATES] = Field(  # type: ignore[valid-type]
        description="waiting (for its GPR's GPUs), starting, ready, failed (its server keeps exiting; started "
        "again), ending (its GPR is released)"
    )
    estimated_start: Time | None = Field(description="while waiting: when its GPR is estimated to start")
    window_end: Time | None
    renewing: bool = Field(description="its GPR's window ends soon: a new GPR replaces it")
    in_flight: int
    restarts: int = Field(description="times its server exited since it was last ready")
    message: str = Field(description="why its server last exited, with the end of its log")


class Endpoint(Resource):
    """An inference endpoint (core/endpoints.py): a model served from a slice's GPUs at ``url``, one GPR
    per replica, between min_replicas and max_replicas on the requests in flight."""

    slice: str
    name: str
    runtime: Literal[RUNTIMES]  # type: ignore[valid-type]
    model: str
    gpus: int | None
    template: str | None
    cluster: str | None
    command: tuple[str, ...]
    image: str | None
    args: tuple[str, ...]
    env: dict[str, str]
    min_replicas: int
    max_replicas: int
    idle_timeout: Seconds
    duration: Seconds
    target_concurrency: int
    health_path: str
    metrics_path: str | None
    status: Literal[ENDPOINT_STATUSES]  # type: ignore[valid-type]
    message: str | None = Field(description="why it failed or waits")
    url: str = Field(description="its path at the hub: send a hub token (Authorization: token ...)")
    replicas: int = Field(description="replicas ready now")
    wanted_replicas: int
    gprs: tuple[int, ...] = Field(description="its replicas' GPRs not finished")
    replica_states: tuple[EndpointReplica, ...]
    requests_per_second: float = Field(description="over the last minute")
    latency_p50: float | None = Field(description="seconds, over the last minute")
    latency_p95: float | None = Field(description="seconds, over the last minute")
    errors: int = Field(description="answers of 5xx or no answer, over the last minute")
    in_flight: int
    queued: int = Field(description="requests waiting in its replicas' own queues, as their metrics say")
    gpu_utilization: float | None = Field(
        description="mean SM utilisation (%) of its provisioned replicas' GPUs, from the GPU metrics (null: none)"
    )
    last_request: Time | None
    created_by: str
    created_at: Time


class Endpoints(Resource):
    endpoints: tuple[Endpoint, ...]


RESOURCES: tuple[type[Resource], ...] = (
    Error,
    Health,
    Slice,
    Slices,
    SliceKubeconfig,
    HomeVolumes,
    Project,
    Projects,
    WorkspaceRequest,
    WorkspaceRequests,
    Cluster,
    Clusters,
    ClusterPrices,
    RoleTemplates,
    Inventory,
    Schedule,
    MaintenanceWindows,
    LayoutChange,
    NodeLayout,
    NodePool,
    NodePools,
    ClusterChecklist,
    GPRChecks,
    Node,
    Nodes,
    GPR,
    GPRPage,
    QueuePage,
    WaitTimes,
    Template,
    Templates,
    UsageReport,
    Eviction,
    Evictions,
    EventPage,
    GPUs,
    UsedUtilization,
    GPUMetrics,
    Workloads,
    Alerts,
    Servers,
    ServerRegistration,
    ServerRestart,
    CapacityPlan,
    CapacityPlans,
    Endpoint,
    Endpoints,
)


def resource_schemas(ref_template: str) -> dict[str, dict]:
    """The JSON Schema of every answer and of the parts they are made of, by model name, as the
    service writes them (``ref_template`` formats ``{model}`` into a reference to another)."""
    _, top = models_json_schema([(m, "serialization") for m in RESOURCES], ref_template=ref_template)
    return top["$defs"]
