"""Servers started inside a slice: the spawner registers each one and learns its GPUs.

``PUT servers/{user}`` (the default server) or ``servers/{user}/{server}``
with ``{"slice": NAME}`` answers the GPU UUIDs the slice may use now and
records that this server holds them, so that when those GPUs are taken back
the server is restarted without them. ``DELETE`` forgets a stopped server.

``POST server-restarts/{user}[/{server}]`` restarts a running server through
the hub, for its owner or an admin (the JupyterLab extension asks for its own
server, so that it comes back with the GPUs just bound). It lives outside
``servers/`` so that no user or server name can make it collide with the
routes above. It answers 202 at once and restarts in the background: the
caller is often the very server that goes down.

User and server names in the path are percent-encoded once (spawners/slice.py,
the client) and decoded once, by tornado: "a%2500" names the server "a%00".
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from sqlalchemy import select
from tornado import web

from ...core import model as core
from ...core.errors import InvalidRequest
from ...core.requests import ServerStart, parse_body
from ...core.resources import AutoGPR, ServerRegistration, ServerRestart, Servers
from ...core.resources import Server as ServerResource
from ...core.user_names import normalize_user_name
from ...store import queries
from ...store.db import transaction
from ...store.models import Server
from ..auto_gpr import Outcome
from ..hub import HubAPIError
from ..operations import Named, body_at, request_path
from ..parameters import ServersQuery, read
from .base import APIHandler, operation

log = logging.getLogger(__name__)

# What the default server's operations and the named server's share: each is declared for both paths.
_REGISTER = {"ok": "GPUs", "answer": ServerRegistration, "errors": (401, 403, 404), "body": ServerStart}
_FORGET = {"ok": "forgotten", "status": 204, "errors": (401, 403)}
_RESTART = {"ok": "restart started", "answer": ServerRestart, "status": 202, "errors": (401, 403, 404, 409)}
_WHAT = "answers the GPUs it may use, and with GPUs asked and none held the GPR it waits for (the slice's auto_gpr)"

# Restarts under way; held here so that the loop does not drop them (it keeps only weak references).
_restarts: set[asyncio.Task] = set()


class ServerHandler(APIHandler):
    def check_caller(self, user: str) -> None:
        if not (self.is_admin or self.user_name == user):
            raise web.HTTPError(403, f"only {user}, the hub or an admin can register {user}'s servers")

    @operation(
        "PUT /servers/{user}",
        f"Register a starting default server; {_WHAT} (spawner)",
        names=(Named("/servers/{user}", request_path("user")),),
        **_REGISTER,
    )
    @operation(
        "PUT /servers/{user}/{server}",
        f"Register a starting named server; {_WHAT} (spawner)",
        names=(Named("/servers/{user}/{server}", request_path("user", "server")),),
        **_REGISTER,
    )
    async def put(self, user: str, server: str = "") -> None:
        user = normalize_user_name(user, "user")
        self.check_caller(user)
        body = parse_body(ServerStart, self.json_body())
        slice_name, cluster = body.slice, self.start_cluster(body.cluster)
        with self.egs.sessions() as session:
            slice_row = queries.get_slice(session, slice_name)
            if slice_row is None:
                raise self.not_found(f"slice named {slice_name!r}")
            group = slice_row.group_name
        if user not in await self.egs.hub.group_members(group):
            if not self.is_admin:  # the user themselves: a slice they are not in is one they may not see
                raise self.not_found(f"slice named {slice_name!r}")
            raise web.HTTPError(403, f"{user} is not a member of slice {slice_name!r}")
        with transaction(self.egs.sessions) as session:
            usable = queries.slice_usable_gpus(session, slice_name)
            gpus = [uuid for uuid, _ in usable]
            visible = queries.devices(session, gpus)  # a share of a GPU is seen as the GPU
            queries.record_server(session, user, server, slice_name, gpus, self.now())
            reason = f"{len(gpus)} GPU(s) visible"
            started = server_event(
                "server-started", self.user_name, reason, self.now(), slice_name, user, server, gpus=gpus
            )
            queries.add_event(session, started)
        outcome = None
        if body.gpus:
            who = f"{user}'s server {server!r}" if server else f"{user}'s server"
            outcome = await self.egs.auto_gprs.for_start(slice_name, body.gpus, cluster, user, f"auto: {who}")
        self.write_json(
            ServerRegistration(
                user=user,
                server=server,
                slice=slice_name,
                gpus=visible,
                gprs=sorted({gpr_id for _, gpr_id in usable}),
                auto_gpr=None if outcome is None or outcome.gpr is None else auto_gpr_resource(outcome),
                auto_gpr_problem=None if outcome is None else outcome.problem,
            )
        )

    def start_cluster(self, cluster: str | None) -> str | None:
        """The cluster a server starts on: the one named (registered), else this host's (None without one)."""
        if cluster is None:
            return next((name for name, s in self.egs.registry.states.items() if s.origin == "local"), None)
        if cluster not in self.egs.registry.states:
            known = ", ".join(sorted(self.egs.registry.states))
            raise InvalidRequest("cluster", f"no cluster named {cluster!r}; the registered ones are {known}")
        return cluster

    @operation("DELETE /servers/{user}", "Forget a stopped default server (spawner)", **_FORGET)
    @operation("DELETE /servers/{user}/{server}", "Forget a stopped named server (spawner)", **_FORGET)
    def delete(self, user: str, server: str = "") -> None:
        user = normalize_user_name(user, "user")
        self.check_caller(user)
        with transaction(self.egs.sessions) as session:
            queries.forget_server(session, user, server)
        self.set_status(204)
        self.finish()


def auto_gpr_resource(outcome: Outcome) -> AutoGPR:
    gpr, estimate = outcome.gpr, outcome.estimate
    queued = gpr.status is core.Status.QUEUED and estimate is not None
    return AutoGPR(
        id=gpr.id,
        status=gpr.status.value,
        filed=outcome.filed,
        template=gpr.spec.template,
        position=estimate.position if queued else None,
        estimated_start=estimate.start if queued else None,
    )


class ServersHandler(APIHandler):
    @operation(
        "GET /servers",
        "Servers started in the caller's slices",
        ok="servers",
        answer=Servers,
        errors=(401, 404),
        query=ServersQuery,
        names=(
            Named("/servers/{user}", body_at("/servers/0", user="user")),
            Named("/servers/{user}/{server}", body_at("/servers/0", user="user", server="server")),
            Named("/server-restarts/{user}", body_at("/servers/0", user="user", server="server")),
        ),
    )
    def get(self) -> None:
        slice_name = read(ServersQuery, self).slice
        with self.egs.sessions() as session:
            member_of = {r.name for r in queries.all_slices(session) if self.is_member(r)}
            if slice_name is not None and slice_name not in member_of:
                raise self.not_found(f"slice named {slice_name!r} among yours")
            rows = session.scalars(select(Server).order_by(Server.id))
            servers = [
                ServerResource(user=s.user, server=s.server_name, slice=s.slice, gpus=s.gpus, started_at=s.started_at)
                for s in rows
                if s.slice in member_of and (slice_name is None or s.slice == slice_name)
            ]
        self.write_json(Servers(servers=servers))


class ServerRestartHandler(APIHandler):
    @operation(
        "POST /server-restarts/{user}",
        "Restart a running default server, e.g. to see newly bound GPUs (its owner or an admin)",
        **_RESTART,
    )
    @operation(
        "POST /server-restarts/{user}/{server}",
        "Restart a running named server, e.g. to see newly bound GPUs (its owner or an admin)",
        **_RESTART,
    )
    async def post(self, user: str, server: str = "") -> None:
        user = normalize_user_name(user, "user")
        if not (self.is_admin or self.user_name == user):
            raise web.HTTPError(403, f"only {user} or an admin can restart {user}'s servers")
        model = await self.egs.hub.server(user, server)
        if model is None:
            raise self.not_found(f"running server {server!r} of {user}")
        if model.get("pending"):
            raise web.HTTPError(
                409, f"{user}'s server {server!r} is busy ({model['pending']}); try again when it is ready"
            )
        with transaction(self.egs.sessions) as session:
            slice_name = session.scalar(select(Server.slice).where(Server.user == user, Server.server_name == server))
            reason, now = f"{self.user_name} asked to restart it", self.now()
            queries.add_event(
                session, server_event("server-restart-requested", self.user_name, reason, now, slice_name, user, server)
            )
        task = asyncio.ensure_future(restart_and_record(self.egs, user, server, self.user_name, slice_name))
        _restarts.add(task)
        task.add_done_callback(_restarts.discard)
        self.write_json(ServerRestart(user=user, server=server, restarting=True), status=202)


async def restart_and_record(egs, user: str, server: str, actor: str, slice_name: str | None) -> None:
    """Restart through the hub and record how it went (an event either way)."""
    try:
        running = await egs.hub.restart_server(user, server)
    except HubAPIError as e:
        log.warning("restarting %s's server %r failed: %s", user, server, e)
        kind, reason = "restart-failed", f"could not restart it: {e}"
    else:
        kind = "server-restarted" if running else "restart-failed"
        reason = f"restarted at {actor}'s request" if running else "it stopped before it could be restarted"
    with transaction(egs.sessions) as session:
        queries.add_event(session, server_event(kind, actor, reason, egs.clock(), slice_name, user, server))


def server_event(
    kind: str, actor: str, reason: str, now: datetime, slice_name: str | None, user: str, server: str, **data
) -> core.Event:
    """An audit event about ``user``'s server ``server`` ("" the default one)."""
    return core.Event(
        kind=kind, actor=actor, reason=reason, time=now, slice=slice_name, data={"user": user, "server": server, **data}
    )
