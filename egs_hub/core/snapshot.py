"""What the planner reads and what it decides, as plain frozen records.

Vocabulary: a *booking* is a GPR holding GPUs now (provisioning, provisioned or
releasing); a *request* is a GPR waiting for GPUs; a *placement* is the exact
GPUs and nodes a request would get; an *estimate* is a request's planned start
and placement. The previous plan's estimates are the planner's promises: a
request is never planned later than its promise because of work that is not
ahead of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .model import FAIR_SHARE_FIRST, GPR, PRIORITY_DEFAULT, GPRSpec, Node, Order, Project, Shape, SlicePolicy, Status


@dataclass(frozen=True)
class Booking:
    gpr_id: int
    slice: str
    gpus: tuple[str, ...]
    start: datetime
    end: datetime
    releasing: bool = False
    priority: int = PRIORITY_DEFAULT
    preemptible: bool = True

    @classmethod
    def of(cls, gpr: GPR) -> Booking:
        """The booking of a GPR that holds GPUs."""
        if gpr.window_start is None or gpr.window_end is None:
            raise ValueError(f"GPR {gpr.id} holds no window")
        return cls(
            gpr_id=gpr.id,
            slice=gpr.spec.slice,
            gpus=gpr.bound_gpus,
            start=gpr.window_start,
            end=gpr.window_end,
            releasing=gpr.status is Status.RELEASING,
            priority=gpr.spec.priority,
            preemptible=gpr.spec.preemptible,
        )


@dataclass(frozen=True)
class Request:
    """``avoid``: (cluster, node) pairs the request is not placed on (they failed its pre-checks)."""

    gpr_id: int
    spec: GPRSpec
    submitted_at: datetime
    avoid: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Maintenance:
    """A node out of service from ``start`` to ``end``: the planner plans no window across it."""

    cluster: str
    node: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Placement:
    """``gpus`` are exact for an admission; a later start names nodes and leaves ``gpus`` empty
    (which GPUs of those nodes is decided when the window starts)."""

    cluster: str
    shape: Shape
    nodes: tuple[str, ...]
    gpus: tuple[str, ...]
    count: int = 0


@dataclass(frozen=True)
class Estimate:
    """``start`` is None when the inventory cannot serve the request at all."""

    gpr_id: int
    position: int
    start: datetime | None
    end: datetime | None
    placement: Placement | None


@dataclass(frozen=True)
class Snapshot:
    """``usage``: each slice's decayed GPU-seconds (fair share, two levels: ``projects`` and
    ``project_policies``); ``previous``: the last plan's estimates, which this plan keeps unless
    something ahead changed."""

    nodes: tuple[Node, ...]
    bookings: tuple[Booking, ...] = ()
    queue: tuple[Request, ...] = ()
    pending: tuple[Request, ...] = ()
    policies: Mapping[str, SlicePolicy] = field(default_factory=dict)
    unhealthy_gpus: frozenset[str] = frozenset()
    usage: Mapping[str, float] = field(default_factory=dict)
    previous: Mapping[int, Estimate] = field(default_factory=dict)
    projects: Mapping[str, str] = field(default_factory=dict)  # slice -> project (missing: the default project)
    project_policies: Mapping[str, Project] = field(default_factory=dict)  # the projects' shares and quotas
    # cluster -> the project holding it, for clusters not in the default project: only that project's
    # slices are planned there (core.model.serves)
    cluster_projects: Mapping[str, str] = field(default_factory=dict)
    maintenance: tuple[Maintenance, ...] = ()  # nodes' maintenance windows that have not ended
    order: Order = FAIR_SHARE_FIRST  # how each band's requests are ordered (core/queue.py)


@dataclass(frozen=True)
class Eviction:
    """Ending ``victims`` (provisioned GPRs) lets ``gpr_id``, the top of the queue, start now.

    ``automatic``: the beneficiary's slice policy evicts without an admin's confirmation.
    """

    gpr_id: int
    victims: tuple[int, ...]
    automatic: bool


@dataclass(frozen=True)
class Unplaced:
    """A queued GPR the planner could not place: placing it raised ``error`` (its traceback
    kept, its frames' locals cleared). ``reason`` says why, for the GPR's event."""

    gpr_id: int
    reason: str
    error: Exception = field(repr=False, compare=False)


@dataclass(frozen=True)
class Plan:
    """``unplaced``: the queued GPRs left out of the plan because placing them raised; the
    plan is what it would be without them. ``moved``: why a queued GPR's promise was not held where
    it was (planner.MOVED, by cause); whether that made it later, its estimate says."""

    admits: tuple[Estimate, ...]
    ends: tuple[int, ...]
    estimates: Mapping[int, Estimate]
    approvals: tuple[int, ...]
    evictions: tuple[Eviction, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    moved: Mapping[int, str] = field(default_factory=dict)
    # The planner's state after the pass, for wait-time queries (planner.Views).
    views: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Option:
    """One place that could serve a hypothetical request, and when."""

    cluster: str
    shape: Shape
    start: datetime
    wait: timedelta
    placement: Placement
