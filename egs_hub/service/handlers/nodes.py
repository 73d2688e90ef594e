"""Nodes and their health: ``GET /nodes`` (``?cluster=``, ``?health=``; admins see every node, members the
nodes their slices hold, with only their slices' GPRs as holders and checks, and no reasons),
``GET /nodes/{cluster}/{name}`` (admins)
with its GPUs, holders, maintenance and the last run of each of its checks; ``POST .../quarantine``
{reason} takes a node out of planning, ``POST .../clear`` {reason} puts it back, and ``POST .../checks``
runs the cluster's entry checks on it now (202; a quarantined node whose checks all pass is cleared).
Checks on a node that a GPR holds would run beside the GPR's work: a 409 says so.
``GET .../layout`` (admins) is a machine's MIG layout and its changes; ``POST .../layout``
{mig, mig_config, reason} re-partitions it while it is free (202: service/layouts.py).
"""

from __future__ import annotations

from ...core import layouts, sharing
from ...core.errors import Conflict
from ...core.requests import LayoutChangeCreate, Reason, parse_body
from ...core.resources import LayoutChange, Node, NodeLayout, Nodes
from ...store import queries
from ..operations import ADMIN, Named, body_at, request_path
from ..parameters import NodesQuery, read
from ..serialize import layout_change_resource, node_health, node_resource
from ..visibility import EVERYTHING
from .base import APIHandler, operation


class NodesHandler(APIHandler):
    @operation(
        "GET /nodes",
        "Nodes with their health, holders, maintenance and last checks: every node for admins, the nodes their "
        "slices hold for members",
        ok="the nodes",
        answer=Nodes,
        errors=(401,),
        query=NodesQuery,
        names=(Named("/nodes/{cluster}/{name}", body_at("/nodes/0", cluster="cluster", name="name")),),
    )
    def get(self) -> None:
        query = read(NodesQuery, self)
        mine = None if self.is_admin else self.slices_of_caller(self.planning_state().groups)
        with self.egs.sessions() as session:
            held = queries.node_holders(session)
            if mine is not None:
                held = {key: {g: s for g, s in gprs.items() if s in mine} for key, gprs in held.items()}
                held = {key: gprs for key, gprs in held.items() if gprs}
            rows = [
                (cluster, row)
                for cluster, row in queries.node_rows(session, query.cluster)
                if (mine is None or (cluster, row.name) in held)
                and (query.health is None or node_health(row) == query.health)
            ]
            maintenance = queries.maintenance_by_node(session, self.now())
            runs = queries.last_check_runs(session, query.cluster)
            viewer = self.viewer
            views = [
                node_resource(
                    row,
                    cluster,
                    held.get(key, {}),
                    maintenance.get(key, ()),
                    # a member sees the checks of their own GPRs on it, not another's (nor an admin's) logs
                    [r for r in runs.get(key, ()) if mine is None or r.gpr_id in held.get(key, {})],
                    viewer,
                )
                for cluster, row in rows
                for key in [(cluster, row.name)]
            ]
        self.write_json(Nodes(nodes=views))


class NodeBase(APIHandler):
    def view(self, cluster: str, name: str):
        now = self.now()
        with self.egs.sessions() as session:
            row = queries.find_node(session, cluster, name)
            if row is None:
                raise self.not_found(f"node {name!r} in cluster {cluster!r}")
            held = [g.id for g in queries.gprs_holding_node(session, cluster, name)]
            maintenance = queries.node_maintenance(session, cluster, name, now)
            runs = queries.last_check_runs(session, cluster, name).get((cluster, name), ())
            return node_resource(row, cluster, held, maintenance, runs, EVERYTHING)  # admins only

    def reason(self) -> str:
        return parse_body(Reason, self.json_body()).reason if self.request.body else ""


class NodeHandler(NodeBase):
    @operation(
        "GET /nodes/{cluster}/{name}",
        "A node with its GPUs, health, holders, maintenance and the last run of each check (admin)",
        ok="the node",
        answer=Node,
        errors=(401, 403, 404),
        auth=ADMIN,
        params={"name": str},
    )
    def get(self, cluster: str, name: str) -> None:
        self.write_json(self.view(cluster, name))


class NodeQuarantineHandler(NodeBase):
    @operation(
        "POST /nodes/{cluster}/{name}/quarantine",
        "Quarantine a node: nothing is planned on it, its cluster's scheduler is kept off (admin)",
        ok="quarantined",
        answer=Node,
        errors=(401, 403, 404, 409),
        body=Reason,
        auth=ADMIN,
        params={"name": str},
    )
    async def post(self, cluster: str, name: str) -> None:
        reason = self.reason()
        node = self.view(cluster, name)
        if node.quarantined_at is not None:
            raise Conflict(f"node {name} is quarantined already (since {node.quarantined_at.isoformat()})")
        said = f"{self.user_name}: {reason}" if reason else f"by {self.user_name}"
        await self.egs.checklists.quarantine(cluster, name, said, self.user_name)
        self.write_json(self.view(cluster, name))


class NodeClearHandler(NodeBase):
    @operation(
        "POST /nodes/{cluster}/{name}/clear",
        "Take a node out of quarantine (admin)",
        ok="cleared",
        answer=Node,
        errors=(401, 403, 404, 409),
        body=Reason,
        auth=ADMIN,
        params={"name": str},
    )
    async def post(self, cluster: str, name: str) -> None:
        reason = self.reason()
        if self.view(cluster, name).quarantined_at is None:
            raise Conflict(f"node {name} is not quarantined: nothing to clear")
        said = f"cleared by {self.user_name}" + (f": {reason}" if reason else "")
        await self.egs.checklists.clear(cluster, name, self.user_name, said)
        self.write_json(self.view(cluster, name))


class NodeChecksHandler(NodeBase):
    @operation(
        "POST /nodes/{cluster}/{name}/checks",
        "Run the cluster's entry checks on a node no GPR holds, in the background; a quarantined node whose "
        "checks all pass is cleared (admin)",
        ok="checks pending",
        answer=Node,
        status=202,
        errors=(401, 403, 404, 409),
        auth=ADMIN,
        params={"name": str},
    )
    async def post(self, cluster: str, name: str) -> None:
        node = self.view(cluster, name)
        if node.held_by:
            raise Conflict(
                f"node {name} is held by GPR(s) {', '.join(map(str, node.held_by))}: its checks run when they end"
            )
        self.egs.checklists.check_now(cluster, name, [g.uuid for g in node.gpus if g.present], self.user_name)
        self.write_json(self.view(cluster, name), 202)


class NodeLayoutHandler(APIHandler):
    """``name`` is the machine (``gpu-a``), or any of its planning nodes (``gpu-a:1g.10gb``)."""

    def layout(self, cluster: str, host: str) -> NodeLayout:
        with self.egs.sessions() as session:
            nodes, gpus = queries.host_inventory(session, cluster, host)
            if not nodes:
                raise self.not_found(f"node {host!r} in cluster {cluster!r}")
            rows = queries.layout_changes(session, cluster, host)
            changes = [layout_change_resource(r) for r in rows]
        mig = layouts.current_layout(nodes, gpus, queries.last_done_layout(rows))
        return NodeLayout(
            cluster=cluster,
            node=host,
            mig=dict(mig) if mig and mig is not layouts.UNKNOWN else None,
            instances=layouts.instances(nodes),
            layout=layouts.describe(mig),
            changes=changes,
        )

    @operation(
        "GET /nodes/{cluster}/{name}/layout",
        "A machine's MIG layout (name: the machine or one of its planning nodes) and its changes, the latest "
        "first (admin)",
        ok="its layout",
        answer=NodeLayout,
        errors=(401, 403, 404),
        auth=ADMIN,
        params={"name": str},
    )
    def get(self, cluster: str, name: str) -> None:
        self.write_json(self.layout(cluster, sharing.host_of(name)))

    @operation(
        "POST /nodes/{cluster}/{name}/layout",
        "Re-partition a free machine's GPUs into a MIG layout (null: whole GPUs): it is out of service until "
        "ready_by, and its new instances are planned from then (admin)",
        ok="started",
        answer=LayoutChange,
        status=202,
        errors=(401, 403, 404, 409, 422, 503),
        body=LayoutChangeCreate,
        auth=ADMIN,
        params={"name": str},
        names=(Named("/nodes/{cluster}/{name}", request_path("cluster", "name")),),
    )
    async def post(self, cluster: str, name: str) -> None:
        body = parse_body(LayoutChangeCreate, self.json_body())
        row = await self.egs.layouts.change(cluster, sharing.host_of(name), body, self.user_name)
        self.write_json(layout_change_resource(row), 202)
