"""Running a cluster's checklist on nodes (core/checks.py decides), and quarantining the nodes that fail
at exit.

A *run* of a phase records one check_runs row per (node, check) as pending first, so the GPR's
checklist shows what is to come, then each as running and with its verdict. The nodes run in parallel,
each node's checks one after another in the checklist's order. ``gpu-health`` is judged here from the
telemetry (a pass taken now); the other kinds run on the backend (``Backend.run_check``); a kind the
backend cannot run is skipped, saying so (PUT /clusters/{name}/checks refuses such a checklist, so
this only happens to a checklist set before the cluster changed kind).

*Quarantine* marks the node (the planner plans nothing on it: queries.planning_inventory), asks the
backend to keep its own scheduler off it, and tells the admins (an event, Slack when configured, and
an Event on a Kubernetes Node); *clear* undoes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend
from ..core import checks
from ..core.checks import CheckStatus, CheckTarget, Verdict
from ..core.model import GPR, Event
from ..core.requests import CheckSpec
from ..store import queries
from ..store.db import transaction
from ..store.models import CheckRun
from .kube_events import KubeEvents, Notice
from .notify import NotifyError, SlackNotifier
from .telemetry import Telemetry

log = logging.getLogger(__name__)
ACTOR = "checks"


class Checklists:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backends: Mapping[str, Backend],
        telemetry: Telemetry,
        clock: Callable[[], datetime],
        *,
        kube_events: KubeEvents | None = None,
        notifier: SlackNotifier | None = None,
        on_change: Callable[[], None] = lambda: None,
    ):
        self.sessions = sessions
        self.backends = backends
        self.telemetry = telemetry
        self.clock = clock
        self.kube_events = kube_events
        self.notifier = notifier
        self.on_change = on_change
        self._tasks: set[asyncio.Task] = set()

    async def run(
        self, cluster: str, nodes: Mapping[str, Sequence[str]], phase: str, gpr: GPR | None = None
    ) -> dict[str, list[str]]:
        """Run the cluster's checks of ``phase`` on ``nodes`` (name -> the GPUs checked there) for
        ``gpr`` and record each; what failed, by node (empty when all passed or were skipped)."""
        return await self._finish(cluster, self._start(cluster, nodes, phase, gpr))

    def check_now(self, cluster: str, node: str, gpus: Sequence[str], user: str) -> None:
        """Run the node's entry checks in the background (recorded pending before this returns); a
        quarantined node whose checks all pass is cleared."""
        runs = self._start(cluster, {node: gpus}, checks.ENTRY, None)

        async def check() -> None:
            if not await self._finish(cluster, runs):
                await self.clear(cluster, node, ACTOR, f"its checks passed (asked by {user})")

        task = asyncio.ensure_future(check())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start(
        self, cluster: str, nodes: Mapping[str, Sequence[str]], phase: str, gpr: GPR | None
    ) -> list[tuple[CheckTarget, list[tuple[CheckSpec, int]]]]:
        """Each node's target and its runs to come, recorded as pending."""
        with transaction(self.sessions) as session:
            specs = checks.checks_at(queries.cluster_checklist(session, cluster), phase)
            namespaces: tuple[str, ...] = ()
            if gpr is not None and (row := queries.get_slice(session, gpr.spec.slice)) is not None:
                namespaces = tuple(queries.slice_namespaces(row).get(cluster, ()))
            targets = [
                CheckTarget(
                    cluster=cluster,
                    node=node,
                    gpus=tuple(nodes[node]),
                    phase=phase,
                    gpr_id=gpr.id if gpr is not None else None,
                    slice=gpr.spec.slice if gpr is not None else None,
                    namespaces=namespaces,
                )
                for node in sorted(nodes)
            ]
            rows = {target.node: [self._pending(session, spec, target) for spec in specs] for target in targets}
            queries.note_check_runs(session, [row for pending in rows.values() for row in pending])
            return [(t, [(spec, row.id) for spec, row in zip(specs, rows[t.node], strict=True)]) for t in targets]

    async def _finish(
        self, cluster: str, runs: list[tuple[CheckTarget, list[tuple[CheckSpec, int]]]]
    ) -> dict[str, list[str]]:
        backend = self.backends.get(cluster)
        failed = await asyncio.gather(*(self._run_node(backend, target, specs) for target, specs in runs))
        return {target.node: problems for (target, _), problems in zip(runs, failed, strict=True) if problems}

    @staticmethod
    def _pending(session: Session, spec: CheckSpec, target: CheckTarget) -> CheckRun:
        row = CheckRun(
            gpr_id=target.gpr_id,
            cluster=target.cluster,
            node=target.node,
            name=spec.name,
            kind=spec.kind,
            phase=target.phase,
            status=CheckStatus.PENDING,
            values={},
            log="",
        )
        session.add(row)
        session.flush()
        return row

    async def _run_node(
        self, backend: Backend | None, target: CheckTarget, runs: list[tuple[CheckSpec, int]]
    ) -> list[str]:
        problems = []
        for spec, run_id in runs:
            self._update(run_id, status=CheckStatus.RUNNING, started_at=self.clock())
            try:
                verdict = await self._judge(backend, spec, target)
            except Exception as e:
                log.exception("check %s on node %s (%s) could not run", spec.name, target.node, target.cluster)
                verdict = Verdict(CheckStatus.FAILED, f"the check could not run: {e}")
            self._update(
                run_id, status=verdict.status, finished_at=self.clock(), values=verdict.values, log=verdict.log
            )
            if verdict.status is CheckStatus.FAILED:
                problems.append(f"{spec.name}: {verdict.log.splitlines()[0] if verdict.log else 'failed'}")
        return problems

    async def _judge(self, backend: Backend | None, spec: CheckSpec, target: CheckTarget) -> Verdict:
        if spec.kind == "gpu-health":
            samples, alerts = await self.telemetry.read_now(self.clock())
            with self.sessions() as session:
                identities = queries.gpu_identities(session, target.gpus)
            gpus = [identities[g] for g in target.gpus if g in identities]
            matched = checks.match_samples(gpus, samples.values())
            return checks.gpu_health(spec, target.gpus, matched, alerts, target.phase)
        if backend is None:
            return checks.skipped(f"cluster {target.cluster} is not connected")
        if spec.kind not in backend.check_kinds:
            return checks.skipped(f"{spec.kind} checks do not run on {backend.kind} clusters")
        return await asyncio.wait_for(backend.run_check(spec, target), spec.timeout.total_seconds() + 30)

    def _update(self, run_id: int, **fields) -> None:
        with transaction(self.sessions) as session:
            row = session.get(CheckRun, run_id)
            for name, value in fields.items():
                setattr(row, name, value)

    # Quarantine

    async def quarantine(self, cluster: str, node: str, reason: str, actor: str, gpr: GPR | None = None) -> None:
        """Take the node out of planning until it is cleared; tell the admins (and ``gpr``'s holders, when
        the node is quarantined after it)."""
        said = f"node {node} ({cluster}) is quarantined: {reason}"
        if self._mark(cluster, node, reason, "node-quarantined", said, actor, gpr):
            await self._tell(cluster, node, Notice("Warning", "Quarantined", f"egs-hub quarantined the node: {reason}"))
            await self._on_backend(cluster, node, "quarantine", reason)

    async def clear(self, cluster: str, node: str, actor: str, reason: str) -> None:
        said = f"node {node} ({cluster}) is out of quarantine: {reason}"
        if self._mark(cluster, node, None, "node-cleared", said, actor, None):
            await self._on_backend(cluster, node, "clear")
            await self._tell(cluster, node, Notice("Normal", "QuarantineCleared", f"egs-hub: {reason}"))

    def _mark(
        self, cluster: str, node: str, reason: str | None, kind: str, said: str, actor: str, gpr: GPR | None
    ) -> bool:
        """Quarantine the node for ``reason`` (None: clear it) with its event; False when it is not there or
        (clearing) not quarantined."""
        now = self.clock()
        with transaction(self.sessions) as session:
            row = queries.find_node(session, cluster, node)
            if row is None or (reason is None and row.quarantined_at is None):
                return False
            row.quarantined_at, row.quarantine_reason = (None, None) if reason is None else (now, reason)
            queries.add_event(
                session,
                Event(
                    kind=kind,
                    actor=actor,
                    reason=said,
                    time=now,
                    gpr_id=gpr.id if gpr is not None else None,
                    slice=gpr.spec.slice if gpr is not None else None,
                    data={"cluster": cluster, "node": node},
                ),
            )
        self.on_change()
        return True

    async def _on_backend(self, cluster: str, node: str, action: str, *args) -> None:
        """Quarantine or clear the node on its cluster too; a failure is logged (the planner's quarantine
        holds either way), and the admin sees the node's state there."""
        backend = self.backends.get(cluster)
        if backend is None:
            return
        try:
            await getattr(backend, action)(node, *args)
        except Exception as e:
            log.warning("node %s (%s): %s on the cluster failed: %s", node, cluster, action, e)

    async def _tell(self, cluster: str, node: str, notice: Notice) -> None:
        if self.kube_events is not None:
            self.kube_events.about_node(cluster, node, notice)
        if self.notifier is not None:
            try:
                await self.notifier.send(f"node {node} ({cluster}): {notice.message}")
            except NotifyError as e:
                log.warning("Slack not told of node %s: %s", node, e)
