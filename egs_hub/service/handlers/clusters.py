"""Clusters: GET /clusters (everyone logged in), POST /clusters and DELETE /clusters/{name} (admins);
GET /role-templates (admins): what a slice's namespaces get on every Kubernetes cluster.

A cluster is the local host or a Kubernetes cluster (service/clusters.py); each
answer says how it is reached, whether it answers (``health``) and what it holds.
"""

from __future__ import annotations

from ...backends.kubernetes.roles import DEFAULT_ROLE_TEMPLATES
from ...core.requests import ClusterCreate, parse_body
from ...core.resources import Clusters, RoleTemplate, RoleTemplates
from ...roles import ADMIN_SCOPE
from ...store import queries
from ..serialize import cluster_resource
from .base import APIHandler, authenticated, needs_scope


class ClustersHandler(APIHandler):
    def _rows(self) -> dict:
        with self.egs.sessions() as session:
            return {row.name: row for row in queries.inventory_rows(session)}

    @authenticated
    def get(self) -> None:
        rows = self._rows()
        states = sorted(self.egs.registry.states.values(), key=lambda s: s.name)
        self.write_json(Clusters(clusters=[cluster_resource(state, rows.get(state.name)) for state in states]))

    @needs_scope(ADMIN_SCOPE)
    async def post(self) -> None:
        spec = parse_body(ClusterCreate, self.json_body())
        state = await self.egs.registry.register(spec)
        self.write_json(cluster_resource(state, self._rows().get(state.name)), 201)


class ClusterHandler(APIHandler):
    @needs_scope(ADMIN_SCOPE)
    async def delete(self, name: str) -> None:
        if name not in self.egs.registry.states:
            raise self.not_found(f"cluster named {name!r}")
        await self.egs.registry.unregister(name)
        self.set_status(204)
        self.finish()


class RoleTemplatesHandler(APIHandler):
    @needs_scope(ADMIN_SCOPE)
    def get(self) -> None:
        templates = self.egs.all_role_templates
        self.write_json(
            RoleTemplates(
                role_templates=[
                    RoleTemplate(
                        name=t.name,
                        builtin=DEFAULT_ROLE_TEMPLATES.get(t.name) == t,
                        rules=[dict(r) for r in t.rules],
                        subjects=[dict(s) for s in t.subjects],
                    )
                    for t in sorted(templates.values(), key=lambda t: t.name)
                ]
            )
        )
