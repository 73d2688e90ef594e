"""Clusters: GET /clusters (everyone logged in), POST /clusters and DELETE /clusters/{name} (admins);
GET /role-templates (admins): what a slice's namespaces get on every Kubernetes cluster;
GET /clusters/{name}/prices (everyone logged in) and PUT (admins): its prices per GPU-hour (core/cost.py);
GET /clusters/{name}/checks (everyone logged in), PUT and DELETE (admins: back to the default): its nodes'
checklist (core/checks.py).

A cluster is the local host or a Kubernetes cluster (service/clusters.py); each
answer says how it is reached, whether it answers (``health``) and what it holds.
"""

from __future__ import annotations

from ...backends.kubernetes.roles import DEFAULT_ROLE_TEMPLATES
from ...core import model as core
from ...core.checks import DEFAULT_CHECKLIST
from ...core.errors import Conflict, PolicyViolation
from ...core.requests import ClusterChecks, ClusterCreate, ClusterUpdate, PriceTable, parse_body
from ...core.resources import Cluster, ClusterChecklist, ClusterPrices, Clusters, RoleTemplate, RoleTemplates
from ...store import queries
from ...store.db import transaction
from ..operations import ADMIN, Named, body_at
from ..serialize import check_item, cluster_resource
from .base import APIHandler, operation


def inventory_by_name(egs) -> dict:
    """Every cluster's stored inventory row, by name."""
    with egs.sessions() as session:
        return {row.name: row for row in queries.inventory_rows(session)}


class ClustersHandler(APIHandler):
    @operation(
        "GET /clusters",
        "Clusters: the local host and Kubernetes clusters, whether each answers, and its size",
        ok="clusters",
        answer=Clusters,
        errors=(401,),
        names=(Named("/clusters/{name}", body_at("/clusters/0", name="name")),),
    )
    def get(self) -> None:
        rows = inventory_by_name(self.egs)
        states = sorted(self.egs.registry.states.values(), key=lambda s: s.name)
        self.write_json(Clusters(clusters=[cluster_resource(state, rows.get(state.name)) for state in states]))

    @operation(
        "POST /clusters",
        "Register a Kubernetes cluster by kubeconfig file and context, or in-cluster (admin)",
        ok="registered (health says whether it answers)",
        answer=Cluster,
        status=201,
        errors=(401, 403, 409, 422),
        body=ClusterCreate,
        auth=ADMIN,
        names=(Named("/clusters/{name}", body_at("", name="name")),),
    )
    async def post(self) -> None:
        spec = parse_body(ClusterCreate, self.json_body())
        state = await self.egs.registry.register(spec)
        self.write_json(cluster_resource(state, inventory_by_name(self.egs).get(state.name)), 201)


class ClusterHandler(APIHandler):
    @operation(
        "PATCH /clusters/{name}",
        "Move a cluster to another project (admin); not a config cluster, nor one that slices or GPRs of other "
        "projects use (409)",
        ok="moved",
        answer=Cluster,
        errors=(401, 403, 404, 409, 422),
        body=ClusterUpdate,
        auth=ADMIN,
    )
    def patch(self, name: str) -> None:
        """Move the cluster to another project (409 for a config cluster, whose project the config says,
        and while slices or GPRs of other projects use it)."""
        state = self.egs.registry.states.get(name)
        if state is None:
            raise self.not_found(f"cluster named {name!r}")
        body = parse_body(ClusterUpdate, self.json_body())
        if state.origin == "config":
            raise Conflict(f"cluster {name!r} comes from EGSService.clusters in the config: set its project there")
        with transaction(self.egs.sessions) as session:
            users = queries.cluster_users_outside(session, name, body.project)
            if users:
                raise Conflict(
                    f"cluster {name!r} is used by {', '.join(users)} of other projects; "
                    f"only project {body.project!r}'s slices could use it: move or end them first"
                )
            queries.set_cluster_project(session, name, state.backend.kind, body.project, self.now())
            queries.add_event(
                session,
                core.Event(
                    kind="cluster-moved",
                    actor=self.user_name,
                    reason=f"cluster {name} is project {body.project}'s",
                    time=self.now(),
                    data={"cluster": name, "project": body.project},
                ),
            )
        self.egs.reconciler.wake()
        self.write_json(cluster_resource(state, inventory_by_name(self.egs).get(name)))

    @operation(
        "DELETE /clusters/{name}",
        "Remove a cluster registered through the API, unless GPRs hold or wait for it (admin)",
        ok="removed",
        status=204,
        errors=(401, 403, 404, 409),
        auth=ADMIN,
    )
    async def delete(self, name: str) -> None:
        await self.egs.registry.unregister(self.registered_cluster(name))
        self.set_status(204)
        self.finish()


class ClusterPricesHandler(APIHandler):
    @operation(
        "GET /clusters/{name}/prices",
        "A cluster's prices per GPU-hour, per shape",
        ok="its prices",
        answer=ClusterPrices,
        errors=(401, 404),
    )
    def get(self, name: str) -> None:
        name = self.registered_cluster(name)
        with self.egs.sessions() as session:
            prices = queries.prices(session, [name])
        self.write_json(ClusterPrices(cluster=name, prices={shape: p for (_, shape), p in sorted(prices.items())}))

    @operation(
        "PUT /clusters/{name}/prices",
        "Replace a cluster's prices per GPU-hour, per shape as /inventory names it (admin)",
        ok="its prices now",
        answer=ClusterPrices,
        errors=(401, 403, 404, 422),
        body=PriceTable,
        auth=ADMIN,
    )
    def put(self, name: str) -> None:
        """Replace every price of the cluster: each shape one its nodes have now (422 naming it otherwise)."""
        name = self.registered_cluster(name)
        prices = parse_body(PriceTable, self.json_body()).root
        with transaction(self.egs.sessions) as session:
            shapes = queries.cluster_shapes(session, name)
            for shape in prices:
                if shape not in shapes:
                    raise PolicyViolation(
                        shape,
                        f"cluster {name!r} has no nodes of shape {shape!r} now; its shapes: "
                        f"{', '.join(sorted(shapes)) or 'none'} (GET /inventory)",
                    )
            queries.set_prices(session, name, prices)
            queries.add_event(
                session,
                core.Event(
                    kind="prices-set",
                    actor=self.user_name,
                    reason=f"cluster {name}: "
                    + (", ".join(f"{shape} {p:g}/GPU-hour" for shape, p in sorted(prices.items())) or "no prices"),
                    time=self.now(),
                    data={"cluster": name, "prices": prices},
                ),
            )
        self.write_json(ClusterPrices(cluster=name, prices=dict(sorted(prices.items()))))


class RoleTemplatesHandler(APIHandler):
    @operation(
        "GET /role-templates",
        "The role templates each slice namespace on Kubernetes gets as Role and RoleBinding (admin)",
        ok="templates",
        answer=RoleTemplates,
        errors=(401, 403),
        auth=ADMIN,
    )
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


class ClusterChecksHandler(APIHandler):
    def runs_here(self, name: str) -> frozenset[str]:
        """The kinds of check the cluster's backend runs, with gpu-health (judged by the service)."""
        backend = self.egs.registry.backends.get(name)
        if backend is None:
            raise self.not_found(f"cluster named {name!r}")
        return backend.check_kinds | {"gpu-health"}

    def answer(self, name: str, kinds: frozenset[str]) -> None:
        with self.egs.sessions() as session:
            checklist = queries.cluster_checklist(session, name)
        self.write_json(
            ClusterChecklist(
                cluster=name,
                checks=[check_item(spec) for spec in checklist],
                default=checklist is DEFAULT_CHECKLIST,
                runs_here=sorted(kinds),
            )
        )

    @operation(
        "GET /clusters/{name}/checks",
        "The checklist a cluster's nodes pass at a GPR's entry and exit",
        ok="its checklist",
        answer=ClusterChecklist,
        errors=(401, 404),
    )
    def get(self, name: str) -> None:
        self.answer(name, self.runs_here(name))

    @operation(
        "PUT /clusters/{name}/checks",
        "Replace a cluster's checklist (admin)",
        ok="its checklist now",
        answer=ClusterChecklist,
        errors=(401, 403, 404, 422),
        body=ClusterChecks,
        auth=ADMIN,
    )
    def put(self, name: str) -> None:
        """Replace the checklist: each check of a kind the cluster runs (422 naming it otherwise)."""
        kinds = self.runs_here(name)
        checklist = parse_body(ClusterChecks, self.json_body()).checks
        in_jobs = self.egs.registry.backends[name].kind == "kubernetes"
        for i, spec in enumerate(checklist):
            if spec.kind not in kinds:
                raise PolicyViolation(
                    f"checks.{i}.kind",
                    f"cluster {name!r} cannot run {spec.kind} checks; it runs: {', '.join(sorted(kinds))}",
                )
            if spec.kind in ("nccl", "custom") and in_jobs != (spec.image is not None):
                raise PolicyViolation(
                    f"checks.{i}.image",
                    f"cluster {name!r} runs {spec.kind} checks in a Job on the node: give its image"
                    if in_jobs
                    else f"cluster {name!r} runs {spec.kind} checks as commands on the host, not images",
                )
        self.set_checklist(name, checklist)
        self.answer(name, kinds)

    @operation(
        "DELETE /clusters/{name}/checks",
        "Give a cluster egs-hub's default checklist again (admin)",
        ok="its checklist now",
        answer=ClusterChecklist,
        errors=(401, 403, 404),
        auth=ADMIN,
    )
    def delete(self, name: str) -> None:
        kinds = self.runs_here(name)
        self.set_checklist(name, None)
        self.answer(name, kinds)

    def set_checklist(self, name: str, checklist: tuple | None) -> None:
        """Record the cluster's checklist (None: the default), with its event."""
        said = DEFAULT_CHECKLIST if checklist is None else checklist
        with transaction(self.egs.sessions) as session:
            queries.set_cluster_checklist(session, name, checklist)
            queries.add_event(
                session,
                core.Event(
                    kind="checks-set",
                    actor=self.user_name,
                    reason=f"cluster {name}: checks "
                    + (", ".join(f"{spec.name} at {' and '.join(spec.at)}" for spec in said) or "none")
                    + (" (the default)" if checklist is None else ""),
                    time=self.now(),
                    data={"cluster": name, "checks": [spec.name for spec in said]},
                ),
            )
