"""The reconcile loop: snapshot the store, plan, act on the backends.

It runs on every change (``wake``) and on a short tick, and sleeps no longer
than until the next window ends. Each pass plans with the last plan's promises
(planning.py), fails the GPRs the planner could not place (one GPR never stops
planning: the plan is made without it, issue 25), ends windows, evicts when the
planner names victims and the policy says so without an admin, and admits. The
store is the truth: a GPR found ``provisioning`` is bound (again), one found
``releasing`` is unbound (again), so a restarted service picks up exactly where
the last one stopped. Backend calls run as one task per GPR, so a slow server
restart never delays another GPR's window.

Each cluster has its backend (``backends``, by cluster name); a GPR is bound and
unbound by the backend of the cluster its GPUs are on (the store's allocations:
GPU -> node -> cluster). Around both, the slice's setup on that cluster follows
the GPUs it holds (``slice_setup``: its GPU quota is raised before the nodes
enter and lowered once they have left), and Kubernetes Events say what happened
(``kube_events``); neither ever stops a bind or unbind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend, BindError, ServerRef, UnbindError
from ..backends.kubernetes import ClusterUnavailable, SliceConflict
from ..core import bind_failures, checks, lifecycle
from ..core.errors import Conflict
from ..core.model import GPR, EndReason, Event, Status
from ..core.snapshot import Estimate, Eviction, Plan, Snapshot, Unplaced
from ..store import queries
from ..store.db import transaction
from . import kube_events as notices
from .checks import ACTOR as CHECKS_ACTOR
from .checks import Checklists
from .exporter import Exporter
from .kube_events import KubeEvents
from .planning import Planned, Planning, eviction_proposals, issue_eviction
from .slice_setup import SliceSetup

log = logging.getLogger(__name__)
_REST = 2.0  # after a plan of p seconds, the next pass waits at least _REST * p


def server_refs(rows) -> list[ServerRef]:
    return [ServerRef(user=s.user, name=s.server_name, gpus=tuple(s.gpus)) for s in rows]


class Reconciler:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backends: Mapping[str, Backend],
        clock: Callable[[], datetime],
        interval: float = 1.0,
        retry_interval: float = 5.0,
        *,
        planning: Planning | None = None,
        exporter: Exporter | None = None,
        slice_setup: SliceSetup | None = None,
        kube_events: KubeEvents | None = None,
        checklists: Checklists | None = None,
    ):
        self.sessions = sessions
        self.backends = backends
        self.clock = clock
        self.interval = interval
        self.planning = planning or Planning()
        self.exporter = exporter
        self.retry_interval = retry_interval
        self.slice_setup = slice_setup
        self.kube_events = kube_events
        self.checklists = checklists
        self._exiting: set[int] = set()  # GPRs whose exit began and was announced
        self._entry_passed: set[int] = set()  # GPRs whose nodes passed their entry checks (binding again skips them)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._tasks: dict[int, asyncio.Task] = {}
        self._retry_at: dict[int, datetime] = {}
        self._runner: asyncio.Task | None = None
        self._due = datetime.min.replace(tzinfo=UTC)  # when the last plan has something happen: a pass plans then
        self._acted: Planned | None = None  # the plan the last pass acted on

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._runner = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        tasks = [t for t in [self._runner, *self._tasks.values()] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                next_due = await self.tick()
            except Exception:
                log.exception("reconcile pass failed; trying again in %.0f s", self.retry_interval)
                next_due = self.clock() + timedelta(seconds=self.retry_interval)
            ended = time.monotonic()
            delay = max(0.0, min(self.interval, (next_due - self.clock()).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            self._wake.clear()
            # Woken by a stream of changes, the next pass waits at least twice as long as the last plan
            # took: planning (in a worker thread, but holding the GIL) takes at most about a third of
            # the service's time, and the event loop serves requests with the rest.
            rest = _REST * self.planning.pass_seconds - (time.monotonic() - ended)
            if rest > 0:
                await asyncio.sleep(rest)

    async def tick(self) -> datetime:
        """One pass; returns when the next pass is due at the latest. It plans unless the last plan
        is the one it acted on, is still current (planning.Planning.still_current) and has nothing
        due yet: then it only drives the backends."""
        async with self._lock:
            now = self.clock()
            if now < self._due and self.planning.last is self._acted and self.planning.still_current(now):
                self._drive_backend(now)
                return min(self._due, now + timedelta(seconds=self.interval))
            # 1. snapshot and 2. decide, in a worker thread (planning.Planning.fresh)
            with self.sessions() as session:
                evicting = bool(queries.evictions_in_flight(session))
            self._acted = await self.planning.fresh(self.sessions, now)
            snapshot, decisions, _ = self._acted
            if self.exporter is not None:
                self.exporter.observe_pass(self.planning.pass_seconds)
            evictions = [e for e in eviction_proposals(snapshot, decisions, now, evicting) if e.automatic]
            # 3. act
            self._fail_unplaced(decisions.unplaced, now)
            self._end_windows(decisions, now)
            self._evict(evictions, now)
            self._admit(decisions.admits)
            self._drive_backend(now)
            with transaction(self.sessions) as session:
                moved = self.planning.save(session)
            if self.exporter is not None:
                for event_ in moved:
                    self.exporter.observe_moved(event_.data["cause"])
            self._due = self._next_due(snapshot, decisions, now)
            return min(self._due, now + timedelta(seconds=self.interval))

    @staticmethod
    def _next_due(snapshot: Snapshot, decisions: Plan, now: datetime) -> datetime:
        """The soonest of what the plan says happens later: a window's end, a queued GPR's planned
        start (the end of time when there is none)."""
        due = [datetime.max.replace(tzinfo=UTC)]
        due.extend(b.end for b in snapshot.bookings if not b.releasing and b.end > now)
        due.extend(e.end for e in decisions.admits)
        due.extend(e.start for e in decisions.estimates.values() if e.start and e.start > now)
        return min(due)

    def _fail_unplaced(self, unplaced: tuple[Unplaced, ...], now: datetime) -> None:
        """Fail each queued GPR the planner could not place, with the reason; the error is logged."""
        for item in unplaced:
            log.error(
                "GPR %s: the planner could not place it (%s); failing it",
                item.gpr_id,
                item.reason,
                exc_info=item.error,
            )
            with transaction(self.sessions) as session:
                row = queries.get_gpr_row(session, item.gpr_id, lock=True)
                if row is None or row.status != Status.QUEUED:
                    continue
                reason = f"the planner could not place this GPR: {item.reason}"
                queries.apply(session, row, lifecycle.fail(queries.to_gpr(row), lifecycle.PLANNER, reason, now))

    def _end_windows(self, decisions: Plan, now: datetime) -> None:
        for gpr_id in decisions.ends:
            with transaction(self.sessions) as session:
                row = queries.get_gpr_row(session, gpr_id, lock=True)
                if row is None or row.status != Status.PROVISIONED or row.window_end > now:
                    continue
                queries.apply(
                    session,
                    row,
                    lifecycle.begin_release(
                        queries.to_gpr(row), EndReason.WINDOW_ENDED, lifecycle.PLANNER, "window ended", now
                    ),
                )

    def _evict(self, evictions: list[Eviction], now: datetime) -> None:
        """Evict what the planner names where the policy needs no admin ("auto")."""
        for eviction in evictions:
            try:
                with transaction(self.sessions) as session:
                    issue_eviction(session, eviction, lifecycle.PLANNER, now)
                # Its promise was a later start; it is planned afresh now that room is being made.
                self.planning.forget([eviction.gpr_id])
            except Conflict as e:
                # The snapshot was stale (a victim was released meanwhile): the next pass plans again.
                log.info("eviction for GPR %s not issued: %s", eviction.gpr_id, e)
            self.wake()

    def _admit(self, admits: tuple[Estimate, ...]) -> None:
        """Admit the plan's admits, each window starting when it is written: the plan's snapshot was read
        after the pass's ``now``, so a GPR that gave these GPUs back in between ended after ``now``."""
        for estimate in admits:
            placement = estimate.placement
            now = self.clock()
            try:
                with transaction(self.sessions) as session:
                    row = queries.get_gpr_row(session, estimate.gpr_id, lock=True)
                    if row is None or row.status != Status.QUEUED:
                        continue
                    price = queries.price_of(session, placement.cluster, placement.shape.name)
                    gpr = queries.apply(
                        session,
                        row,
                        lifecycle.admit(queries.to_gpr(row), placement.gpus, placement.nodes, now, price),
                    )
                    queries.bind(session, gpr)
            except IntegrityError:
                # A GPU of this placement is bound already: the snapshot was stale.
                log.warning("GPR %s: placement %s is taken; planning again", estimate.gpr_id, placement.gpus)
                self.wake()
            else:
                self._observe_start(gpr, now)

    def _observe_start(self, gpr: GPR, now: datetime) -> None:
        """Wait from submission (or the asked start_after) to start, and the first estimate's error."""
        if self.exporter is None:
            return
        asked = max(gpr.created_at, gpr.spec.start_after or gpr.created_at)
        first = self.planning.first_start(gpr.id)
        error = None if first is None else (now - first).total_seconds()
        self.exporter.observe_start((now - asked).total_seconds(), error)

    def _drive_backend(self, now: datetime) -> None:
        """Start a bind for every provisioning GPR and an unbind for every releasing one."""
        with self.sessions() as session:
            rows = queries.gpr_rows(session, statuses=[Status.PROVISIONING, Status.RELEASING])
            work = [(r.id, Status(r.status)) for r in rows]
        for gpr_id, status in work:
            task = self._tasks.get(gpr_id)
            if (task is not None and not task.done()) or self._retry_at.get(gpr_id, now) > now:
                continue
            action = self._bind if status is Status.PROVISIONING else self._unbind
            self._spawn(gpr_id, action(gpr_id))

    def _spawn(self, gpr_id: int, work: Coroutine) -> None:
        task = asyncio.ensure_future(work)
        self._tasks[gpr_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(gpr_id, None))

    def _load(self, session: Session, gpr_id: int, status: Status) -> GPR | None:
        row = queries.get_gpr_row(session, gpr_id)
        return queries.to_gpr(row) if row is not None and row.status == status else None

    async def _bind(self, gpr_id: int) -> None:
        with self.sessions() as session:
            gpr = self._load(session, gpr_id, Status.PROVISIONING)
            if gpr is None:
                return
            cluster = queries.bound_cluster(session, gpr_id)
            slice_row = queries.get_slice(session, gpr.spec.slice)
            policy = queries.slice_policy(slice_row)
            servers = server_refs(queries.slice_servers(session, gpr.spec.slice))
            on_nodes = queries.gpus_by_node(session, gpr.bound_gpus)
        backend = self.backends.get(cluster)
        if backend is None:
            reason = f"its GPUs are on cluster {cluster!r}, which is not registered any more"
            self._finish(gpr_id, Status.PROVISIONING, partial(lifecycle.fail, actor=lifecycle.PLANNER, reason=reason))
            return
        # The slice's quota there first counts these GPUs, so its pods are not refused once the nodes are in.
        if not await self._sync_slice(gpr, cluster):
            self._retry_later(gpr_id)
            return
        try:
            await self._check_entry(gpr, cluster, on_nodes)
            events = await backend.bind(gpr, policy, servers, self.clock())
        except BindError as e:
            self._entry_passed.discard(gpr_id)
            with self.sessions() as session:
                nodes, unhealthy = queries.planning_inventory(session)
            settle = partial(
                bind_failures.settle,
                policy=policy,
                cluster=cluster,
                failed=e.nodes,
                reason=str(e),
                nodes=nodes,
                unhealthy=unhealthy,
                actor=backend.kind,
            )
            settled = self._finish(gpr_id, Status.PROVISIONING, settle)
            if settled is not None:
                moved = settled.status is Status.QUEUED
                notice = notices.provision_moved(gpr, str(e)) if moved else notices.provision_failed(settled)
                self._notify(cluster, gpr, notice)
            return
        except Exception:
            log.exception("GPR %s: binding on cluster %s failed; trying again", gpr_id, cluster)
            self._retry_later(gpr_id)
            return
        provisioned = partial(lifecycle.mark_provisioned, actor=backend.kind)
        self._finish(gpr_id, Status.PROVISIONING, provisioned, events)
        self._entry_passed.discard(gpr_id)
        self._notify(cluster, gpr, notices.provisioned(gpr))

    async def _check_entry(self, gpr: GPR, cluster: str, on_nodes: dict[str, list[str]]) -> None:
        """Run the entry checks on the GPR's nodes (once); BindError naming the nodes that fail."""
        if self.checklists is None or gpr.id in self._entry_passed:
            return
        failed = await self.checklists.run(cluster, on_nodes, checks.ENTRY, gpr)
        if failed:
            problems = "; ".join(f"node {node}: {', '.join(found)}" for node, found in sorted(failed.items()))
            raise BindError(f"cluster {cluster}: entry checks failed: {problems}", sorted(failed))
        self._entry_passed.add(gpr.id)

    async def _check_exit(self, gpr: GPR, cluster: str, on_nodes: dict[str, list[str]]) -> None:
        """Run the exit checks on the GPR's nodes, now returned; quarantine those that fail."""
        if self.checklists is None:
            return
        try:
            failed = await self.checklists.run(cluster, on_nodes, checks.EXIT, gpr)
            for node, problems in sorted(failed.items()):
                reason = f"exit checks after GPR {gpr.id} failed: {'; '.join(problems)}"
                await self.checklists.quarantine(cluster, node, reason, CHECKS_ACTOR, gpr)
        except Exception:
            log.exception("GPR %s: the exit checks on cluster %s could not finish", gpr.id, cluster)

    async def _sync_slice(self, gpr: GPR, cluster: str) -> bool:
        """Bring the slice's setup on the cluster in line with the GPUs it holds; False while the cluster fails.

        A namespace conflict is the admin's to settle (the slice's pods reach its nodes all the same): logged.
        """
        if self.slice_setup is None:
            return True
        try:
            await self.slice_setup.sync_slice(gpr.spec.slice, cluster)
        except ClusterUnavailable as e:
            log.warning("GPR %s: the quota of slice %s not set: %s", gpr.id, gpr.spec.slice, e)
            return False
        except SliceConflict as e:
            log.warning("GPR %s: slice %s is not fully set up on cluster %s: %s", gpr.id, gpr.spec.slice, cluster, e)
        return True

    def _notify(self, cluster: str, gpr: GPR, notice: notices.Notice) -> None:
        if self.kube_events is not None:
            self.kube_events.about_gpr(cluster, gpr, notice)

    async def _unbind(self, gpr_id: int) -> None:
        with self.sessions() as session:
            gpr = self._load(session, gpr_id, Status.RELEASING)
            if gpr is None:
                return
            cluster = queries.bound_cluster(session, gpr_id)
            holders = server_refs(queries.servers_holding(session, gpr.bound_gpus))
            on_nodes = queries.gpus_by_node(session, gpr.bound_gpus)
            slice_row = queries.get_slice(session, gpr.spec.slice)
            requeue = (
                gpr.end_reason is EndReason.EVICTED
                and slice_row is not None
                and queries.slice_policy(slice_row).requeue_evicted
            )
        backend = self.backends.get(cluster)
        # An evicted GPR whose slice re-queues evicted work waits again; the others are done.
        actor = backend.kind if backend is not None else lifecycle.PLANNER
        done = (
            partial(lifecycle.requeue, actor=lifecycle.PLANNER) if requeue else partial(lifecycle.complete, actor=actor)
        )
        if backend is None:
            # Its cluster left the config: nothing here can take the GPUs back, so they are let go.
            gone = Event(
                kind="cluster-gone",
                actor=lifecycle.PLANNER,
                reason=f"cluster {cluster!r} is not registered any more; its nodes were not returned",
                time=self.clock(),
                gpr_id=gpr_id,
                slice=gpr.spec.slice,
                data={"cluster": cluster},
            )
            self._finish(gpr_id, Status.RELEASING, done, [gone])
            return
        if gpr_id not in self._exiting:
            self._exiting.add(gpr_id)
            self._notify(cluster, gpr, notices.exit_begins(gpr))
        try:
            events = await backend.unbind(gpr, holders, self.clock())
        except UnbindError as e:
            log.warning("GPR %s: unbinding did not finish (%s); trying again", gpr_id, e)
            self._record(e.events)
            self._retry_later(gpr_id)
            return
        except Exception:
            log.exception("GPR %s: unbinding on cluster %s failed; trying again", gpr_id, cluster)
            self._retry_later(gpr_id)
            return
        await self._check_exit(gpr, cluster, on_nodes)
        self._finish(gpr_id, Status.RELEASING, done, events)
        self._exiting.discard(gpr_id)
        self._notify(cluster, gpr, notices.released(gpr))
        # The slice's quota there no longer counts these GPUs (a failure: its loop tries again).
        await self._sync_slice(gpr, cluster)

    def _record(self, events) -> None:
        if events:
            with transaction(self.sessions) as session:
                for event in events:
                    queries.add_event(session, event)

    def _retry_later(self, gpr_id: int) -> None:
        self._retry_at[gpr_id] = self.clock() + timedelta(seconds=self.retry_interval)

    def _finish(self, gpr_id: int, expected: Status, transition, events=()) -> GPR | None:
        """Record a backend outcome, unless the GPR moved on meanwhile (None)."""
        self._retry_at.pop(gpr_id, None)
        now = self.clock()
        with transaction(self.sessions) as session:
            row = queries.get_gpr_row(session, gpr_id, lock=True)
            if row is None or row.status != expected:
                return None
            before = queries.to_gpr(row)
            gpr = queries.apply(session, row, transition(before, now=now))
            if before.status is Status.RELEASING and gpr.status is Status.QUEUED and before.window_start is not None:
                queries.add_past_window(session, before, now)  # re-queued: its usage and cost are kept
            for event in events:
                queries.add_event(session, event)
            if not gpr.status.holds_gpus:
                queries.unbind(session, gpr_id)
        self.wake()
        return gpr
