"""Kubernetes Events for what happens to GPRs and GPUs on a Kubernetes cluster (issue 4, item 8; issue 6).

Vocabulary: an *Event target* is a backend that records Events (today the
Kubernetes backend; on the local host nothing is recorded). The store's events
stay the audit trail; these Events tell people who look with kubectl:

GPR Events are about the GPR's resource when it was applied with kubectl and
still exists (gpr_sync.py), else about the slice's namespaces on its cluster.

| what                              | Event (type, reason)                                   | about                 |
|-----------------------------------|--------------------------------------------------------|-----------------------|
| a GPR's nodes entered the slice   | Normal Provisioned                                     | the slice's namespaces|
| a GPR failed its entry            | Warning ProvisionFailed                                | the slice's namespaces|
| a GPR's exit begins               | Normal WindowEnded / ReleasedEarly / IdleReleased,     | the slice's namespaces|
|                                   | Warning Evicted                                        |                       |
| a GPR's nodes left the slice      | Normal Released                                        | the slice's namespaces|
| a GPU alert is raised / cleared   | Warning GPUAlert / Normal GPUAlertCleared              | the GPU's Node        |

Recording never holds anything up: each Event is written by a task of its own,
and a failure is logged and dropped (Events are a courtesy, not the record).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend
from ..backends.kubernetes import gpr_resources
from ..backends.kubernetes.events import Notice
from ..backends.kubernetes.gpr_api import GPRResourceAPI
from ..core.model import GPR, EndReason
from ..store import queries

log = logging.getLogger(__name__)

EXIT_NOTICES = {
    EndReason.WINDOW_ENDED: ("Normal", "WindowEnded", "its window ended"),
    EndReason.RELEASED_EARLY: ("Normal", "ReleasedEarly", "it was released early"),
    EndReason.IDLE_RELEASED: ("Normal", "IdleReleased", "its GPUs stayed idle"),
    EndReason.EVICTED: ("Warning", "Evicted", "it was evicted for a higher-priority GPR"),
}


@runtime_checkable
class EventTarget(Protocol):
    async def record_slice_event(self, namespaces: Sequence[str], notice: Notice, now: datetime) -> None: ...

    async def record_node_event(self, node: str, notice: Notice, now: datetime) -> None: ...


@runtime_checkable
class GPRResourceHost(Protocol):
    """A backend whose GPR custom resources can be watched and written (the Kubernetes backend)."""

    async def gpr_resources(self) -> GPRResourceAPI: ...


def _nodes(gpr: GPR) -> str:
    return ", ".join(gpr.bound_nodes) or "none"


def provisioned(gpr: GPR) -> Notice:
    return Notice(
        "Normal",
        "Provisioned",
        f"GPR {gpr.id}: node(s) {_nodes(gpr)} with {len(gpr.bound_gpus)} GPU(s) are the slice's until "
        f"{gpr.window_end:%Y-%m-%d %H:%M:%S} UTC",
    )


def provision_failed(gpr: GPR) -> Notice:
    return Notice("Warning", "ProvisionFailed", f"GPR {gpr.id} failed: {gpr.status_reason}")


def provision_moved(gpr: GPR, reason: str) -> Notice:
    why = f"GPR {gpr.id} did not enter node(s) {_nodes(gpr)} and is queued again for other nodes: {reason}"
    return Notice("Warning", "ProvisionMoved", why)


def exit_begins(gpr: GPR) -> Notice:
    kind, reason, why = EXIT_NOTICES[gpr.end_reason or EndReason.WINDOW_ENDED]
    return Notice(
        kind,
        reason,
        f"GPR {gpr.id} ends ({why}): node(s) {_nodes(gpr)} leave the slice; its pods there are evicted",
    )


def released(gpr: GPR) -> Notice:
    return Notice("Normal", "Released", f"GPR {gpr.id}: node(s) {_nodes(gpr)} left the slice")


def alert(raised: bool, message: str) -> Notice:
    return Notice("Warning", "GPUAlert", message) if raised else Notice("Normal", "GPUAlertCleared", message)


class KubeEvents:
    def __init__(self, sessions: sessionmaker[Session], backends: Mapping[str, Backend], clock: Callable[[], datetime]):
        self.sessions = sessions
        self.backends = backends
        self.clock = clock
        self._tasks: set[asyncio.Task] = set()

    def _target(self, cluster: str | None) -> EventTarget | None:
        backend = self.backends.get(cluster) if cluster is not None else None
        return backend if isinstance(backend, EventTarget) else None

    def about_gpr(self, cluster: str | None, gpr: GPR, notice: Notice) -> None:
        """Record the notice on the GPR's resource when it has one, else as ``about_slice``."""
        with self.sessions() as session:
            link = queries.live_gpr_resource(session, gpr.id)
            ref = None if link is None else gpr_resources.ResourceRef(link.cluster, link.namespace, link.name, link.uid)
        backend = self.backends.get(ref.cluster) if ref is not None else None
        if not isinstance(backend, GPRResourceHost):
            self.about_slice(cluster, gpr.spec.slice, notice)
            return
        self._spawn(ref.cluster, notice, self._record_on_resource(backend, ref, notice))

    async def _record_on_resource(
        self, backend: GPRResourceHost, ref: gpr_resources.ResourceRef, notice: Notice
    ) -> None:
        api = await backend.gpr_resources()
        await api.record_event(ref, notice, self.clock())

    def about_slice(self, cluster: str | None, slice_name: str, notice: Notice) -> None:
        """Record the notice in the slice's namespaces on the cluster (none there: nothing)."""
        target = self._target(cluster)
        if target is None:
            return
        with self.sessions() as session:
            row = queries.get_slice(session, slice_name)
            namespaces = queries.slice_namespaces(row).get(cluster, ()) if row is not None else ()
        if namespaces:
            self._spawn(cluster, notice, target.record_slice_event(namespaces, notice, self.clock()))

    def about_node(self, cluster: str | None, node: str, notice: Notice) -> None:
        target = self._target(cluster)
        if target is not None:
            self._spawn(cluster, notice, target.record_node_event(node, notice, self.clock()))

    def _spawn(self, cluster: str, notice: Notice, work) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._done(t, cluster, notice))

    def _done(self, task: asyncio.Task, cluster: str, notice: Notice) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("cluster %s: Event %s not recorded: %s", cluster, notice.reason, task.exception())

    async def drain(self) -> None:
        """Wait for the Events being written (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
