"""Changing a node's MIG layout (core/layouts.py): the admin's change, and the pass that finishes it.

``change`` checks that the node is free and the layout fits its GPUs, asks its cluster's backend to
start the change, then records in one transaction the change, a maintenance window on each of the
node's planning nodes (those of the old layout and of the new) until ``ready_by``, and an event;
the cluster's inventory is read again at once and the plan made again, so the new instances are
planned from ``ready_by`` on. The pass (``tick``) asks the backend how each pending change goes: done
once the backend says so and ``ready_by`` has passed, failed when it says so (an event either way).
A pending change keeps its node's maintenance windows; a failed one leaves them to end as planned.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend, LayoutChangeError
from ..backends.kubernetes import ClusterUnavailable
from ..core import layouts
from ..core import model as core
from ..core.errors import Conflict, NotFound, Unavailable
from ..core.requests import LayoutChangeCreate
from ..store import queries
from ..store.db import transaction
from ..store.models import LayoutChangeRow, MaintenanceWindow
from .periodic import Periodic

log = logging.getLogger(__name__)
ACTOR = "layouts"


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
    ):
        self.sessions = sessions
        self.backends = backends
        self.clock = clock
        self.interval = interval
        self.seconds = seconds  # how long a re-partition takes (EGSService.repartition_seconds)
        self.refresh = refresh  # read a cluster's inventory again (Clusters.refresh_cluster)
        self.on_change = on_change

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
