"""What the REST API answers, as frozen dataclasses (decoded by decode.py).

Vocabulary as in DESIGN.md: a *slice* (workspace), a *GPR* (GPU Provision
Request), a GPU *shape*, a *window*, an *estimated start*. Times are aware UTC
``datetime``s, durations ``timedelta``s; a field the service leaves null is None.
Every model keeps the JSON object it came from in ``raw``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


def _key(name: str) -> Any:
    """A field whose JSON key is ``name``."""
    return field(metadata={"key": name})


@dataclass(frozen=True)
class Health:
    status: str
    version: str | None
    database: str
    raw: dict = _raw()


@dataclass(frozen=True)
class Quota:
    max_gpus: int | None
    max_gpu_hours: float | None
    raw: dict = _raw()


@dataclass(frozen=True)
class SlicePolicy:
    max_duration: timedelta | None
    max_priority: int
    auto_approve_max_gpus: int | None
    max_active_gprs: int
    restart_servers: bool
    reject_over_limits: bool
    eviction: str
    requeue_evicted: bool
    share: float | None
    idle_timeout: timedelta | None
    max_idle_timeout: timedelta | None
    bind_failure: str = "fail"
    raw: dict = _raw()


@dataclass(frozen=True)
class Usage:
    gpu_hours_week: float
    decayed_gpu_hours: float
    fair_share_factor: float
    raw: dict = _raw()


@dataclass(frozen=True)
class Slice:
    name: str
    display_name: str
    group: str
    members: tuple[str, ...]
    quota: Quota
    policy: SlicePolicy
    usage: Usage
    namespaces: dict
    gpus: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    raw: dict = _raw()


@dataclass(frozen=True)
class SliceKubeconfig:
    """A kubeconfig (YAML ``kubeconfig``) for a slice's ServiceAccount on ``cluster``, valid until ``expires_at``;
    its current context is the slice's home ``namespace`` there."""

    slice: str
    cluster: str
    namespace: str
    expires_at: datetime
    kubeconfig: str
    raw: dict = _raw()


@dataclass(frozen=True)
class Cluster:
    """A registered cluster: ``origin`` local, config or api; ``health`` ok or unavailable (``message`` says why)."""

    name: str
    kind: str
    origin: str
    where: str
    health: str
    message: str | None
    source: str | None
    nodes: int
    gpus: int
    node_selector: str | None = None
    exit_grace: timedelta | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class NodeRef:
    cluster: str
    node: str
    raw: dict = _raw()


@dataclass(frozen=True)
class GPR:
    id: int
    name: str | None
    slice: str
    requested_by: str | None
    cluster: str | None
    shape: str | None
    gpus: int | None
    nodes: int | None
    priority: int
    duration: timedelta
    start_after: datetime | None
    idle_timeout: timedelta | None
    preemptible: bool
    status: str
    status_reason: str | None
    estimated_start: datetime | None
    queue_position: int | None
    planned_gpus: tuple[str, ...]
    planned_nodes: tuple[str, ...]
    planned_gpu_count: int | None
    window_start: datetime | None
    window_end: datetime | None
    bound_gpus: tuple[str, ...]
    bound_nodes: tuple[str, ...]
    end_reason: str | None
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
    avoid_nodes: tuple[NodeRef, ...] = ()
    raw: dict = _raw()

    @property
    def gpu_count(self) -> int | None:
        """The GPUs it holds, else the GPUs it is planned for, else the GPUs it asked for."""
        return len(self.bound_gpus) or self.planned_gpu_count or self.gpus


@dataclass(frozen=True)
class QueuedGPR(GPR):
    """A queued GPR as GET /queue lists it: with its priority band and its slice's fair-share factor."""

    band: str = ""
    fair_share_factor: float = 1.0


@dataclass(frozen=True)
class Shape:
    name: str
    model: str
    memory_gb: int
    gpus_per_node: int
    raw: dict = _raw()


@dataclass(frozen=True)
class WaitTimeOption:
    """Where and when a GPR like the one asked about would start."""

    cluster: str
    shape: Shape
    estimated_start: datetime
    wait: timedelta = _key("wait_seconds")
    nodes: tuple[str, ...] = ()
    gpus: int = 0
    raw: dict = _raw()


@dataclass(frozen=True)
class WaitTimes:
    options: tuple[WaitTimeOption, ...]
    needs_approval: tuple[str, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class InventoryGPU:
    uuid: str
    index: int
    product: str
    memory_mib: int
    declared: bool
    healthy: bool
    slice: str | None
    gpr: int | None
    raw: dict = _raw()


@dataclass(frozen=True)
class InventoryNode:
    name: str
    shape: str
    schedulable: bool
    declared: bool
    gpus: tuple[InventoryGPU, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class InventoryCluster:
    name: str
    kind: str
    source: str
    nodes: tuple[InventoryNode, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class InventoryShape:
    """A shape on one cluster: how many GPUs of it there are and how many are free now."""

    cluster: str
    name: str
    model: str
    memory_gb: int
    gpus_per_node: int
    gpus: int
    free: int
    raw: dict = _raw()


@dataclass(frozen=True)
class Inventory:
    clusters: tuple[InventoryCluster, ...]
    shapes: tuple[InventoryShape, ...]
    gpus: int
    free: int
    raw: dict = _raw()


@dataclass(frozen=True)
class Window:
    """One GPR's window on one node: ``past``, ``current`` or ``planned``."""

    gpr: int
    slice: str
    gpus: tuple[str, ...]
    gpu_count: int
    start: datetime
    end: datetime | None
    state: str
    status: str
    raw: dict = _raw()


@dataclass(frozen=True)
class NodeSchedule:
    cluster: str
    node: str
    windows: tuple[Window, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class Schedule:
    start: datetime
    end: datetime
    nodes: tuple[NodeSchedule, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class EvictionVictim:
    id: int
    slice: str
    priority: int
    gpus: int
    window_end: datetime | None
    status: str
    raw: dict = _raw()


@dataclass(frozen=True)
class Eviction:
    """Provisioned GPRs (victims) whose end lets GPR ``gpr_id`` start now."""

    gpr_id: int
    victims: tuple[EvictionVictim, ...]
    automatic: bool
    raw: dict = _raw()


@dataclass(frozen=True)
class Event:
    id: int
    time: datetime
    kind: str
    actor: str
    reason: str
    gpr: int | None
    slice: str | None
    from_status: str | None
    to_status: str | None
    data: dict
    raw: dict = _raw()


@dataclass(frozen=True)
class MetricSource:
    """Where the service's GPU readings come from; ``error`` says why there are none."""

    name: str | None
    interval: timedelta
    sampled_at: datetime | None
    error: str | None
    raw: dict = _raw()


@dataclass(frozen=True)
class GPUProcess:
    pid: int
    used_mib: float | None
    user: str | None
    server: str | None
    raw: dict = _raw()


@dataclass(frozen=True)
class GPUSample:
    """A GPU's latest readings: percent, MiB, °C, W, MHz; None where the source gives none."""

    time: datetime
    utilization: float | None
    memory_utilization: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    throttle_reasons: tuple[str, ...]
    ecc_errors: int | None
    xid: int | None
    processes: tuple[GPUProcess, ...] | None
    pod: str | None
    namespace: str | None
    raw: dict = _raw()


@dataclass(frozen=True)
class GPU:
    uuid: str
    index: int
    node: str
    cluster: str
    model: str
    memory_mib: int
    declared: bool
    healthy: bool
    slice: str | None
    gpr: int | None
    sample: GPUSample | None
    raw: dict = _raw()


@dataclass(frozen=True)
class GPUs:
    source: MetricSource
    gpus: tuple[GPU, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class UsedUtilizationPoint:
    """One step from ``time``: the mean of the GPUs' readings (None: none), the most GPUs with readings in 5 min."""

    time: datetime
    utilization: float | None
    gpus: int
    raw: dict = _raw()


@dataclass(frozen=True)
class UsedUtilization:
    """The used utilisation of the caller's GPUs per ``step`` from ``since`` (the service keeps 24 h)."""

    source: MetricSource
    since: datetime
    step: timedelta
    points: tuple[UsedUtilizationPoint, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class MetricPoint:
    """A GPU's readings averaged over one step from ``time``."""

    time: datetime
    utilization: float | None
    memory_utilization: float | None
    memory_used_mib: float | None
    temperature_c: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    raw: dict = _raw()


@dataclass(frozen=True)
class GPUMetrics:
    uuid: str
    since: datetime
    step: timedelta
    source: MetricSource
    points: tuple[MetricPoint, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class Workload:
    """A server, pod or process of a slice with its GPUs; ``utilization`` is their mean."""

    slice: str
    kind: str
    name: str
    user: str | None
    gpus: tuple[str, ...]
    processes: tuple[dict, ...]
    utilization: float | None
    hottest_gpu: dict | None
    most_power_gpu: dict | None
    raw: dict = _raw()


@dataclass(frozen=True)
class Workloads:
    source: MetricSource
    workloads: tuple[Workload, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class Alert:
    id: int
    kind: str
    gpu: str
    node: str | None
    cluster: str | None
    slice: str | None
    gpr: int | None
    message: str
    value: float | None
    threshold: float | None
    raised_at: datetime
    cleared_at: datetime | None
    active: bool
    raw: dict = _raw()


@dataclass(frozen=True)
class Alerts:
    source: MetricSource
    alerts: tuple[Alert, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class Server:
    """A hub server registered with the service, and the GPUs it was started with."""

    user: str
    server: str
    slice: str
    gpus: tuple[str, ...]
    started_at: datetime | None
    raw: dict = _raw()


@dataclass(frozen=True)
class ServerRegistration:
    """What a starting server may use: its slice's GPUs now and the GPRs holding them."""

    user: str
    server: str
    slice: str
    gpus: tuple[str, ...]
    gprs: tuple[int, ...]
    raw: dict = _raw()


@dataclass(frozen=True)
class ServerRestart:
    """A restart the service started (in the background) of ``user``'s server ``server``."""

    user: str
    server: str
    restarting: bool
    raw: dict = _raw()
