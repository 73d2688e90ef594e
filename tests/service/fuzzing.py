"""Schemathesis against a live egs-hub: every operation of its OpenAPI document, generated input.

Used by tests/service/test_openapi.py (a few examples per operation, in CI) and by
benchmarks/fuzz_api.py (many). Every answer must: not be a 5xx, use a status the
document lists, be JSON matching the document's schema, reject schema-invalid input
with a 4xx, and, when it is a 4xx, have changed nothing: what requests change (slices,
their namespaces and hub groups, clusters, projects, GPR requests and the events users'
actions write) reads the same after the answer as after the answer before it.
"""

from __future__ import annotations

import collections
import json
import pathlib
import socket
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import bindparam, create_engine, text

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.requests import BODIES, parse_body
from egs_hub.service.app import api_document

from ..k8s.kubeconfig import write_kubeconfig
from .hub import Hub, wait_for

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# Operations without any input that can be invalid: no parameters.
NO_INVALID_INPUT = {
    "GET /health",
    "GET /projects",
    "GET /slices",
    "GET /inventory",
    "GET /clusters",
    "GET /role-templates",
    "GET /queue/evictions",
    "GET /capacity-plans",
}
NOT_REPLICAS = "id NOT IN (SELECT gpr_id FROM endpoint_replicas)"
# What users' requests change; the reconcile loop, the endpoints' scaling and the hub change none of it.
USER_STATE = {
    "projects": "SELECT * FROM projects ORDER BY id",
    "clusters": "SELECT id, project_id, name, kind, kubeconfig, context, in_cluster, node_selector, exit_grace_s "
    "FROM clusters ORDER BY id",
    "slices": "SELECT * FROM slices ORDER BY id",
    "slice_namespaces": "SELECT * FROM slice_namespaces ORDER BY id",
    # An endpoint's replicas are the service's GPRs, filed when it wants them (service/endpoints.py).
    "gprs": "SELECT id, name, slice, requested_by, cluster, shape, gpus, nodes, priority, duration_s, start_after, "
    f"idle_timeout_s, preemptible, template FROM gprs WHERE {NOT_REPLICAS} ORDER BY id",
    "gpr_templates": "SELECT * FROM gpr_templates ORDER BY name",
    "prices": "SELECT * FROM prices ORDER BY cluster, shape",
}


@dataclass
class Fuzzed:
    requests: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)
    nothing_to_send: list[str] = field(default_factory=list)
    # Per operation ("GET /gprs/{id}"): the statuses it answered; a 2xx says its logic ran.
    answers: collections.defaultdict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    # A message of each refusal status per operation, to say why its logic did not run: the last to a
    # request naming what prepare() made, else the first.
    refusals: dict = field(default_factory=dict)

    def never_succeeded(self) -> list[str]:
        return sorted(label for label, statuses in self.answers.items() if not any(200 <= s < 300 for s in statuses))


class UserState:
    """What the fuzzing users' requests can change, read from the store and the hub.

    It is read after every answer, so it keeps its connections: the engine's pool, and a
    keep-alive session to the hub's API (its answer took 22 ms on a new connection, 15 ms on a
    kept one, here)."""

    def __init__(self, hub: Hub, users: tuple[str, ...]):
        self.hub, self.users = hub, users
        self.engine = create_engine(hub.db_url)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {hub.admin_token}"

    def read(self) -> dict:
        with self.engine.connect() as connection:
            state = {table: connection.execute(text(query)).all() for table, query in USER_STATE.items()}
            state["users' events"] = connection.execute(
                text(
                    "SELECT id, kind, gpr_id, slice FROM events WHERE actor IN :users AND (gpr_id IS NULL OR "
                    f"gpr_id {NOT_REPLICAS.removeprefix('id ')}) ORDER BY id"
                ).bindparams(bindparam("users", expanding=True)),
                {"users": list(self.users)},
            ).all()
        response = self.session.get(f"{self.hub.url}/hub/api/groups", timeout=60)
        assert response.status_code == 200, f"hub GET groups: {response.status_code} {response.text}"
        state["hub groups"] = sorted((g["name"], sorted(g["users"])) for g in response.json())
        return state

    def close(self) -> None:
        self.session.close()
        self.engine.dispose()


MEMBER = "fuzzer"
OTHER_MEMBER = "fuzzer-2"
ENDPOINT_SERVER = str(pathlib.Path(__file__).with_name("endpoint_server.py"))


# Body fields that name one thing only together: a cluster's kubeconfig, read where it is (the fuzzed
# service runs in no pod, where in_cluster is refused).
TOGETHER = (frozenset({"in_cluster", "kubeconfig"}),)


@dataclass(frozen=True)
class Prepared:
    """What prepare() made, as fuzz() puts it in valid requests. ``paths``: the path parameters naming
    each thing, by the operations on it, the first that matches: ``"DELETE slices/members"`` (a method
    and the path's last word), ``"gprs/approve"`` (the path's last word), ``"DELETE gprs"`` (a method),
    ``"gprs"`` (any operation on paths starting /gprs); one of the list is used, so an operation that
    ends something ends what was made for it. ``body``: the values of body fields
    that name something (a slice, a project, a kubeconfig) or size it (GPUs the hub holds). ``query``: by
    operation label, query parameters that name something (the cluster of a slice's kubeconfig)."""

    paths: dict[str, list[dict[str, str]]]
    body: dict[str, object]
    query: dict[str, dict[str, str]] = field(default_factory=dict)

    def path_of(self, operation, pick: int) -> dict[str, str] | None:
        """The path parameters of one thing made for ``operation`` (``pick`` chooses), if all are named."""
        names = [parameter.name for parameter in operation.path_parameters]
        words = [segment for segment in operation.path.split("/")[1:] if "{" not in segment]
        noun, method = words[0], operation.method.upper()
        below = [f"{method} {noun}/{words[-1]}", f"{noun}/{words[-1]}"] if len(words) > 1 else []
        keys = [*below, f"{method} {noun}", noun]
        for key in keys:
            made = [values for values in self.paths.get(key, []) if all(values.get(name) for name in names)]
            if names and made:
                return {name: made[pick % len(made)][name] for name in names}
        return None

    def fill_query(self, operation, query: dict | None) -> dict | None:
        """``query`` with the parameters prepare() names for ``operation`` set to them."""
        named = self.query.get(operation.label)
        return {**(query or {}), **named} if named else query

    def fill(self, body: dict) -> dict:
        """``body`` with each field that names something naming what was made, and all of a group in
        ``TOGETHER`` when one of it is there."""
        named = {key for key, value in body.items() if key in self.body and value is not None}
        for group in TOGETHER:
            if named & group:
                named |= group
        return {**body, **{key: self.body[key] for key in named}}


def prepare(hub: Hub, emulated: pathlib.Path | None = None) -> Prepared:
    """Something real to act on, and some of it to end: slices with a member, GPRs provisioned, queued
    and waiting for approval, templates, a project, workspace requests, a capacity plan, a maintenance
    window, a Kubernetes cluster that does not answer, and with ``emulated`` (the kubeconfig of an emulated
    cluster, tests/k8s/threaded.py) one that does: the slice ``fuzz-kube`` has a namespace there and the cluster two
    node pools. fuzz() sends three in four valid requests to them, as well as to the names it makes up, so the
    operations' logic runs, not only their 404."""
    admin, member = hub.admin(), hub.client(hub.user_token(MEMBER))
    for name, policy in (("fuzz", {}), ("fuzz-ask", {"auto_approve_max_gpus": 1}), ("fuzz-doomed", {})):
        admin.post("slices", {"name": name, "members": [MEMBER], "policy": policy}, expect=201)
    gprs = [admin.post("gprs", {"slice": "fuzz", "gpus": 1, "duration": "1h"}, expect=201) for _ in range(2)]
    later = datetime.now(UTC) + timedelta(days=300)
    queued, doomed = (
        admin.post("gprs", {"slice": "fuzz", "gpus": 1, "duration": "1h", "start_after": later.isoformat()}, expect=201)
        for _ in range(2)
    )
    asking = [member.post("gprs", {"slice": "fuzz-ask", "gpus": 2, "duration": "1h"}, expect=201) for _ in range(4)]
    assert {gpr["status"] for gpr in asking} == {"pending-approval"}, asking
    for name in ("fuzz-t", "fuzz-doomed-t"):
        admin.post("templates", {"name": name, "slice": "fuzz", "gpus": 1, "duration": "1h"}, expect=201)
    for name in ("fuzz-doomed-p", "fuzz-p"):
        admin.post("projects", {"name": name}, expect=201)
        admin.call("PUT", f"projects/{name}/admins/{MEMBER}", expect=200)
    admin.call("PUT", f"slices/fuzz-ask/members/{OTHER_MEMBER}", expect=200)
    for name in ("fuzz-e", "fuzz-doomed-e"):
        endpoint = {
            "slice": "fuzz",
            "name": name,
            "runtime": "command",
            "command": [sys.executable, ENDPOINT_SERVER, "{port}"],
        }
        admin.post("endpoints", endpoint, expect=202)
    asked = [member.post("workspace-requests", {"name": f"fuzz-asked-{i}"}, expect=201) for i in range(4)]
    plan = admin.post("capacity-plans", {"since": "1d"}, expect=202)
    node = admin.get("nodes", expect=200)["nodes"][0]
    admin.post(
        f"nodes/{node['cluster']}/{node['name']}/maintenance",
        {"start": later.isoformat(), "end": (later + timedelta(hours=1)).isoformat(), "reason": "fuzz"},
        expect=201,
    )
    with socket.socket() as closed:  # a port nothing listens on: the cluster registers, shown unavailable
        closed.bind(("127.0.0.1", 0))
        server = f"https://127.0.0.1:{closed.getsockname()[1]}"
    kubeconfig = write_kubeconfig(pathlib.Path(hub.data_dir) / "fuzz.kubeconfig", server, "token", "fuzz")
    admin.post("clusters", {"name": "fuzz-gone", "kubeconfig": str(kubeconfig)}, expect=201)
    gpu = admin.get("gpus", expect=200)["gpus"][0]
    user = {"user": MEMBER, "server": "fuzz-server"}
    earlier = later - timedelta(days=100)
    kubernetes = prepare_kubernetes(hub, emulated) if emulated is not None else Prepared({}, {})
    # Clear takes a node of its own, quarantined here: the run may send it before any quarantine.
    nodes = admin.get("nodes", expect=200)["nodes"]
    cleared = next(n for n in nodes if n["cluster"] == node["cluster"] and n["name"] != node["name"])
    admin.post(f"nodes/{cleared['cluster']}/{cleared['name']}/quarantine", {"reason": "fuzz"}, expect=200)
    return Prepared(
        paths={
            "slices": [{"name": "fuzz", "user": MEMBER}, {"name": "fuzz-ask", "user": MEMBER}],
            "DELETE slices": [{"name": "fuzz-doomed", "user": MEMBER}],
            "DELETE slices/members": [{"name": "fuzz-ask", "user": OTHER_MEMBER}],
            "projects": [{"name": "default", "user": MEMBER}],
            "DELETE projects": [{"name": "fuzz-doomed-p", "user": MEMBER}],
            "DELETE projects/admins": [{"name": "fuzz-p", "user": MEMBER}],
            "endpoints": [{"slice": "fuzz", "name": "fuzz-e"}],
            "DELETE endpoints": [{"slice": "fuzz", "name": "fuzz-doomed-e"}],
            "clusters": [{"name": node["cluster"]}, {"name": "fuzz-gone"}],
            "DELETE clusters": [{"name": "fuzz-gone"}],
            "DELETE clusters/checks": [{"name": node["cluster"]}],
            "clusters/checks": [{"name": node["cluster"]}],
            "nodes": [{"cluster": node["cluster"], "name": node["name"]}],
            "nodes/clear": [{"cluster": cleared["cluster"], "name": cleared["name"]}],
            "gprs": [{"id": str(gpr["id"])} for gpr in (gprs[-1], queued)],
            "DELETE gprs": [{"id": str(doomed["id"])}],  # its own: a PATCH may start the queued one now
            "gprs/release": [{"id": str(gprs[0]["id"])}],  # one of its own: a PATCH may end the others
            "gprs/approve": [{"id": str(gpr["id"])} for gpr in asking[:2]],
            "gprs/deny": [{"id": str(gpr["id"])} for gpr in asking[2:]],
            "templates": [{"name": "fuzz-t"}],
            "DELETE templates": [{"name": "fuzz-doomed-t"}],
            "workspace-requests": [{"id": str(request["id"])} for request in asked[:2]],
            "workspace-requests/deny": [{"id": str(request["id"])} for request in asked[2:]],
            "capacity-plans": [{"id": str(plan["id"])}],
            "gpus": [{"uuid": gpu["uuid"]}],
            "servers": [user],
            "server-restarts": [user],
            **kubernetes.paths,
        },
        query=kubernetes.query,
        body={
            "slice": "fuzz",
            "template": "fuzz-t",
            "project": "default",
            "cluster": node["cluster"],
            "shape": node["shape"],
            "gpus": 1,  # sizes the fuzzed hub's GPUs hold
            "nodes": 1,
            "kubeconfig": str(kubeconfig),
            "in_cluster": False,
            "context": "fuzz",
            "start": earlier.isoformat(),
            "end": (earlier + timedelta(hours=1)).isoformat(),
        },
    )


EMULATED = "fuzz-k8s"


def prepare_kubernetes(hub: Hub, kubeconfig: pathlib.Path) -> Prepared:
    """The emulated cluster registered as ``fuzz-k8s``, answering; the slice ``fuzz-kube`` set up there
    (its kubeconfig; nothing that changes slices names it); the pools ``fuzz-pool`` (read) and
    ``fuzz-doomed-pool`` (deleted)."""
    admin = hub.admin()
    admin.post("clusters", {"name": EMULATED, "kubeconfig": str(kubeconfig), "context": "emulated"}, expect=201)

    def answering() -> bool:
        clusters = admin.get("clusters", expect=200)["clusters"]
        return any(c["name"] == EMULATED and c["health"] == "ok" for c in clusters)

    wait_for(answering, 30, "the emulated cluster to answer")
    admin.post("slices", {"name": "fuzz-kube", "members": [MEMBER]}, expect=201)
    admin.call("PATCH", "slices/fuzz-kube", {"namespaces": {EMULATED: ["fuzz-home"]}}, expect=200)
    for pool in ("fuzz-pool", "fuzz-doomed-pool"):
        body = {"name": pool, "shape": "H100-80GB x8", "max_nodes": 2}
        admin.post(f"clusters/{EMULATED}/pools", body, expect=201)
    return Prepared(
        paths={
            "POST clusters/pools": [{"name": EMULATED}],
            "DELETE clusters/pools": [{"name": EMULATED, "pool": "fuzz-doomed-pool"}],
            "clusters/pools": [{"name": EMULATED, "pool": "fuzz-pool"}],
            "slices/kubeconfig": [{"name": "fuzz-kube"}],
        },
        body={},
        query={"GET /slices/{name}/kubeconfig": {"cluster": EMULATED}},
    )


def actors(hub: Hub) -> tuple[str, str]:
    """The names the fuzzing users' actions are recorded under: the admin token's (the first
    GPR's submitter) and the member's."""
    return hub.admin().get("gprs?limit=1", expect=200)["gprs"][0]["requested_by"], MEMBER


def changes(before: dict, after: dict) -> list[str]:
    return [f"{key}: {before[key]} -> {after[key]}" for key in before if before[key] != after[key]]


def generated(examples: int):
    """Hypothesis settings of every fuzz run: ``examples`` generated cases, no shrinking, no database, no
    deadline or health checks (a case is a request to a live service)."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )


def operations(hub: Hub) -> list:
    config = SchemathesisConfig()
    config.projects.default.generation.update(with_security_parameters=False)
    schema = schemathesis.openapi.from_url(hub.api + "openapi.json", config=config)
    return [result.ok() for result in schema.get_all_operations()]


def fuzz(
    hub: Hub,
    token: str,
    users: tuple[str, ...],
    mode: GenerationMode,
    examples: int,
    at: int,
    prepared: Prepared | None = None,
) -> Fuzzed:
    """Up to ``examples`` generated requests per operation with ``token``, from hypothesis seed ``at``.

    ``users``: the hub users whose actions write events (the token's, and whoever it acts for);
    ``prepared``: what prepare() made, which three in four valid requests name."""
    headers = {"Authorization": f"token {token}"}
    base_url = hub.api.rstrip("/")
    fuzzed = Fuzzed()
    # One keep-alive connection for the generated requests. Schemathesis sends a request on a
    # session of its own without the session's headers; ours has none, and its cookies are
    # dropped after every answer, so each request carries only what the case and ``token`` give it.
    session = requests.Session()
    session.headers.clear()
    state = UserState(hub, users)
    last = state.read()
    for operation in operations(hub):

        @seed(at)
        @generated(examples)
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case):
            nonlocal last
            # Three in four, in turn through what was made, so each thing made is named whatever the seed.
            sent = sum(fuzzed.answers[case.operation.label].values())
            pick = sent - sent // 4
            real = prepared is not None and sent % 4 != 3 and mode is GenerationMode.POSITIVE
            if real:
                # Assigned only when changed: schemathesis revalidates what changed, and a body left out
                # (which it cannot validate) would turn the case into an invalid one.
                if (path := prepared.path_of(case.operation, pick)) is not None:
                    case.path_parameters = path
                if isinstance(case.body, dict):
                    case.body = prepared.fill(case.body)
                if (query := prepared.fill_query(case.operation, case.query)) != case.query:
                    case.query = query
            try:
                response = case.call(base_url=base_url, session=session, headers=headers)
            finally:
                session.cookies.clear()
            fuzzed.requests += 1
            fuzzed.statuses[response.status_code] += 1
            fuzzed.answers[case.operation.label][response.status_code] += 1
            if response.status_code >= 400 and (
                real or (case.operation.label, response.status_code) not in fuzzed.refusals
            ):
                fuzzed.refusals[case.operation.label, response.status_code] = response.text[:300]
            now = state.read()
            before, last = last, now
            case.validate_response(response, checks=CHECKS)
            if 400 <= response.status_code < 500:
                changed = changes(before, now)
                assert not changed, f"answered {response.status_code} but changed " + "; ".join(changed)

        try:
            check()
        except Unsatisfiable:
            # No input of this kind exists (invalid input to an operation whose only inputs are
            # free-form strings): there is nothing to send, which is recorded, not hidden.
            fuzzed.nothing_to_send.append(operation.label)
        except Exception as e:  # one operation's failure must not hide the others'
            # Hypothesis reports a failure it could not repeat (a write that answers 409 the second
            # time) as a group: its message says only that, the failure is in the group.
            causes = "".join(f"\n  {cause!r}" for cause in getattr(e, "exceptions", ()))
            fuzzed.failures.append(f"{operation.label}: {e}{causes}")
            last = state.read()
    state.close()
    session.close()
    return fuzzed


BODY_MODELS = {cls.__name__: cls for cls in BODIES}


def body_model(operation) -> type | None:
    body = operation.definition.raw.get("requestBody")
    if body is None:
        return None
    return BODY_MODELS[body["content"]["application/json"]["schema"]["$ref"].split("/")[-1]]


def schema_valid_bodies(examples: int, at: int) -> dict[str, dict]:
    """Per operation with a body: ``examples`` bodies valid by the document (schemathesis' positive
    mode) through the API's parser, ``parse_body`` with the operation's model, as its handler
    parses them, without a server; how many it took, and its commonest refusals (each a rule of
    the API that the document does not say)."""
    schema = schemathesis.openapi.from_dict(api_document("/api/", "bodies"))
    taken: collections.Counter = collections.Counter()
    refused: collections.defaultdict = collections.defaultdict(collections.Counter)

    @generated(examples)
    @given(data=st.data())
    def check(data, operation):
        case = data.draw(operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        body = json.loads(json.dumps(case.body)) if isinstance(case.body, dict | list) else {}
        try:
            parse_body(body_model(operation), body)
        except InvalidRequest as e:
            refused[operation.label][f"{e.field}: {str(e)[:100]}"] += 1
        else:
            taken[operation.label] += 1

    results = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        if body_model(operation) is None:
            continue
        seed(at)(check)(operation=operation)
        total = taken[operation.label] + sum(refused[operation.label].values())
        results[operation.label] = {
            "model": body_model(operation).__name__,
            "bodies": total,
            "taken": taken[operation.label],
            "share_taken": round(taken[operation.label] / total, 3) if total else None,
            "refusals": dict(refused[operation.label].most_common(5)),
        }
    return results
