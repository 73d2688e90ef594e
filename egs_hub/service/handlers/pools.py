"""Dynamic node pools of a cluster: ``/clusters/{name}/pools`` (GET: everyone signed in; POST: admins) and
``/clusters/{name}/pools/{pool}`` (GET; DELETE: admins).

A pool (core/node_pools.py) is the nodes labelled ``egs.io/pool=<pool>`` that the cluster's autoscaler adds
when egs-hub asks and removes when egs-hub gives them back (service/pools.py); the planner counts the nodes
it may still add from now plus ``scale_up_delay``. Only a cluster whose backend grows pools (Kubernetes, with
the Cluster Autoscaler's ProvisioningRequest API) takes one: 409 otherwise. Deleting a pool deletes its
requests to the autoscaler; the nodes that joined stay, as ordinary nodes of the cluster.
"""

from __future__ import annotations

from ...backends.kubernetes import ClusterUnavailable
from ...core import model as core
from ...core.errors import Conflict, Unavailable
from ...core.requests import PoolCreate, parse_body
from ...core.resources import NodePool, NodePools
from ...core.units import format_duration
from ...store import queries
from ...store.db import transaction
from ...store.models import NodePoolRow
from ..operations import ADMIN, Named, request_path
from ..serialize import pool_resource
from .base import APIHandler, operation


class _PoolHandler(APIHandler):
    def view(self, session, row: NodePoolRow) -> NodePool:
        return pool_resource(row, queries.pool_members(session, row.cluster, row.name))


class PoolsHandler(_PoolHandler):
    @operation(
        "GET /clusters/{name}/pools",
        "A cluster's dynamic node pools, with their nodes and what was asked of them",
        ok="its pools",
        answer=NodePools,
        errors=(401, 404),
        names=(
            Named("/clusters/{name}/pools/{pool}", {**request_path("name"), "pool": "$response.body#/pools/0/name"}),
        ),
    )
    def get(self, name: str) -> None:
        cluster = self.registered_cluster(name)
        with self.egs.sessions() as session:
            views = [self.view(session, row) for row in queries.pool_rows(session, cluster)]
        self.write_json(NodePools(pools=views))

    @operation(
        "POST /clusters/{name}/pools",
        "Add a dynamic node pool that the cluster's autoscaler grows and egs-hub shrinks (admin)",
        ok="added",
        answer=NodePool,
        status=201,
        errors=(401, 403, 404, 409, 422),
        body=PoolCreate,
        auth=ADMIN,
        names=(Named("/clusters/{name}/pools/{pool}", {**request_path("name"), "pool": "$response.body#/name"}),),
    )
    def post(self, name: str) -> None:
        cluster = self.registered_cluster(name)
        body = parse_body(PoolCreate, self.json_body())
        pool = body.pool(cluster)
        backend = self.egs.registry.backends.get(cluster)
        if backend is None or not backend.scales_pools:
            kind = backend.kind if backend is not None else "unreachable"
            raise Conflict(
                f"cluster {cluster!r} ({kind}) has no autoscaler egs-hub can ask for nodes: node pools are for "
                "Kubernetes clusters with the Cluster Autoscaler's ProvisioningRequest API"
            )
        now = self.now()
        with transaction(self.egs.sessions) as session:
            if queries.find_pool(session, cluster, pool.name) is not None:
                raise Conflict(f"cluster {cluster!r} has a pool named {pool.name!r} already (DELETE it first)")
            row = queries.pool_row(pool, self.user_name, now)
            session.add(row)
            session.flush()
            queries.add_event(
                session,
                core.Event(
                    kind="pool-created",
                    actor=self.user_name,
                    reason=f"pool {pool.name} ({cluster}): {pool.min_nodes} to {pool.max_nodes} nodes of "
                    f"{pool.shape.name}, joining within {format_duration(pool.scale_up_delay)}, given back after "
                    f"{format_duration(pool.scale_down_idle)} idle",
                    time=now,
                    data={"cluster": cluster, "pool": pool.name},
                ),
            )
            view = self.view(session, row)
        self.egs.reconciler.wake()
        self.write_json(view, status=201)


class PoolHandler(_PoolHandler):
    def find(self, session, cluster: str, name: str) -> NodePoolRow:
        row = queries.find_pool(session, cluster, name)
        if row is None:
            raise self.not_found(f"pool {name!r} in cluster {cluster!r}")
        return row

    @operation(
        "GET /clusters/{name}/pools/{pool}", "One dynamic node pool", ok="the pool", answer=NodePool, errors=(401, 404)
    )
    def get(self, name: str, pool: str) -> None:
        cluster = self.registered_cluster(name)
        with self.egs.sessions() as session:
            view = self.view(session, self.find(session, cluster, pool))
        self.write_json(view)

    @operation(
        "DELETE /clusters/{name}/pools/{pool}",
        "Delete a node pool and its requests to the autoscaler; its nodes stay (admin)",
        ok="deleted",
        status=204,
        errors=(401, 403, 404, 503),
        auth=ADMIN,
    )
    async def delete(self, name: str, pool: str) -> None:
        cluster = self.registered_cluster(name)
        with self.egs.sessions() as session:
            self.find(session, cluster, pool)
        backend = self.egs.registry.backends.get(cluster)
        if backend is not None and backend.scales_pools:
            try:
                for request in await backend.pool_requests(pool):
                    await backend.end_pool_request(request.name)
            except ClusterUnavailable as e:
                raise Unavailable(f"{e}; the pool is kept, try again") from None
        with transaction(self.egs.sessions) as session:
            row = self.find(session, cluster, pool)
            session.delete(row)
            queries.add_event(
                session,
                core.Event(
                    kind="pool-deleted",
                    actor=self.user_name,
                    reason=f"pool {pool} ({cluster}) deleted: its nodes stay as ordinary nodes",
                    time=self.now(),
                    data={"cluster": cluster, "pool": pool},
                ),
            )
        self.egs.reconciler.wake()
        self.set_status(204)
        self.finish()
