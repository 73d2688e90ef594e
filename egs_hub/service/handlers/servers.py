"""Servers started inside a slice: the spawner registers each one and learns its GPUs.

``PUT servers/{user}`` (the default server) or ``servers/{user}/{server}``
with ``{"slice": NAME}`` answers the GPU UUIDs the slice may use now and
records that this server holds them, so that when those GPUs are taken back
the server is restarted without them. ``DELETE`` forgets a stopped server.
"""

from __future__ import annotations

from urllib.parse import unquote

from sqlalchemy import select
from tornado import web

from ...core import model as core
from ...core.requests import ServerStart, parse_body, parse_user_name
from ...core.units import format_time
from ...store import queries
from ...store.db import transaction
from ...store.models import Server
from .base import APIHandler, authenticated


class ServerHandler(APIHandler):
    def check_caller(self, user: str) -> None:
        if not (self.is_admin or self.user_name == user):
            raise web.HTTPError(403, f"only {user}, the hub or an admin can register {user}'s servers")

    @authenticated
    async def put(self, user: str, server: str = "") -> None:
        user, server = parse_user_name(unquote(user), "user"), unquote(server or "")
        self.check_caller(user)
        slice_name = parse_body(ServerStart, self.json_body()).slice
        with self.egs.sessions() as session:
            slice_row = queries.get_slice(session, slice_name)
            if slice_row is None:
                raise self.not_found(f"slice named {slice_name!r}")
            group = slice_row.group_name
        if user not in await self.egs.hub.group_members(group):
            raise web.HTTPError(403, f"{user} is not a member of slice {slice_name!r}")
        with transaction(self.egs.sessions) as session:
            usable = queries.slice_usable_gpus(session, slice_name)
            gpus = [uuid for uuid, _ in usable]
            queries.record_server(session, user, server, slice_name, gpus, self.now())
            queries.add_event(
                session,
                core.Event(
                    kind="server-started",
                    actor=self.user_name,
                    reason=f"{len(gpus)} GPU(s) visible",
                    time=self.now(),
                    slice=slice_name,
                    data={"user": user, "server": server, "gpus": gpus},
                ),
            )
        self.write_json(
            {
                "user": user,
                "server": server,
                "slice": slice_name,
                "gpus": gpus,
                "gprs": sorted({gpr_id for _, gpr_id in usable}),
            }
        )

    @authenticated
    def delete(self, user: str, server: str = "") -> None:
        user, server = parse_user_name(unquote(user), "user"), unquote(server or "")
        self.check_caller(user)
        with transaction(self.egs.sessions) as session:
            queries.forget_server(session, user, server)
        self.set_status(204)
        self.finish()


class ServersHandler(APIHandler):
    @authenticated
    def get(self) -> None:
        slice_name = self.get_argument("slice", None)
        with self.egs.sessions() as session:
            member_of = {r.name for r in queries.all_slices(session) if self.is_member(r)}
            if slice_name is not None and slice_name not in member_of:
                raise self.not_found(f"slice named {slice_name!r} among yours")
            rows = session.scalars(select(Server).order_by(Server.id))
            servers = [
                {
                    "user": s.user,
                    "server": s.server_name,
                    "slice": s.slice,
                    "gpus": s.gpus,
                    "started_at": format_time(s.started_at),
                }
                for s in rows
                if s.slice in member_of and (slice_name is None or s.slice == slice_name)
            ]
        self.write_json({"servers": servers})
