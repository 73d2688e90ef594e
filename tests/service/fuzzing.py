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

from .hub import Hub

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
# What users' requests change; the reconcile loop and the hub change none of it.
USER_STATE = {
    "projects": "SELECT * FROM projects ORDER BY id",
    "clusters": "SELECT id, project_id, name, kind, kubeconfig, context, in_cluster, node_selector, exit_grace_s "
    "FROM clusters ORDER BY id",
    "slices": "SELECT * FROM slices ORDER BY id",
    "slice_namespaces": "SELECT * FROM slice_namespaces ORDER BY id",
    "gprs": "SELECT id, name, slice, requested_by, cluster, shape, gpus, nodes, priority, duration_s, start_after, "
    "idle_timeout_s, preemptible, template FROM gprs ORDER BY id",
    "gpr_templates": "SELECT * FROM gpr_templates ORDER BY name",
    "prices": "SELECT * FROM prices ORDER BY cluster, shape",
}


@dataclass
class Fuzzed:
    requests: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)
    nothing_to_send: list[str] = field(default_factory=list)
    # Per operation ("GET /gprs/{id}"): requests sent, and those answered 2xx (the operation's logic ran).
    sent: collections.Counter = field(default_factory=collections.Counter)
    succeeded: collections.Counter = field(default_factory=collections.Counter)

    def never_succeeded(self) -> list[str]:
        return sorted(label for label in self.sent if not self.succeeded[label])


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
                text("SELECT id, kind, gpr_id, slice FROM events WHERE actor IN :users ORDER BY id").bindparams(
                    bindparam("users", expanding=True)
                ),
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


def prepare(hub: Hub) -> dict[str, dict[str, str]]:
    """Something real to act on: a slice with a member, a provisioned and a queued GPR, a template, a
    workspace request, a capacity plan and a maintenance window. Answers the path parameters naming
    them, by the paths' first segment (``{"gprs": {"id": "1"}, ...}``): fuzz() sends valid requests to
    them as well as to the names it makes up, so the operations' logic runs, not only their 404."""
    admin, member = hub.admin(), hub.client(hub.user_token(MEMBER))
    admin.post("slices", {"name": "fuzz", "members": [MEMBER]}, expect=201)
    gprs = [admin.post("gprs", {"slice": "fuzz", "gpus": 1, "duration": "1h"}, expect=201) for _ in range(2)]
    admin.post("templates", {"name": "fuzz-t", "slice": "fuzz", "gpus": 1, "duration": "1h"}, expect=201)
    asked = member.post("workspace-requests", {"name": "fuzz-asked"}, expect=201)
    plan = admin.post("capacity-plans", {"since": "1d"}, expect=202)
    node = admin.get("nodes", expect=200)["nodes"][0]
    later = datetime.now(UTC) + timedelta(days=300)
    admin.post(
        f"nodes/{node['cluster']}/{node['name']}/maintenance",
        {"start": later.isoformat(), "end": (later + timedelta(hours=1)).isoformat(), "reason": "fuzz"},
        expect=201,
    )
    gpu = admin.get("gpus", expect=200)["gpus"][0]
    user = {"user": MEMBER, "server": ""}
    return {
        "slices": {"name": "fuzz", "user": MEMBER},
        "projects": {"name": "default", "user": MEMBER},
        "clusters": {"name": node["cluster"]},
        "nodes": {"cluster": node["cluster"], "name": node["name"]},
        "gprs": {"id": str(gprs[-1]["id"])},
        "templates": {"name": "fuzz-t"},
        "workspace-requests": {"id": str(asked["id"])},
        "capacity-plans": {"id": str(plan["id"])},
        "gpus": {"uuid": gpu["uuid"]},
        "servers": user,
        "server-restarts": user,
    }


def known_path(known: dict[str, dict[str, str]], operation) -> dict[str, str] | None:
    """The path parameters of what prepare() made for ``operation``, if it made all they name."""
    names = [parameter.name for parameter in operation.path_parameters]
    if not names:
        return None
    values = known.get(operation.path.split("/")[1], {})
    return {name: values[name] for name in names} if all(values.get(name) for name in names) else None


def actors(hub: Hub) -> tuple[str, str]:
    """The names the fuzzing users' actions are recorded under: the admin token's (the first
    GPR's submitter) and the member's."""
    return hub.admin().get("gprs?limit=1", expect=200)["gprs"][0]["requested_by"], MEMBER


def changes(before: dict, after: dict) -> list[str]:
    return [f"{key}: {before[key]} -> {after[key]}" for key in before if before[key] != after[key]]


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
    known: dict[str, dict[str, str]] | None = None,
) -> Fuzzed:
    """Up to ``examples`` generated requests per operation with ``token``, from hypothesis seed ``at``.

    ``users``: the hub users whose actions write events (the token's, and whoever it acts for);
    ``known``: prepare()'s path parameters, which valid requests use half the time."""
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
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(case=operation.as_strategy(generation_mode=mode), use_real=st.booleans())
        def check(case, use_real):
            nonlocal last
            real = known_path(known or {}, case.operation) if mode is GenerationMode.POSITIVE else None
            if real is not None and use_real:
                case.path_parameters = real
            try:
                response = case.call(base_url=base_url, session=session, headers=headers)
            finally:
                session.cookies.clear()
            fuzzed.requests += 1
            fuzzed.statuses[response.status_code] += 1
            fuzzed.sent[case.operation.label] += 1
            fuzzed.succeeded[case.operation.label] += 200 <= response.status_code < 300
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
