"""Inference endpoints (service/endpoints.py): ``/endpoints`` (GET the caller's slices' endpoints, POST
one: 202, its replicas start in the background), ``/endpoints/{slice}/{name}`` (GET, PATCH, DELETE) and
``/endpoints/{slice}/{name}/scale`` (POST), for the members of the slice."""

from __future__ import annotations

from ...core.requests import EndpointCreate, EndpointScale, EndpointUpdate, check_slice_name, parse_body
from ...core.resources import Endpoints
from ...store import endpoints as store
from ..idempotency import ENDPOINTS, Claim, idempotent
from ..parameters import EndpointsQuery, read
from .base import APIHandler, authenticated


class EndpointBase(APIHandler):
    def require_slice_member(self, slice_name: str) -> None:
        """404 when there is no such slice, and the same when the caller may not see it."""
        with self.egs.sessions() as session:
            self.member_slice(session, check_slice_name(slice_name))

    def answer(self, slice_name: str, name: str, status: int = 200) -> None:
        with self.egs.sessions() as session:
            row = store.get(session, slice_name, name)
            if row is None:
                raise self.not_found(f"endpoint named {name!r} in slice {slice_name!r}")
            gprs = store.replica_gprs(session, [row.id]).get(row.id, [])
        self.write_json(self.egs.endpoints.view(row, gprs, self.now()), status)


class EndpointsHandler(EndpointBase):
    @authenticated
    def get(self) -> None:
        """The endpoints of the caller's slices (``slice``: of that one); admins: all of them."""
        query = read(EndpointsQuery, self)
        with self.egs.sessions() as session:
            rows = store.rows(session, self.listed_slices(session, query.slice))
            gprs = store.replica_gprs(session, [row.id for row in rows])
        now = self.now()
        self.write_json(Endpoints(endpoints=tuple(self.egs.endpoints.view(r, gprs.get(r.id, []), now) for r in rows)))

    @authenticated
    @idempotent(ENDPOINTS)
    async def post(self, key: Claim) -> None:
        asked = parse_body(EndpointCreate, self.json_body())
        self.require_slice_member(asked.slice)
        await self.egs.endpoints.create(asked, self.user_name, self.now(), also=key.record)
        self.answer(asked.slice, asked.name, 202)


class EndpointHandler(EndpointBase):
    @authenticated
    def get(self, slice_name: str, name: str) -> None:
        self.require_slice_member(slice_name)
        self.answer(slice_name, check_slice_name(name, "name"))

    @authenticated
    async def patch(self, slice_name: str, name: str) -> None:
        changes = parse_body(EndpointUpdate, self.json_body())
        self.require_slice_member(slice_name)
        await self.egs.endpoints.update(slice_name, check_slice_name(name, "name"), changes, self.user_name, self.now())
        self.answer(slice_name, name)

    @authenticated
    def delete(self, slice_name: str, name: str) -> None:
        self.require_slice_member(slice_name)
        self.egs.endpoints.delete(slice_name, check_slice_name(name, "name"), self.user_name, self.now())
        self.set_status(204)
        self.finish()


class EndpointScaleHandler(EndpointBase):
    @authenticated
    def post(self, slice_name: str, name: str) -> None:
        asked = parse_body(EndpointScale, self.json_body())
        self.require_slice_member(slice_name)
        self.egs.endpoints.scale(slice_name, check_slice_name(name, "name"), asked.replicas, self.user_name, self.now())
        self.answer(slice_name, name, 202)
