"""Inventory, the inventory schedule, the audit log, health and the OpenAPI document.

The schedule lists each split planning node's physical GPUs with its units on each (core/gpu_groups.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta

from sqlalchemy import and_, or_, select, text

from ...core.errors import InvalidRequest
from ...core.gpu_groups import physical_gpus, split_gpus
from ...core.resources import EventPage, Health, Inventory, MaintenanceSpan, NodeSchedule, Schedule, Window
from ...core.sharing import host_of, unit_kind
from ...core.snapshot import Placement
from ...store import queries
from ...store.models import GPU, Allocation, EventRow, GPRRow, MaintenanceWindow, Node
from .. import cursors
from ..operations import PUBLIC
from ..parameters import EventsQuery, ScheduleQuery, read
from ..serialize import event_resource, inventory_resource, maintenance_span, window_resource
from ..visibility import Viewer
from .base import APIHandler, operation

SCHEDULE_DEFAULT_PAST = timedelta(days=1)
SCHEDULE_DEFAULT_FUTURE = timedelta(days=7)
SCHEDULE_MAX_RANGE = timedelta(days=366)


class HealthHandler(APIHandler):
    @operation(
        "GET /health",
        "Liveness and database check; which replica this is (leader or standby)",
        ok="healthy",
        answer=Health,
        auth=PUBLIC,
        description=(
            "A standby replica answers this itself and forwards every other request to the leader; 503 when the "
            "database does not answer."
        ),
    )
    def get(self) -> None:
        try:
            with self.egs.sessions() as session:
                session.execute(text("SELECT 1"))
        except Exception as e:
            self.write_json(Health(status="unavailable", database=f"failing: {type(e).__name__}", role="leader"), 503)
            return
        self.write_json(Health(status="ok", version=self.egs.version, database="ok", role="leader"))


class OpenAPIHandler(APIHandler):
    @operation("GET /openapi.json", "This document", ok="the document", answer=dict, auth=PUBLIC)
    def get(self) -> None:
        self.finish(json.dumps(self.egs.openapi_document()))


class InventoryHandler(APIHandler):
    @operation(
        "GET /inventory",
        "Clusters, nodes, GPUs, shapes and what is free now",
        ok="inventory",
        answer=Inventory,
        errors=(401,),
    )
    def get(self) -> None:
        with self.egs.sessions() as session:
            bound = queries.gpu_holders(session)
            view = inventory_resource(
                queries.inventory_rows(session), bound, self.egs.registry.states, queries.prices(session), self.viewer
            )
        self.write_json(view)


def planned_per_node(placement: Placement, node_of: dict[str, str]) -> list[tuple[str, list[str], int]]:
    """(node, GPUs, how many) of a planned window. An admission names its GPUs; a later
    start names nodes and a count: whole nodes first, the remainder on the last."""
    if placement.gpus:
        per_node: dict[str, list[str]] = {}
        for uuid in placement.gpus:
            per_node.setdefault(node_of[uuid], []).append(uuid)
        return [(node, gpus, len(gpus)) for node, gpus in per_node.items()]
    width = placement.shape.gpus_per_node
    left = placement.count
    spread = []
    for i, node in enumerate(placement.nodes):
        count = left if i == len(placement.nodes) - 1 else min(width, left)
        spread.append((node, [], count))
        left -= count
    return spread


class ScheduleHandler(APIHandler):
    """Every node's windows in [start, end): past, current and planned."""

    @operation(
        "GET /inventory/schedule",
        "Every node's windows in [start, end): past, current and planned",
        ok="schedule",
        answer=Schedule,
        errors=(401,),
        query=ScheduleQuery,
    )
    async def get(self) -> None:
        query = read(ScheduleQuery, self)
        now = self.now()
        start = now - SCHEDULE_DEFAULT_PAST if query.start is None else query.start
        end = now + SCHEDULE_DEFAULT_FUTURE if query.end is None else query.end
        if end <= start:
            raise InvalidRequest("end", "end must be after start")
        if end - start > SCHEDULE_MAX_RANGE:
            raise InvalidRequest("end", "the range from start to end must be at most 366 days")
        plan = (await self.egs.planning.current(self.egs.sessions, now)).plan
        viewer = self.viewer
        with self.egs.sessions() as session:
            cluster_of: dict[str, str] = {}
            windows: dict[str, list[Window]] = {}
            units_of: dict[tuple[str, str], list[GPU]] = {}
            parent_of: dict[str, str] = {}
            for cluster in queries.inventory_rows(session):
                for node in cluster.nodes:
                    if node.present:
                        cluster_of[node.name] = cluster.name
                        windows[node.name] = []
                        units_of[cluster.name, node.name] = [gpu for gpu in node.gpus if gpu.present]
                        parent_of.update((gpu.uuid, gpu.parent_uuid) for gpu in node.gpus if gpu.parent_uuid)
            gpus_of = split_gpus(units_of)
            held = session.execute(
                select(Allocation.gpu_uuid, Allocation.node, GPRRow)
                .join(GPRRow, GPRRow.id == Allocation.gpr_id)
                .where(GPRRow.window_start < end)
                .order_by(GPRRow.window_start, GPRRow.id, Allocation.position)
            ).all()
            self._add_held(windows, held, start, parent_of, viewer)
            node_of = dict(session.execute(select(GPU.uuid, Node.name).join(Node)).all())
            spans = maintenance_spans(session, start, end, viewer)
            queued = {gpr.id: gpr for gpr in self.egs.planning.state.current(session, now).queued()}
        for estimate in plan.estimates.values():
            if estimate.start is None or not (estimate.start < end and estimate.end > start):
                continue
            gpr = queued.get(estimate.gpr_id)
            if gpr is None:  # the plan was made before it started or ended (a plan made aside serves meanwhile)
                continue
            for node, gpus, count in planned_per_node(estimate.placement, node_of):
                if node in windows:
                    spec, status = gpr.spec, gpr.status.value
                    on_gpus = physical_gpus(gpus, parent_of)
                    window = window_resource(
                        gpr.id,
                        spec.slice,
                        gpus,
                        on_gpus,
                        estimate.start,
                        estimate.end,
                        "planned",
                        status,
                        count,
                        viewer,
                    )
                    windows[node].append(window)
        nodes = [
            NodeSchedule(
                cluster=cluster_of[node],
                node=node,
                machine=host_of(node),
                profile=unit_kind(node),
                gpus=gpus_of.get(node, []),
                windows=held,
                maintenance=spans.get((cluster_of[node], node), []),
            )
            for node, held in windows.items()
        ]
        self.write_json(Schedule(start=start, end=end, nodes=nodes))

    def _add_held(
        self, windows: dict[str, list[Window]], held, start, parent_of: Mapping[str, str], viewer: Viewer
    ) -> None:
        """The past and current windows of ``held`` (GPU, node, GPR) that end after ``start``, on the nodes
        of ``windows``: one per GPR and node, in the order they started, as the ``viewer`` sees them;
        ``parent_of`` gives the physical GPU of each MIG instance and share."""
        gpus_of: dict[tuple[int, str], tuple[GPRRow, list[str]]] = {}
        for uuid, node, gpr in held:
            window_end = gpr.ended_at or gpr.window_end
            if (window_end is not None and window_end <= start) or node not in windows:
                continue
            gpus_of.setdefault((gpr.id, node), (gpr, []))[1].append(uuid)
        for (_, node), (gpr, gpus) in gpus_of.items():
            state = "past" if gpr.ended_at is not None else "current"
            window_end = gpr.ended_at or gpr.window_end
            on_gpus = physical_gpus(gpus, parent_of)
            windows[node].append(
                window_resource(
                    gpr.id, gpr.slice, gpus, on_gpus, gpr.window_start, window_end, state, gpr.status, len(gpus), viewer
                )
            )


class EventsHandler(APIHandler):
    """GET /events: a page of the audit log. Pages go back in time: the first holds the newest
    events, ``next_cursor`` the ones before them; each page lists its events newest last. Keyset
    on (time, id), the index ix_events_time_id."""

    @operation(
        "GET /events",
        "The audit log: the newest events first, each page newest last",
        ok="a page of events",
        answer=EventPage,
        errors=(401, 403, 404),
        query=EventsQuery,
        description="Pages go back in time: next_cursor gives the events before the oldest of this page.",
    )
    def get(self) -> None:
        arguments = read(EventsQuery, self)
        gpr_id, slice_name, since = arguments.gpr, arguments.slice, arguments.since
        limit, before = arguments.limit, arguments.cursor
        query = select(EventRow).order_by(EventRow.time.desc(), EventRow.id.desc()).limit(limit + 1)
        if before is not None:
            time, event_id = before
            query = query.where(or_(EventRow.time < time, and_(EventRow.time == time, EventRow.id < event_id)))
        with self.egs.sessions() as session:
            if gpr_id is not None:
                row = queries.get_gpr_row(session, gpr_id)
                if row is None:
                    raise self.not_found(f"GPR with id {gpr_id}")
                slice_row = queries.get_slice(session, row.slice)
                if slice_row is not None:
                    self.require_member(slice_row, f"GPR with id {gpr_id}")
                elif not self.is_admin:
                    raise self.not_found(f"GPR with id {gpr_id}")
                query = query.where(EventRow.gpr_id == gpr_id)
            if slice_name is not None:
                slice_row = queries.get_slice(session, slice_name)
                if slice_row is None and not self.is_admin:
                    raise self.not_found(f"slice named {slice_name!r}")
                if slice_row is not None:
                    self.require_member(slice_row)
                query = query.where(EventRow.slice == slice_name)
            if since is not None:
                query = query.where(EventRow.time >= since)
            if not self.is_admin:
                mine = [r.name for r in queries.all_slices(session) if self.is_member(r)]
                query = query.where(EventRow.slice.in_(mine))
            rows, next_cursor = cursors.EVENTS.page(list(session.scalars(query)), limit, key=lambda e: (e.time, e.id))
            events = [event_resource(e) for e in rows]
        self.write_json(EventPage(events=events[::-1], next_cursor=next_cursor))


def maintenance_spans(session, start, end, viewer: Viewer) -> dict[tuple[str, str], list[MaintenanceSpan]]:
    """The nodes' maintenance windows that overlap [start, end), by (cluster, node), as the ``viewer`` sees
    them (why, to admins only)."""
    rows = session.scalars(
        select(MaintenanceWindow)
        .where(MaintenanceWindow.start < end, MaintenanceWindow.end > start)
        .order_by(MaintenanceWindow.start)
    )
    spans: dict[tuple[str, str], list[MaintenanceSpan]] = {}
    for row in rows:
        spans.setdefault((row.cluster, row.node), []).append(maintenance_span(row, viewer))
    return spans
