"""Every operation of the API, as every kind of stranger to a workspace (issue 45, item 8).

A *victim* workspace (a project with its admin, a slice with its member, a provisioned, a queued and a
pending GPR, a template, an endpoint and a workspace request) and four *attackers*: a member of another
slice, the admin of another project, a hub user in no slice, and a caller with no token. For each
operation of the served OpenAPI document, each attacker sends the request that aims at the victim (its
path names the victim's things, its query and body too) and the same request aimed at a *ghost* (names
that exist nowhere). The answers must be the same (status, and the message once the victim's names are
put in the ghost's place): what a caller may not see answers as what does not exist. Nothing of the
victim changes (its rows, events and hub groups, and the egs-admins group), and no answer carries a name
or GPR id of the victim that the request did not name itself.

Operations open to everyone answer alike for both; the one exception is asking a project for a workspace
(OPEN_TO_ALL), which any user may do of any project they were told the name of: what it makes is the
caller's own request, and the victim's state must stay as it was all the same.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta

import pytest
import requests
from sqlalchemy import bindparam, create_engine, text

from egs_hub.embedded import free_port

from ..conftest import DATABASES, new_db_url
from ..service.hub import Client, Hub, start_hub, stop_hub, until_status

SERVER = os.path.join(os.path.dirname(__file__), os.pardir, "service", "endpoint_server.py")
OPEN_TO_ALL = {"POST /workspace-requests"}
ID_KEYS = {"gpr", "gpr_id", "held_by", "victims", "gprs"}  # keys whose values are GPR ids (and a GPR's "id")


@dataclass(frozen=True)
class Names:
    """What a request may aim at: the victim's things, or a ghost's."""

    project: str
    slice: str
    member: str
    project_admin: str
    template: str
    endpoint: str
    gpr_name: str
    gpr: int  # provisioned
    queued: int
    pending: int
    request: int  # a workspace request
    node: str  # the node the provisioned GPR holds
    gpu: str  # a GPU it holds

    def texts(self) -> list[str]:
        return [self.project, self.slice, self.member, self.project_admin, self.template, self.endpoint, self.gpr_name]

    def ids(self) -> set[int]:
        return {self.gpr, self.queued, self.pending}


# The path of each operation, aimed at ``t`` by a caller named ``me``.
PATHS: dict[str, Callable[[Names, str], str]] = {
    "/projects/{name}": lambda t, me: f"projects/{t.project}",
    "/projects/{name}/admins/{user}": lambda t, me: f"projects/{t.project}/admins/{me}",
    "/workspace-requests/{id}": lambda t, me: f"workspace-requests/{t.request}",
    "/workspace-requests/{id}/approve": lambda t, me: f"workspace-requests/{t.request}/approve",
    "/workspace-requests/{id}/deny": lambda t, me: f"workspace-requests/{t.request}/deny",
    "/slices/{name}": lambda t, me: f"slices/{t.slice}",
    "/slices/{name}/kubeconfig": lambda t, me: f"slices/{t.slice}/kubeconfig?cluster=local",
    "/slices/{name}/volumes": lambda t, me: f"slices/{t.slice}/volumes",
    "/slices/{name}/members/{user}": lambda t, me: f"slices/{t.slice}/members/{me}",
    "/clusters/{name}": lambda t, me: "clusters/local",
    "/nodes/{cluster}/{name}": lambda t, me: f"nodes/local/{t.node}",
    "/nodes/{cluster}/{name}/quarantine": lambda t, me: f"nodes/local/{t.node}/quarantine",
    "/nodes/{cluster}/{name}/clear": lambda t, me: f"nodes/local/{t.node}/clear",
    "/nodes/{cluster}/{name}/checks": lambda t, me: f"nodes/local/{t.node}/checks",
    "/nodes/{cluster}/{name}/maintenance": lambda t, me: f"nodes/local/{t.node}/maintenance",
    "/nodes/{cluster}/{name}/layout": lambda t, me: f"nodes/local/{t.node}/layout",
    "/clusters/{name}/prices": lambda t, me: "clusters/local/prices",
    "/clusters/{name}/checks": lambda t, me: "clusters/local/checks",
    "/clusters/{name}/pools": lambda t, me: "clusters/local/pools",
    "/clusters/{name}/pools/{pool}": lambda t, me: "clusters/local/pools/spare",
    "/capacity-plans/{id}": lambda t, me: "capacity-plans/1",
    "/templates/{name}": lambda t, me: f"templates/{t.template}",
    "/endpoints/{slice}/{name}": lambda t, me: f"endpoints/{t.slice}/{t.endpoint}",
    "/endpoints/{slice}/{name}/scale": lambda t, me: f"endpoints/{t.slice}/{t.endpoint}/scale",
    "/gprs/{id}": lambda t, me: f"gprs/{t.queued}",
    "/gprs/{id}/release": lambda t, me: f"gprs/{t.gpr}/release",
    "/gprs/{id}/checks": lambda t, me: f"gprs/{t.gpr}/checks",
    "/gprs/{id}/approve": lambda t, me: f"gprs/{t.pending}/approve",
    "/gprs/{id}/deny": lambda t, me: f"gprs/{t.pending}/deny",
    "/gpus/{uuid}/metrics": lambda t, me: f"gpus/{t.gpu}/metrics",
    "/servers/{user}": lambda t, me: f"servers/{t.member}",
    "/servers/{user}/{server}": lambda t, me: f"servers/{t.member}/lab",
    "/server-restarts/{user}": lambda t, me: f"server-restarts/{t.member}",
    "/server-restarts/{user}/{server}": lambda t, me: f"server-restarts/{t.member}/lab",
    "/events": lambda t, me: f"events?gpr={t.gpr}",
    "/nodes": lambda t, me: "nodes?cluster=local",
}
# Operations whose query can name a slice: they name the victim's.
SLICE_QUERIES = {"/gprs", "/templates", "/endpoints", "/workloads", "/alerts", "/servers"}

LATER = (datetime.now(UTC) + timedelta(days=2)).isoformat()
# The body of each operation that takes one, aimed at ``t`` by ``me``.
BODIES: dict[str, Callable[[Names, str], dict]] = {
    "POST /projects": lambda t, me: {"name": f"p-{secrets.token_hex(3)}"},
    "PATCH /projects/{name}": lambda t, me: {"share": 9, "quota": {"max_gpus": 1}},
    "POST /workspace-requests": lambda t, me: {"project": t.project, "name": f"w-{secrets.token_hex(3)}"},
    "POST /workspace-requests/{id}/approve": lambda t, me: {"reason": "mine now"},
    "POST /workspace-requests/{id}/deny": lambda t, me: {"reason": "no"},
    "POST /slices": lambda t, me: {"name": f"s-{secrets.token_hex(3)}", "project": t.project, "members": [me]},
    "PATCH /slices/{name}": lambda t, me: {"display_name": "taken", "quota": {"max_gpus": 16}},
    "POST /clusters": lambda t, me: {"name": "evil", "kubeconfig": "/etc/passwd"},
    "PATCH /clusters/{name}": lambda t, me: {"project": t.project},
    "POST /nodes/{cluster}/{name}/quarantine": lambda t, me: {"reason": "mine"},
    "POST /nodes/{cluster}/{name}/clear": lambda t, me: {"reason": "mine"},
    "POST /nodes/{cluster}/{name}/maintenance": lambda t, me: {"start": LATER, "end": LATER, "reason": "x"},
    "POST /nodes/{cluster}/{name}/layout": lambda t, me: {"mig": None, "reason": "x"},
    "PUT /clusters/{name}/prices": lambda t, me: {"H100-80GB": 0.01},
    "PUT /clusters/{name}/checks": lambda t, me: {"checks": []},
    "POST /clusters/{name}/pools": lambda t, me: {"name": "spare", "min_nodes": 0, "max_nodes": 1},
    "POST /capacity-plans": lambda t, me: {},
    "POST /templates": lambda t, me: {"name": f"t-{secrets.token_hex(3)}", "slice": t.slice, "gpus": 1, "duration": 60},
    "PATCH /templates/{name}": lambda t, me: {"gpus": 8},
    "POST /endpoints": lambda t, me: endpoint_body(t.slice, f"e-{secrets.token_hex(3)}"),
    "PATCH /endpoints/{slice}/{name}": lambda t, me: {"max_replicas": 8},
    "POST /endpoints/{slice}/{name}/scale": lambda t, me: {"replicas": 2},
    "POST /wait-times": lambda t, me: {"slice": t.slice, "gpus": 1, "duration": "1h"},
    "POST /gprs": lambda t, me: {"slice": t.slice, "gpus": 1, "duration": "1h", "template": t.template},
    "PATCH /gprs/{id}": lambda t, me: {"priority": 300},
    "DELETE /gprs/{id}": lambda t, me: {"reason": "mine"},
    "POST /gprs/{id}/release": lambda t, me: {"reason": "mine"},
    "POST /gprs/{id}/approve": lambda t, me: {"reason": "ok"},
    "POST /gprs/{id}/deny": lambda t, me: {"reason": "no"},
    "POST /queue/evictions": lambda t, me: {"gpr_id": t.queued, "victims": [t.gpr]},
    "PUT /servers/{user}": lambda t, me: {"slice": t.slice},
    "PUT /servers/{user}/{server}": lambda t, me: {"slice": t.slice},
}


def endpoint_body(slice_name: str, name: str) -> dict:
    return {
        "slice": slice_name,
        "name": name,
        "runtime": "command",
        "command": [sys.executable, SERVER, "{port}"],
        "duration": "1h",
        "min_replicas": 0,
        "idle_timeout": 600,
    }


@dataclass(frozen=True)
class Attacker:
    kind: str
    name: str | None
    client: Client


@dataclass
class World:
    hub: Hub
    victim: Names
    ghost: Names
    attackers: list[Attacker]
    operations: list[tuple[str, str, dict]]  # method, path template, the document's operation


def make_victim(hub: Hub, admin: Client) -> Names:
    tag = secrets.token_hex(3)
    project, slice_name = f"vproj-{tag}", f"vslice-{tag}"
    member, project_admin = f"vmember-{tag}", f"vpa-{tag}"
    admin.post("projects", {"name": project}, expect=201)
    admin.call("PUT", f"projects/{project}/admins/{project_admin}", expect=200)
    policy = {"auto_approve_max_gpus": 1, "max_active_gprs": 8}
    admin.post("slices", {"name": slice_name, "project": project, "members": [member], "policy": policy}, expect=201)
    as_member = hub.client(hub.user_token(member))
    gpr_name = f"vgpr-{tag}"
    held = as_member.post("gprs", {"slice": slice_name, "gpus": 1, "duration": "2h", "name": gpr_name}, expect=201)
    held = until_status(as_member, held["id"], "provisioned", 60)
    later = {"slice": slice_name, "gpus": 1, "duration": "1h", "start_after": LATER}
    queued = as_member.post("gprs", later, expect=201)
    pending = as_member.post("gprs", {"slice": slice_name, "gpus": 2, "duration": "1h"}, expect=201)
    assert (queued["status"], pending["status"]) == ("queued", "pending-approval")
    template = f"vtpl-{tag}"
    admin.post("templates", {"name": template, "slice": slice_name, "gpus": 1, "duration": 60}, expect=201)
    endpoint = f"vend-{tag}"
    as_member.post("endpoints", endpoint_body(slice_name, endpoint), expect=202)
    request = as_member.post("workspace-requests", {"project": project, "name": f"vws-{tag}"}, expect=201)
    (node,) = held["bound_nodes"]
    return Names(
        project=project,
        slice=slice_name,
        member=member,
        project_admin=project_admin,
        template=template,
        endpoint=endpoint,
        gpr_name=gpr_name,
        gpr=held["id"],
        queued=queued["id"],
        pending=pending["id"],
        request=request["id"],
        node=node,
        gpu=held["bound_gpus"][0],
    )


def ghost_of(victim: Names) -> Names:
    """Names that exist nowhere, in the victim's shape."""
    far = 1_000_000
    return replace(
        victim,
        **{f.name: f"ghost-{value}" for f in fields(Names) if isinstance(value := getattr(victim, f.name), str)}
        | {"gpu": f"GPU-{secrets.token_hex(8)}"},
        gpr=victim.gpr + far,
        queued=victim.queued + far,
        pending=victim.pending + far,
        request=victim.request + far,
    )


def make_attackers(hub: Hub, admin: Client) -> list[Attacker]:
    tag = secrets.token_hex(3)
    member, project_admin, loner = f"am-{tag}", f"apa-{tag}", f"au-{tag}"
    admin.post("slices", {"name": f"aslice-{tag}", "members": [member]}, expect=201)
    admin.post("projects", {"name": f"aproj-{tag}"}, expect=201)
    admin.call("PUT", f"projects/aproj-{tag}/admins/{project_admin}", expect=200)
    admin.post("slices", {"name": f"aps-{tag}", "project": f"aproj-{tag}"}, expect=201)
    return [
        Attacker("member of another slice", member, hub.client(hub.user_token(member))),
        Attacker("admin of another project", project_admin, hub.client(hub.user_token(project_admin))),
        Attacker("user in no slice", loner, hub.client(hub.user_token(loner))),
        Attacker("no token", None, hub.client(None)),
    ]


@pytest.fixture(scope="module", params=DATABASES)
def world(request, tmp_path_factory, postgres) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp(f"sweep-{request.param}")
    hub = start_hub(str(data_dir), new_db_url(request.param, data_dir, postgres), free_port())
    try:
        admin = hub.admin()
        victim = make_victim(hub, admin)
        document = requests.get(hub.api + "openapi.json", timeout=30).json()
        operations = [
            (method.upper(), path, operation)
            for path, item in document["paths"].items()
            for method, operation in item.items()
            if method != "parameters"
        ]
        yield World(hub, victim, ghost_of(victim), make_attackers(hub, admin), operations)
    finally:
        stop_hub(hub)


class VictimState:
    """What the victim has: its rows, its events, its hub groups, and who the egs-hub admins are."""

    def __init__(self, hub: Hub, victim: Names):
        self.hub, self.victim = hub, victim
        self.engine = create_engine(hub.db_url)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {hub.admin_token}"

    def read(self) -> dict:
        v = self.victim
        queries = {
            "project": ("SELECT * FROM projects WHERE name = :project", {}),
            "slice": ("SELECT * FROM slices WHERE name = :slice", {}),
            "gprs": (
                "SELECT id, name, slice, requested_by, gpus, priority, duration_s, status, window_start, window_end "
                "FROM gprs WHERE slice = :slice ORDER BY id",
                {},
            ),
            "template": ("SELECT * FROM gpr_templates WHERE name = :template", {}),
            "endpoints": ("SELECT id, slice, name, wanted, spec FROM endpoints WHERE slice = :slice", {}),
            "requests": ("SELECT id, status, decided_by FROM workspace_requests WHERE id = :request", {}),
            "events": ("SELECT id, kind, actor FROM events WHERE slice = :slice OR gpr_id IN :ids ORDER BY id", {}),
            "maintenance": ("SELECT * FROM maintenance_windows WHERE node = :node", {}),
            "node": ("SELECT name, schedulable, quarantined_at FROM nodes WHERE name = :node", {}),
            "prices": ("SELECT * FROM prices ORDER BY cluster, shape", {}),
        }
        values = {"project": v.project, "slice": v.slice, "template": v.template, "request": v.request}
        values |= {"node": v.node, "ids": sorted(v.ids())}
        state = {}
        with self.engine.connect() as connection:
            for key, (query, _) in queries.items():
                statement = text(query)
                if ":ids" in query:
                    statement = statement.bindparams(bindparam("ids", expanding=True))
                used = {name: value for name, value in values.items() if f":{name}" in query}
                state[key] = connection.execute(statement, used).all()
        groups = self.session.get(f"{self.hub.url}/hub/api/groups", timeout=60).json()
        watched = {v.slice, f"{v.project}-admins", "egs-admins"}
        state["hub groups"] = sorted((g["name"], sorted(g["users"])) for g in groups if g["name"] in watched)
        return state

    def close(self) -> None:
        self.session.close()
        self.engine.dispose()


def aimed(method: str, path: str, operation: dict, t: Names, me: str) -> tuple[str, dict | None]:
    """The request of an operation aimed at ``t``: its path (with the query that names a slice) and body."""
    filled = PATHS[path](t, me) if path in PATHS else path.lstrip("/")
    if path in SLICE_QUERIES:
        filled += f"?slice={t.slice}"
    key = f"{method} {path}"
    body = BODIES[key](t, me) if key in BODIES else None
    if "requestBody" in operation and operation["requestBody"].get("required") and body is None:
        raise AssertionError(f"{key} takes a body: give it one in BODIES")
    return filled, body


def as_ghost(text_: str, victim: Names, ghost: Names) -> str:
    """``text_`` with the victim's names put in the ghost's place."""
    for mine, theirs in zip(victim.texts(), ghost.texts(), strict=True):
        text_ = text_.replace(mine, theirs)
    for field, said in (("gpr", "GPR"), ("queued", "GPR"), ("pending", "GPR"), ("request", "request")):
        number, ghostly = getattr(victim, field), getattr(ghost, field)
        text_ = re.sub(rf"\b({said}(?: with id)? ){number}\b", rf"\g<1>{ghostly}", text_)
    return text_.replace(victim.gpu, ghost.gpu)


def leaked(answer: object, victim: Names, asked: str) -> list[str]:
    """The victim's names and GPR ids in ``answer`` that the request (``asked``) did not name."""
    found = [name for name in victim.texts() if name in json.dumps(answer) and name not in asked]

    def walk(value, key=None):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, "gpr" if k == "id" and "bound_gpus" in value else k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif key in ID_KEYS and isinstance(value, int) and value in victim.ids() and str(value) not in asked:
            found.append(f"GPR {value} (as {key!r})")

    walk(answer)
    return found


def test_no_stranger_reaches_anything_of_another_workspace(world: World):
    state = VictimState(world.hub, world.victim)
    before = state.read()
    problems: list[str] = []
    tried = 0
    try:
        for method, path, operation in world.operations:
            for attacker in world.attackers:
                me = attacker.name or "nobody"
                key = f"{method} {path} as {attacker.kind}"
                aimed_path, body = aimed(method, path, operation, world.victim, me)
                ghost_path, ghost_body = aimed(method, path, operation, world.ghost, me)
                tried += 1
                try:
                    status, answer = attacker.client.answer(method, aimed_path, body)
                    ghost_status, ghost_answer = attacker.client.answer(method, ghost_path, ghost_body)
                except AssertionError as e:  # an answer the document does not list: one problem, the sweep goes on
                    problems.append(f"{key}: {e}")
                    continue
                after = state.read()
                changed = [name for name in before if before[name] != after[name]]
                if changed:
                    problems.append(f"{key}: changed the victim's {', '.join(changed)}")
                    before = after
                asked = aimed_path + json.dumps(body)
                if leaks := leaked(answer, world.victim, asked):
                    problems.append(f"{key}: the answer shows {leaks}: {json.dumps(answer)[:300]}")
                if f"{method} {path}" in OPEN_TO_ALL:
                    continue
                if status != ghost_status:
                    problems.append(f"{key}: {status} for the victim, {ghost_status} for a ghost: {answer}")
                elif (
                    status >= 400 and as_ghost(answer["message"], world.victim, world.ghost) != ghost_answer["message"]
                ):
                    problems.append(f"{key}: said {answer['message']!r}, of a ghost {ghost_answer['message']!r}")
    finally:
        state.close()
    assert tried == len(world.operations) * len(world.attackers)
    assert not problems, f"{len(problems)} of {tried} requests:\n" + "\n".join(problems)
