"""Maintenance that has started: the GPRs still holding the node then go by their slice's
``maintenance_crossing`` policy (core/model.py). "move" moves their GPUs on the node to a healthy node
free for the rest of their window (remediation.py, as for a failed GPU), else shortens their window to
end now; "shorten" windows were shortened when the maintenance was planned, and one still running (an
admin planned the maintenance to start at once) ends now; "ask" leaves them to an admin, who was told.

The loop reads the maintenance windows under way (few, by their end's index) at each interval, and the
holders of their nodes; it keeps nothing between passes, so a restarted service picks up where it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..core import lifecycle
from ..core.model import GPR, SlicePolicy, Status
from ..core.units import format_time
from ..store import queries
from ..store.db import transaction
from .periodic import Periodic
from .remediation import Remediation

log = logging.getLogger(__name__)
ACTOR = "maintenance"


class MaintenanceStarts(Periodic):
    name = "maintenance pass"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        remediation: Remediation,
        clock: Callable[[], datetime],
        interval: float,
        on_change: Callable[[], None] = lambda: None,
    ):
        self.sessions = sessions
        self.remediation = remediation
        self.clock = clock
        self.interval = interval
        self.on_change = on_change

    async def tick(self) -> None:
        """One pass: the holders of nodes whose maintenance is under way, by their slices' policy."""
        now = self.clock()
        with self.sessions() as session:
            under_way = queries.maintenance_under_way(session, now)
            holding = [
                (window, gpr, queries.slice_policy(queries.get_slice(session, gpr.spec.slice)))
                for window in under_way
                for gpr in queries.gprs_holding_node(session, window.cluster, window.node)
                if gpr.status is Status.PROVISIONED
            ]
        for window, gpr, policy in holding:
            try:
                await self._settle(window.cluster, window.node, window.end, gpr, policy)
            except Exception:
                log.exception("GPR %s on node %s under maintenance could not be settled", gpr.id, window.node)

    async def _settle(self, cluster: str, node: str, end: datetime, gpr: GPR, policy: SlicePolicy) -> None:
        why = f"node {node}'s maintenance started (until {format_time(end)})"
        if policy.maintenance_crossing == "ask":
            return
        if policy.maintenance_crossing == "move" and await self.remediation.move(gpr, policy, cluster, node, why):
            return
        moved = "no healthy node is free for the rest of its window" if policy.maintenance_crossing == "move" else ""
        reason = f"{why}; {moved + ': ' if moved else ''}its window ends now (the slice's policy)"
        now = self.clock()
        with transaction(self.sessions) as session:
            row = queries.get_gpr_row(session, gpr.id, lock=True)
            if row is None or row.status != Status.PROVISIONED or row.window_end <= now:
                return
            queries.apply(session, row, lifecycle.shorten(queries.to_gpr(row), now, ACTOR, reason, now))
        self.on_change()
