"""A test double of the EGS REST API v1 endpoints the slice spawners call, served by a real
tornado server on loopback, so the spawners' own HTTP client, URLs, headers and error
handling are what is tested."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

TOKEN = "egs-service-token"
API = "/services/egs/api/v1/"


@dataclass
class Slice:
    name: str
    members: set[str]
    namespaces: dict[str, list[str]] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)
    gprs: list[int] = field(default_factory=list)
    queued: list[dict] = field(default_factory=list)  # GPRs as GET gprs writes them
    display_name: str | None = None
    group_name: str | None = None  # its hub group; default group-<name>
    policy: dict = field(default_factory=dict)  # what GET slices/{name} shows of its policy
    auto_gpr: dict | None = None  # what PUT servers answers as auto_gpr while the slice has no gpus
    polls: list[dict] = field(default_factory=list)  # GET gprs/{id} answers in turn (the last repeats)
    gpus_once_provisioned: list[str] = field(default_factory=list)  # gpus after a poll answered provisioned

    @property
    def group(self) -> str:
        return self.group_name or f"group-{self.name}"

    def view(self) -> dict:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "group": self.group,
            "namespaces": self.namespaces,
            "gpus": self.gpus,
            "policy": self.policy,
        }


@dataclass
class FakeEGS:
    """HTTP test double of the EGS service: ``GET slices``, ``GET slices/{name}``, ``PUT``/``DELETE
    servers/{user}[/{server}]``, ``GET gprs?slice=&status=queued``, ``GET gprs/{id}`` (of a slice's auto_gpr).

    It answers like the real handlers (``{"status", "message"}`` errors; 403 for a non-member,
    404 for an unknown slice) from ``slices``, checks the spawner's token, and records every
    request as (method, raw path with query, body). ``fail_with`` = (status, body) answers every
    request so.
    """

    slices: list[Slice] = field(default_factory=list)
    requests: list[tuple[str, str, dict | None]] = field(default_factory=list)
    fail_with: tuple[int, str] | None = None
    url: str = ""

    def find(self, name: str) -> Slice | None:
        return next((s for s in self.slices if s.name == name), None)


class _Handler(web.RequestHandler):
    def initialize(self, egs: FakeEGS) -> None:
        self.egs = egs

    def prepare(self) -> None:
        body = json.loads(self.request.body) if self.request.body else None
        self.egs.requests.append((self.request.method, self.request.uri.removeprefix(API), body))
        if self.egs.fail_with is not None:
            status, text = self.egs.fail_with
            self.set_status(status)
            self.finish(text)
        elif self.request.headers.get("Authorization") != f"token {TOKEN}":
            self.fail(403, "a hub token is needed")

    def fail(self, status: int, message: str) -> None:
        self.set_status(status)
        self.finish({"status": status, "message": message})


class _SlicesHandler(_Handler):
    def get(self) -> None:
        self.finish({"slices": [s.view() for s in self.egs.slices]})


class _SliceHandler(_Handler):
    def get(self, name: str) -> None:
        found = self.egs.find(name)
        if found is None:
            return self.fail(404, f"No slice named {name!r}")
        self.finish(found.view())


class _ServerHandler(_Handler):
    def put(self, user: str, server: str = "") -> None:
        wanted = json.loads(self.request.body)["slice"]
        found = self.egs.find(wanted)
        if found is None:
            return self.fail(404, f"No slice named {wanted!r}")
        if user not in found.members:
            return self.fail(403, f"{user} is not a member of slice {wanted!r}")
        auto = found.auto_gpr if json.loads(self.request.body).get("gpus") and not found.gpus else None
        self.finish(
            {"user": user, "server": server, "slice": wanted, "gpus": found.gpus, "gprs": found.gprs, "auto_gpr": auto}
        )

    def delete(self, user: str, server: str = "") -> None:
        self.set_status(204)
        self.finish()


class _GPRsHandler(_Handler):
    def get(self) -> None:
        found = self.egs.find(self.get_argument("slice"))
        if found is None or self.get_argument("status") != "queued":
            return self.fail(400, "the double answers only ?slice=<known slice>&status=queued")
        self.finish({"gprs": found.queued})


class _GPRHandler(_Handler):
    def get(self, gpr_id: str) -> None:
        found = next((s for s in self.egs.slices if s.auto_gpr and str(s.auto_gpr["id"]) == gpr_id), None)
        if found is None or not found.polls:
            return self.fail(404, f"No GPR with id {gpr_id}")
        answer = found.polls.pop(0) if len(found.polls) > 1 else found.polls[0]
        if answer["status"] == "provisioned":
            found.gpus = found.gpus_once_provisioned
        self.finish(answer)


@asynccontextmanager
async def serve_fake_egs() -> AsyncIterator[FakeEGS]:
    """The double served on a random loopback port (``FakeEGS.url`` is its API v1 URL)."""
    fake = FakeEGS()
    app = web.Application(
        [
            (API + "slices", _SlicesHandler, {"egs": fake}),
            (API + "slices/([^/]+)", _SliceHandler, {"egs": fake}),
            (API + "servers/([^/]+)", _ServerHandler, {"egs": fake}),
            (API + "servers/([^/]+)/([^/]+)", _ServerHandler, {"egs": fake}),
            (API + "gprs", _GPRsHandler, {"egs": fake}),
            (API + "gprs/([0-9]+)", _GPRHandler, {"egs": fake}),
        ]
    )
    sockets = bind_sockets(0, "127.0.0.1")
    server = HTTPServer(app)
    server.add_sockets(sockets)
    fake.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}{API}"
    yield fake
    server.stop()
    await server.close_all_connections()
