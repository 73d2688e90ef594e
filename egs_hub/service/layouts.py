"""Changing a node's MIG layout (core/layouts.py): the admin's change, and the pass that finishes it.

``change`` checks that the node is free and the layout fits its GPUs, asks its cluster's backend to
start the change, then records in one transaction the change, a maintenance window on each of the
node's planning nodes (those of the old layout and of the new) until ``ready_by``, and an event;
the cluster's inventory is read again at once and the plan made again, so the new instances are
planned from ``ready_by`` on. The pass (``tick``) asks the backend how each pending change goes: done
once the backend says so and ``ready_by`` has passed, failed when it says so (an event either way).
A pending change keeps its node's maintenance windows; a failed one leaves them to end as planned.

Layout targets (``EGSService.layout_targets``, core/layouts.target_moves) are kept by the same pass,
every TARGET_INTERVAL seconds: the machines of the targets' GPU types are read, and free ones are
re-partitioned toward a target short of machines, by ``change`` as an admin's change would be. A
machine is free when no GPR holds it, no change is under way there, it is schedulable, and no queued
GPR is planned on it (so a target never moves a promise). A change the backend refuses (a node that
is not MIG-capable, say) is logged and that machine left alone for REFUSED_FOR seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend, LayoutChangeError
from ..backends.kubernetes import ClusterUnavailable
from ..core import layouts
from ..core import model as core
from ..core.errors import Conflict, NotFound, PolicyViolation, Unavailable
from ..core.layouts import Machine, Target
from ..core.requests import LayoutChangeCreate
from ..core.sharing import host_of
from ..core.snapshot import Placement
from ..store import queries
from ..store.db import transaction
from ..store.models import LayoutChangeRow, MaintenanceWindow
from .periodic import Periodic

log = logging.getLogger(__name__)
ACTOR = "layouts"
TARGET_INTERVAL = 30.0  # seconds between checks of the layout targets
REFUSED_FOR = 600.0  # seconds a machine whose change was refused is left out of the targets


def _event(kind: str, actor: str, row: LayoutChangeRow, reason: str, now: datetime) -> core.Event:
    data = {"cluster": row.cluster, "node": row.node, "layout_change": row.id, "mig": row.mig}
    return core.Event(kind=kind, actor=actor, reason=reason, time=now, data=data)


class Layouts(Periodic):
    name = "layout pass"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        backends: Mapping[str, Backend],
        clock: Callable[[], datetime],
        interval: float,
        seconds: float,
        refresh: Callable[[str], Awaitable[None]],
        on_change: Callable[[], None] = lambda: None,
        targets: Sequence[Target] = (),
        planned: Callable[[], Iterable[Placement]] = lambda: (),
    ):
        self.sessions = sessions
        self.backends = backends
        self.clock = clock
        self.interval = interval
        self.seconds = seconds  # how long a re-partition takes (EGSService.repartition_seconds)
        self.refresh = refresh  # read a cluster's inventory again (Clusters.refresh_cluster)
        self.on_change = on_change
        self.targets = tuple(targets)  # EGSService.layout_targets
        self.planned = planned  # where the last plan places the queued GPRs
        self._targets_due = 0.0  # time.monotonic() of the next check of the targets
        self._refused: dict[tuple[str, str], float] = {}  # (cluster, machine) -> left out until then

    async def change(self, cluster: str, host: str, body: LayoutChangeCreate, actor: str) -> LayoutChangeRow:
        """Start changing the layout of machine ``host`` of ``cluster`` to ``body``'s; the change recorded."""
        backend = self.backends.get(cluster)
        if backend is None:
            raise NotFound(f"cluster {cluster!r}")
        with self.sessions() as session:
            nodes, gpus = queries.host_inventory(session, cluster, host)
            if not nodes:
                raise NotFound(f"node {host!r} in cluster {cluster!r}")
            rows = queries.layout_changes(session, cluster, host)
            pending = [r for r in rows[:1] if r.state == "pending"]
            if pending:
                raise Conflict(
                    f"node {host} is being re-partitioned already (change {pending[0].id}, expected done by "
                    f"{pending[0].ready_by.isoformat()}); ask when it is done"
                )
            holders = [g.id for n in nodes for g in queries.gprs_holding_node(session, cluster, n.name)]
        current = layouts.current_layout(nodes, gpus, queries.last_done_layout(rows))
        layouts.check_change(host, nodes, current, body.mig, holders)
        shape = nodes[0].shape
        config = body.mig_config or layouts.default_mig_config(shape.model, shape.memory_gb, body.mig)
        try:
            config, message = await backend.change_layout(host, body.mig, config)
        except LayoutChangeError as e:
            raise Conflict(str(e)) from None
        except ClusterUnavailable as e:
            raise Unavailable(f"{e}; nothing was changed, try again") from None
        now = self.clock()
        with transaction(self.sessions) as session:
            row = LayoutChangeRow(
                cluster=cluster,
                node=host,
                mig=body.mig,
                mig_config=config,
                state="pending",
                message=message,
                reason=body.reason,
                created_by=actor,
                created_at=now,
                ready_by=layouts.ready_by(now, self.seconds),
            )
            session.add(row)
            session.flush()
            what = f"node {host} ({cluster}) is re-partitioned from {layouts.describe(current)} to "
            what += f"{layouts.describe(body.mig)}, out of service until {row.ready_by.isoformat()}"
            for name in {n.name for n in nodes} | set(layouts.planning_nodes(host, body.mig)):
                session.add(
                    MaintenanceWindow(
                        cluster=cluster,
                        node=name,
                        start=now,
                        end=row.ready_by,
                        reason=f"re-partitioning (layout change {row.id})",
                        created_by=actor,
                        created_at=now,
                    )
                )
            queries.add_event(
                session,
                _event("layout-change-started", actor, row, f"{what}: {body.reason}" if body.reason else what, now),
            )
            session.expunge(row)
        await self.refresh(cluster)
        self.on_change()
        return row

    async def tick(self) -> None:
        """One pass: how each pending change goes."""
        with self.sessions() as session:
            pending = queries.pending_layout_changes(session)
        for row in pending:
            backend = self.backends.get(row.cluster)
            if backend is None:
                continue
            try:
                state, message = await backend.layout_state(row.node, row.mig_config)
            except Exception:
                log.exception("how the layout change %s of node %s goes could not be read", row.id, row.node)
                continue
            now = self.clock()
            if state == "pending" or (state == "done" and now < row.ready_by):
                if message != row.message:
                    self._finish(row.id, "pending", message, None)
                continue
            self._finish(row.id, state, message, now)
            await self.refresh(row.cluster)
            self.on_change()
        await self._keep_targets()

    async def _keep_targets(self) -> None:
        """Start the changes the layout targets want (every TARGET_INTERVAL at most)."""
        if not self.targets or time.monotonic() < self._targets_due:
            return
        self._targets_due = time.monotonic() + TARGET_INTERVAL
        with self.sessions() as session:
            machines = self._machines(session)
        for machine, target in layouts.target_moves(self.targets, machines):
            reason = (
                f"layout target: keep {target.nodes} {target.gpu_type} machine(s) in {layouts.describe(target.layout)}"
            )
            body = LayoutChangeCreate(mig=target.layout, mig_config=target.mig_config, reason=reason)
            try:
                await self.change(machine.cluster, machine.host, body, ACTOR)
            except (Conflict, NotFound, PolicyViolation, Unavailable) as e:
                log.warning("layout target: node %s (%s) was not re-partitioned: %s", machine.host, machine.cluster, e)
                self._refused[(machine.cluster, machine.host)] = time.monotonic() + REFUSED_FOR

    def _machines(self, session: Session) -> list[Machine]:
        """The machines whose GPUs are of a target's type, as the targets see them."""
        types = {t.gpu_type for t in self.targets}
        hosts: dict[tuple[str, str], list] = {}
        for cluster, row in queries.node_rows(session):
            if row.present and f"{row.gpu_model}-{row.gpu_memory_gb}GB" in types:
                hosts.setdefault((cluster, host_of(row.name)), []).append(row)
        held = {(cluster, host_of(node)) for cluster, node in queries.node_holders(session)}
        planned = {(p.cluster, host_of(node)) for p in self.planned() for node in p.nodes}
        pending = {(r.cluster, r.node): r.mig for r in queries.pending_layout_changes(session)}
        now = time.monotonic()
        machines = []
        for (cluster, host), rows in sorted(hosts.items()):
            if any(row.replicas > 1 for row in rows):
                continue  # time-sliced: not a MIG layout's to change
            key = (cluster, host)
            if key in pending:
                layout = pending[key]
            else:
                nodes, gpus = queries.host_inventory(session, cluster, host)
                layout = layouts.current_layout(
                    nodes, gpus, queries.last_done_layout(queries.layout_changes(session, cluster, host))
                )
            free = (
                key not in held
                and key not in pending
                and key not in planned
                and all(row.schedulable for row in rows)
                and self._refused.get(key, 0.0) <= now
            )
            machines.append(Machine(cluster, host, f"{rows[0].gpu_model}-{rows[0].gpu_memory_gb}GB", layout, free))
        return machines

    def _finish(self, change_id: int, state: str, message: str, now: datetime | None) -> None:
        with transaction(self.sessions) as session:
            row = session.get(LayoutChangeRow, change_id, with_for_update=True)
            if row is None or row.state != "pending":
                return
            row.state, row.message, row.finished_at = state, message, now
            if now is not None:
                layout = layouts.describe(row.mig)
                said = f"node {row.node} ({row.cluster}) is in its new layout, {layout}: {message}"
                if state == "failed":
                    said = f"node {row.node} ({row.cluster}) could not be re-partitioned to {layout}: {message}"
                queries.add_event(session, _event(f"layout-change-{state}", ACTOR, row, said, now))
