"""Idle timeout: when a provisioned GPR's GPUs have sat idle long enough to give them back.

Vocabulary: a GPU is *idle* in a sample when its utilization is below the *idle
threshold* and no process uses it (a source that cannot list processes, the
DCGM exporter, is judged on utilization alone; a unit whose utilization is
unknown but whose processes are listed, an NVML MIG instance, on its processes). A GPR is idle when every one of
its GPUs is; its *idle stretch* began at the first pass that found it idle. A
GPU without a fresh sample is not known to be idle and ends the stretch: no GPR
is released on missing data. The owner is *warned* ``IDLE_WARNING`` before the
release (at once when the timeout is shorter than that).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .model import GPRSpec, SlicePolicy
from .samples import GpuSample

IDLE_WARNING = timedelta(minutes=10)
DEFAULT_IDLE_THRESHOLD = 5.0


def effective_idle_timeout(spec: GPRSpec, policy: SlicePolicy) -> timedelta | None:
    """The GPR's own idle_timeout, else its slice's default, else the slice's maximum."""
    return spec.idle_timeout or policy.idle_timeout or policy.max_idle_timeout


def gpu_idle(sample: GpuSample, threshold: float) -> bool:
    """Below ``threshold`` percent utilization with no process; with utilization unknown, no process
    listed (unknown processes too: not idle)."""
    if sample.utilization is None:
        return sample.processes == ()
    return sample.utilization < threshold and not sample.processes


class IdleAction(enum.StrEnum):
    WARN = "warn"
    RELEASE = "release"


@dataclass(frozen=True)
class IdleWatch:
    """One GPR's current idle stretch: since when, and whether its owner was warned."""

    since: datetime | None = None
    warned: bool = False


@dataclass(frozen=True)
class Watched:
    """A provisioned GPR with an idle timeout: its id, its GPUs and the timeout."""

    gpr_id: int
    gpus: tuple[str, ...]
    timeout: timedelta


@dataclass(frozen=True)
class IdleDecision:
    gpr_id: int
    action: IdleAction
    since: datetime
    release_at: datetime


def watch_gpr(
    watch: IdleWatch,
    gpr: Watched,
    fresh: Mapping[str, GpuSample],
    threshold: float,
    now: datetime,
) -> tuple[IdleWatch, IdleDecision | None]:
    """The GPR's watch after this pass, and what to do now; ``fresh`` holds only recent samples."""
    samples = [fresh.get(uuid) for uuid in gpr.gpus]
    if not samples or not all(s is not None and gpu_idle(s, threshold) for s in samples):
        return IdleWatch(), None
    since = watch.since or now
    release_at = since + gpr.timeout
    if now >= release_at:
        return IdleWatch(since, True), IdleDecision(gpr.gpr_id, IdleAction.RELEASE, since, release_at)
    if not watch.warned and now >= release_at - IDLE_WARNING:
        return IdleWatch(since, True), IdleDecision(gpr.gpr_id, IdleAction.WARN, since, release_at)
    return IdleWatch(since, watch.warned), None


def watch_all(
    watches: Mapping[int, IdleWatch],
    gprs: Iterable[Watched],
    fresh: Mapping[str, GpuSample],
    threshold: float,
    now: datetime,
) -> tuple[dict[int, IdleWatch], list[IdleDecision]]:
    """Every watched GPR's new watch and the decisions, in GPR id order; others are forgotten."""
    updated: dict[int, IdleWatch] = {}
    decisions = []
    for gpr in sorted(gprs, key=lambda g: g.gpr_id):
        updated[gpr.gpr_id], decision = watch_gpr(watches.get(gpr.gpr_id, IdleWatch()), gpr, fresh, threshold, now)
        if decision is not None:
            decisions.append(decision)
    return updated, decisions
