"""Domain records of egs-hub, as plain frozen dataclasses.

Vocabulary (DESIGN.md): a *cluster* holds *nodes*; a node offers GPUs of one
*GPU shape*; a *slice* is a team workspace with a quota and a policy; a *GPR*
(GPU Provision Request) asks for GPUs for a *window* [start, start + duration).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from types import MappingProxyType

from . import sharing

PRIORITY_MIN = 1
PRIORITY_MAX = 300
PRIORITY_DEFAULT = 101
DEFAULT_HOME_VOLUME_SIZE = "10Gi"  # a slice policy's home_volume_size unless it says otherwise


class Status(enum.StrEnum):
    """Where a GPR is in its lifecycle (DESIGN.md, "GPR lifecycle")."""

    PENDING_APPROVAL = "pending-approval"
    QUEUED = "queued"
    PROVISIONING = "provisioning"
    PROVISIONED = "provisioned"
    RELEASING = "releasing"
    COMPLETE = "complete"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATUSES

    @property
    def holds_gpus(self) -> bool:
        """The GPR's GPUs are bound (or being bound or unbound) to its slice."""
        return self in HOLDING_STATUSES


FINAL_STATUSES = frozenset({Status.COMPLETE, Status.REJECTED, Status.CANCELLED, Status.FAILED})
HOLDING_STATUSES = frozenset({Status.PROVISIONING, Status.PROVISIONED, Status.RELEASING})


EVICTION_MODES = ("auto", "confirm", "off")
BIND_FAILURES = ("fail", "move")
REMEDIATIONS = ("replace", "notify", "off")
MAINTENANCE_CROSSINGS = ("ask", "shorten", "move")


class EndReason(enum.StrEnum):
    """Why a provisioned GPR left its GPUs; the side exits of the lifecycle."""

    WINDOW_ENDED = "window-ended"
    RELEASED_EARLY = "released-early"
    IDLE_RELEASED = "idle-released"
    EVICTED = "evicted"


@dataclass(frozen=True, order=True)
class Shape:
    """What a node offers, e.g. ``H100-80GB x8``; with a MIG ``profile``, its instances of that
    profile, e.g. ``H100-80GB 1g.10gb x56``; with ``replicas`` above 1, the shares of its time-sliced
    GPUs, e.g. ``H100-80GB shared/4 x32`` (core/sharing.py): ``gpus_per_node`` counts units."""

    model: str
    memory_gb: int
    gpus_per_node: int
    profile: str | None = None
    replicas: int = 1

    @property
    def gpu_type(self) -> str:
        """The unit a GPR asks for: ``H100-80GB``, ``H100-80GB 1g.10gb`` or ``H100-80GB shared/4``."""
        kind = f"{self.model}-{self.memory_gb}GB"
        if self.profile is not None:
            return f"{kind} {self.profile}"
        return kind if self.replicas == 1 else f"{kind} shared/{self.replicas}"

    @property
    def name(self) -> str:
        return f"{self.gpu_type} x{self.gpus_per_node}"

    @property
    def whole(self) -> bool:
        """Whether its units are whole GPUs (neither MIG instances nor shares)."""
        return self.profile is None and self.replicas == 1

    @property
    def equivalents(self) -> Fraction:
        """What one unit counts as in quotas and GPU-hours (sharing.equivalents)."""
        return sharing.equivalents(self.model, self.profile, self.replicas)

    def matches(self, wanted: str | None) -> bool:
        """A GPR's ``shape`` names a shape, its GPU type or its model (with the profile, for
        MIG instances: ``H100-80GB 1g.10gb``, ``H100 1g.10gb``); None is any whole-GPU shape."""
        if wanted is None:
            return self.whole
        wanted = _normal(wanted)
        kinds = self._gpu_kinds()
        if self.profile is not None:
            kinds = {f"{kind} {self.profile.lower()}" for kind in kinds}
        elif self.replicas > 1:
            kinds = {f"{kind} shared/{self.replicas}" for kind in kinds}
        return wanted in kinds | {self.name.lower(), self.name.replace(" ", "").lower()}

    def serves(self, wanted: str | None, share: float | None) -> bool:
        """Whether a unit of this shape serves a GPR asking for ``wanted`` (its ``shape``) and ``share``
        (its ``gpu_share``): a share is served by a time-sliced GPU whose shares are at least that part
        of it, of the GPU type or model ``wanted`` names, or of this very shape (None: any); the rest
        as ``matches`` says."""
        if share is None:
            return self.matches(wanted)
        if self.replicas == 1 or share > 1 / self.replicas:
            return False
        return wanted is None or _normal(wanted) in self._gpu_kinds() or self.matches(wanted)

    def _gpu_kinds(self) -> set[str]:
        """The GPU type and model as a request may name them, lower case."""
        return {f"{self.model}-{self.memory_gb}GB".lower(), self.model.lower()}


def _normal(wanted: str) -> str:
    """A requested shape, lower case, single spaces."""
    return " ".join(wanted.strip().lower().split())


@dataclass(frozen=True)
class GPU:
    """A unit the planner hands out: a whole GPU, or a MIG instance of the GPU ``parent``
    (its UUID) with ``profile`` (core/sharing.py), whose ``uuid`` is the instance's ``MIG-...``."""

    uuid: str
    index: int
    node: str
    cluster: str
    model: str
    memory_mib: int
    declared: bool = False
    healthy: bool = True
    parent: str | None = None
    profile: str | None = None


@dataclass(frozen=True)
class Node:
    """One machine; ``gpus`` are UUIDs in index order.

    ``whole``: the node is bound to one GPR at a time, whatever number of its GPUs
    that GPR asked for (a Kubernetes node carries one slice label); otherwise each
    GPU is bound on its own (the local host). ``pool``: the dynamic node pool it belongs to
    (core/node_pools.py); ``joins_at``: set on a pool's node that has not joined yet (the planner
    counts it from then and never binds it).
    """

    name: str
    cluster: str
    shape: Shape
    gpus: tuple[str, ...]
    schedulable: bool = True
    declared: bool = False
    whole: bool = False
    pool: str | None = None
    joins_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.cluster, self.name)


@dataclass(frozen=True)
class Order:
    """How a band's requests are ordered (core/queue.py). ``fair_share_s``: None, fair share ahead
    of everything else in the band (the default); else the seconds of waiting a tree factor of 1
    is worth (the mean of the project's and the slice's factor). ``size_s_per_gpu_hour``: the
    seconds a request's virtual submit time moves later per GPU-hour it asks for (0: none)."""

    fair_share_s: float | None = None
    size_s_per_gpu_hour: float = 0.0

    def __post_init__(self) -> None:
        for name in ("fair_share_s", "size_s_per_gpu_hour"):
            error = order_weight_error(getattr(self, name))
            if error is not None:
                raise ValueError(f"queue order: {name} {error}")


def order_weight_error(value: float | None) -> str | None:
    """Why ``value`` cannot be a weight of an ``Order`` (None: it can; None is a weight too)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        return f"must be a finite number of seconds >= 0, not {value}"
    return None


FAIR_SHARE_FIRST = Order()  # the default order: fair share, then priority, then submit time


@dataclass(frozen=True)
class SlicePolicy:
    """A slice's quota and rules. ``None`` means no limit.

    max_gpus: GPUs the slice may hold at once; a GPR asking more needs approval
    (once approved it runs while the slice holds nothing else).
    max_duration: longest window without approval.
    max_priority: highest priority members may ask for.
    auto_approve_max_gpus: larger GPRs wait for an admin's approval.
    max_active_gprs: GPRs of the slice holding GPUs at the same time (EGS: 1).
    restart_servers: restart the slice's running servers when GPUs are bound,
    instead of only telling their owners to restart.
    max_gpu_hours: GPU-hours the slice may use per rolling week (7 days); a GPR
    that would go over needs approval.
    max_cost_month: what the slice may spend per calendar month (UTC) at the prices
    (core/cost.py): its GPRs' reserved cost this month; a GPR whose estimated cost would
    go over needs approval (a GPR that could only run unpriced is never over it).
    reject_over_limits: a GPR over a limit is rejected instead of waiting for approval.
    eviction: when this slice's GPR tops the queue and cannot start, may lower-priority
    preemptible GPRs be ended for it: "auto" (at once), "confirm" (an admin confirms
    the list the planner names) or "off".
    requeue_evicted: an evicted GPR of this slice goes back to the queue.
    share: fair-share weight; None takes ``max_gpus`` (or 1 when unlimited).
    idle_timeout: a provisioned GPR whose GPUs stay idle this long is released, unless the
    GPR sets its own; None: never (unless max_idle_timeout is set).
    max_idle_timeout: the longest idle_timeout members may ask for; a GPR without one gets it.
    bind_failure: a GPR whose nodes fail their pre-checks when it is bound is "fail"ed, or
    "move"d: queued again, never to be placed on those nodes (it fails when no other node
    could serve it).
    auto_gpr: the template a GPR is filed from when a member starts a server asking for GPUs,
    or a GPU pod is made in the slice's namespace, while the slice has none (core/auto_gpr.py);
    None: nothing is filed.
    remediation: what becomes of a provisioned GPR when one of its GPUs fails (a fatal XID, an
    uncorrected ECC error, fallen off the bus; its node is quarantined either way, core/remediation.py):
    "replace" its GPUs on that node by as many on a healthy node for the rest of the window,
    "notify" its holders only, or "off" (the alert alone).
    maintenance_crossing: what becomes of a GPR whose window runs past the start of a maintenance planned
    on one of its nodes: "ask" (its holders and the admins are told; an admin decides), "shorten" (its
    window ends when the maintenance starts, decided when it is planned), or "move" (when the maintenance
    starts, its GPUs on that node move to a healthy node free for the rest of the window, as a failed
    node's do; with none free, its window ends then).
    home_volume_size: on Kubernetes, the size (a quantity, "10Gi") of the volume each member's
    servers in the slice keep their home directory on; None: no volume (the home directory
    goes with the pod). home_volume_class: its storage class; None: the cluster's default.
    gpu_sharing: members may ask for a share of a time-sliced GPU (a GPR's ``gpu_share``), which
    other slices that allow it may share too (core/sharing.py).
    """

    max_gpus: int | None = None
    max_duration: timedelta | None = None
    max_priority: int = PRIORITY_MAX
    auto_approve_max_gpus: int | None = None
    max_active_gprs: int = 1
    restart_servers: bool = False
    max_gpu_hours: float | None = None
    max_cost_month: float | None = None
    reject_over_limits: bool = False
    eviction: str = "confirm"
    requeue_evicted: bool = True
    share: float | None = None
    idle_timeout: timedelta | None = None
    max_idle_timeout: timedelta | None = None
    bind_failure: str = "fail"
    remediation: str = "replace"
    maintenance_crossing: str = "ask"
    auto_gpr: str | None = None
    home_volume_size: str | None = DEFAULT_HOME_VOLUME_SIZE
    home_volume_class: str | None = None
    gpu_sharing: bool = False


@dataclass(frozen=True)
class GPRSpec:
    """What a GPR asks for: exactly one of ``gpus`` and ``nodes`` is set."""

    slice: str
    duration: timedelta
    gpus: int | None = None
    nodes: int | None = None
    name: str = ""
    priority: int = PRIORITY_DEFAULT
    shape: str | None = None
    cluster: str | None = None
    start_after: datetime | None = None
    idle_timeout: timedelta | None = None
    preemptible: bool = True
    template: str | None = None  # the GPR template it was asked from (core/templates.py)
    gpu_share: float | None = None  # a share of one time-sliced GPU (0 < share < 1; gpus is then 1)


@dataclass(frozen=True)
class NodeReplacement:
    """A failed node of a provisioned GPR replaced by a healthy one at ``at`` (core/remediation.py)."""

    failed_node: str
    node: str
    at: datetime


@dataclass(frozen=True)
class GPR:
    """A GPU Provision Request with its lifecycle state. ``avoid_nodes``: the (cluster, node)
    pairs that failed its pre-checks; it is not placed on them again. ``replaced``: the nodes
    replaced during its window, oldest first."""

    id: int
    spec: GPRSpec
    requested_by: str
    status: Status
    created_at: datetime
    updated_at: datetime
    status_reason: str = ""
    window_start: datetime | None = None
    window_end: datetime | None = None
    ended_at: datetime | None = None
    end_reason: EndReason | None = None
    bound_gpus: tuple[str, ...] = ()
    bound_nodes: tuple[str, ...] = ()
    avoid_nodes: tuple[tuple[str, str], ...] = ()
    replaced: tuple[NodeReplacement, ...] = ()
    price_per_gpu_hour: float | None = None  # from when its window started (core/cost.py)


@dataclass(frozen=True)
class Project:
    """The top tenant: it holds clusters and slices (DESIGN.md). Its admins, the members of hub
    group ``admin_group``, manage its slices. Its quota caps the sum of its slices: GPUs held at
    once, GPU-hours per rolling week, cost per calendar month; ``share`` is its fair-share weight
    among projects (None: its ``max_gpus``, else 1), as a slice's is within its project."""

    name: str
    display_name: str = ""
    admin_group: str | None = None
    max_gpus: int | None = None
    max_gpu_hours: float | None = None
    max_cost_month: float | None = None
    share: float | None = None


DEFAULT_PROJECT = "default"


SHARED: Mapping[str, str] = MappingProxyType({})  # cluster_projects when every cluster is the default project's


def serves(cluster_projects: Mapping[str, str], cluster: str, project: str) -> bool:
    """Whether a cluster serves the slices of ``project``: a cluster of the default project (not in
    ``cluster_projects``: cluster -> the project holding it) serves every project, one of another
    project only that project's slices."""
    return cluster_projects.get(cluster, project) == project


@dataclass(frozen=True)
class Event:
    """An audit record: every state change has one, with actor and reason."""

    kind: str
    actor: str
    reason: str
    time: datetime
    gpr_id: int | None = None
    slice: str | None = None
    from_status: Status | None = None
    to_status: Status | None = None
    data: dict = field(default_factory=dict)
