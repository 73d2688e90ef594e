"""Maintenance windows: ``/nodes/{cluster}/{name}/maintenance`` (admins). POST takes a node out of
service from ``start`` to ``end`` (201); GET lists its windows that have not ended; DELETE cancels them.

The planner plans no window across one (core/planner.py closes the node over it). The holders of
windows already running past its start are told (an event on each GPR, which the sidebar and the
portal show), and named in the answer's ``crossing``; their slice's ``maintenance_crossing`` policy
says what happens to them: "shorten" ends their window when it starts (decided now), "move" moves
them to a healthy node then (service/maintenance.py), "ask" leaves it to the admin (release them, or
move the maintenance). Overlapping windows of one node are a 409.
"""

from __future__ import annotations

from datetime import datetime

from ...core import lifecycle
from ...core import model as core
from ...core.errors import Conflict
from ...core.requests import MaintenanceCreate, parse_body
from ...core.resources import MaintenanceWindow, MaintenanceWindows
from ...core.units import format_time
from ...store import queries
from ...store.db import transaction
from ...store.models import MaintenanceWindow as MaintenanceRow
from ..operations import ADMIN, Named, request_path
from ..serialize import maintenance_resource
from .base import APIHandler, operation


def crossing(held: list[core.GPR], start: datetime) -> list[int]:
    """The ids of the GPRs ``held`` (those holding the node) whose windows run past ``start``."""
    return [g.id for g in held if g.window_end is not None and g.window_end > start]


class MaintenanceHandler(APIHandler):
    def check_node(self, session, cluster: str, node: str) -> None:
        if queries.find_node(session, cluster, node) is None:
            raise self.not_found(f"node {node!r} in cluster {cluster!r}")

    @operation(
        "GET /nodes/{cluster}/{name}/maintenance",
        "A node's maintenance windows that have not ended (admin)",
        ok="its windows",
        answer=MaintenanceWindows,
        errors=(401, 403, 404),
        auth=ADMIN,
        params={"name": str},
    )
    def get(self, cluster: str, node: str) -> None:
        now = self.now()
        with self.egs.sessions() as session:
            self.check_node(session, cluster, node)
            rows = queries.node_maintenance(session, cluster, node, now)
            held = queries.gprs_holding_node(session, cluster, node)
            views = [maintenance_resource(row, crossing(held, row.start)) for row in rows]
        self.write_json(MaintenanceWindows(maintenance=views))

    @operation(
        "POST /nodes/{cluster}/{name}/maintenance",
        "Take a node out of service from start to end: nothing is planned across it; holders of windows running "
        "past the start are told (admin)",
        ok="planned",
        answer=MaintenanceWindow,
        status=201,
        errors=(401, 403, 404, 409),
        body=MaintenanceCreate,
        auth=ADMIN,
        params={"name": str},
        names=(Named("/nodes/{cluster}/{name}", request_path("cluster", "name")),),
    )
    def post(self, cluster: str, node: str) -> None:
        body = parse_body(MaintenanceCreate, self.json_body())
        now = self.now()
        if body.end <= now:
            raise Conflict(f"the window ends at {format_time(body.end)}, which has passed; nothing to plan around")
        with transaction(self.egs.sessions) as session:
            self.check_node(session, cluster, node)
            for other in queries.node_maintenance(session, cluster, node, now):
                if other.start < body.end and body.start < other.end:
                    raise Conflict(
                        f"node {node} has maintenance from {format_time(other.start)} to {format_time(other.end)} "
                        f"already (id {other.id}); change that one (DELETE and POST again)"
                    )
            row = MaintenanceRow(
                cluster=cluster,
                node=node,
                start=body.start,
                end=body.end,
                reason=body.reason,
                created_by=self.user_name,
                created_at=now,
            )
            session.add(row)
            session.flush()
            held = queries.gprs_holding_node(session, cluster, node)
            told = crossing(held, row.start)
            span = f"from {format_time(row.start)} to {format_time(row.end)}"
            when = f"node {node} ({cluster}) is under maintenance {span}"
            queries.add_event(
                session,
                core.Event(
                    kind="maintenance-planned",
                    actor=self.user_name,
                    reason=f"{when}: {row.reason}" if row.reason else when,
                    time=now,
                    data={"cluster": cluster, "node": node, "maintenance": row.id, "crossing": told},
                ),
            )
            for gpr in held:
                if gpr.id in told:
                    crossing_policy = queries.slice_policy(queries.get_slice(session, gpr.spec.slice))
                    self.warn(session, gpr, crossing_policy.maintenance_crossing, row, when, now)
            view = maintenance_resource(row, told)
        self.egs.reconciler.wake()  # the next plan plans around it
        self.write_json(view, 201)

    def warn(self, session, gpr: core.GPR, crossing_policy: str, row: MaintenanceRow, when: str, now: datetime) -> None:
        """Tell the holders of a GPR crossing the maintenance what will happen, by their slice's policy;
        "shorten" shortens its window to end when the maintenance starts, now."""
        then = {
            "ask": "save your work; an admin may end the window then",
            "shorten": f"its window now ends then, at {format_time(max(row.start, now))} (the slice's policy)",
            "move": "then its GPUs there move to a healthy node if one is free (else its window ends then)",
        }[crossing_policy]
        queries.add_event(
            session,
            core.Event(
                kind="maintenance-ahead",
                actor=self.user_name,
                reason=f"{when}, before this GPR's window ends ({format_time(gpr.window_end)}): {then}",
                time=now,
                gpr_id=gpr.id,
                slice=gpr.spec.slice,
                data={"cluster": row.cluster, "node": row.node, "maintenance": row.id},
            ),
        )
        if crossing_policy == "shorten":
            gpr_row = queries.get_gpr_row(session, gpr.id, lock=True)
            if gpr_row is not None and gpr_row.status == core.Status.PROVISIONED:
                reason = f"{when}: the slice's policy ends windows that cross it when it starts"
                change = lifecycle.shorten(queries.to_gpr(gpr_row), row.start, self.user_name, reason, now)
                queries.apply(session, gpr_row, change)

    @operation(
        "DELETE /nodes/{cluster}/{name}/maintenance",
        "Cancel a node's maintenance windows that have not ended (admin)",
        ok="cancelled",
        status=204,
        errors=(401, 403, 404),
        auth=ADMIN,
        params={"name": str},
    )
    def delete(self, cluster: str, node: str) -> None:
        now = self.now()
        with transaction(self.egs.sessions) as session:
            self.check_node(session, cluster, node)
            rows = queries.node_maintenance(session, cluster, node, now)
            if not rows:
                raise self.not_found(f"maintenance of node {node!r} in cluster {cluster!r} that has not ended")
            for row in rows:
                session.delete(row)
            queries.add_event(
                session,
                core.Event(
                    kind="maintenance-cancelled",
                    actor=self.user_name,
                    reason=f"node {node} ({cluster}): {len(rows)} maintenance window(s) cancelled",
                    time=now,
                    data={"cluster": cluster, "node": node, "maintenance": [row.id for row in rows]},
                ),
            )
        self.egs.reconciler.wake()
        self.set_status(204)
        self.finish()
