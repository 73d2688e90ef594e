"""Inference endpoints (service/endpoints.py): ``/endpoints`` (GET the caller's slices' endpoints, POST
one: 202, its replicas start in the background), ``/endpoints/{slice}/{name}`` (GET, PATCH, DELETE) and
``/endpoints/{slice}/{name}/scale`` (POST), for the members of the slice."""

from __future__ import annotations

from ...core.requests import EndpointCreate, EndpointScale, EndpointUpdate, check_slice_name, parse_body
from ...core.resources import Endpoint, Endpoints
from ...store import endpoints as store
from ..idempotency import ENDPOINTS, Claim
from ..operations import Named, body_at
from ..parameters import EndpointsQuery, read
from .base import APIHandler, operation


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
    @operation(
        "GET /endpoints",
        "Inference endpoints of the caller's slices (admins: all)",
        ok="endpoints",
        answer=Endpoints,
        errors=(401, 403, 404),
        query=EndpointsQuery,
        names=(Named("/endpoints/{slice}/{name}", body_at("/endpoints/0", slice="slice", name="name")),),
    )
    def get(self) -> None:
        """The endpoints of the caller's slices (``slice``: of that one); admins: all of them."""
        query = read(EndpointsQuery, self)
        with self.egs.sessions() as session:
            rows = store.rows(session, self.listed_slices(session, query.slice))
            gprs = store.replica_gprs(session, [row.id for row in rows])
        now = self.now()
        self.write_json(Endpoints(endpoints=tuple(self.egs.endpoints.view(r, gprs.get(r.id, []), now) for r in rows)))

    @operation(
        "POST /endpoints",
        "Serve a model from a slice's GPUs at <prefix>endpoints/{slice}/{name}/ (members): each replica is a GPR; "
        "its replicas start in the background",
        ok="made",
        idempotent=ENDPOINTS,
        answer=Endpoint,
        status=202,
        errors=(401, 403, 404, 409, 422, 503),
        body=EndpointCreate,
        names=(Named("/endpoints/{slice}/{name}", body_at("", slice="slice", name="name")),),
    )
    async def post(self, key: Claim) -> None:
        asked = parse_body(EndpointCreate, self.json_body())
        self.require_slice_member(asked.slice)
        await self.egs.endpoints.create(asked, self.user_name, self.now(), also=key.record)
        self.answer(asked.slice, asked.name, 202)


class EndpointHandler(EndpointBase):
    @operation(
        "GET /endpoints/{slice}/{name}",
        "One endpoint: status, url, replicas and their GPRs, requests/s, latency, errors",
        ok="the endpoint",
        answer=Endpoint,
        errors=(401, 403, 404),
    )
    def get(self, slice_name: str, name: str) -> None:
        self.require_slice_member(slice_name)
        self.answer(slice_name, check_slice_name(name, "name"))

    @operation(
        "PATCH /endpoints/{slice}/{name}",
        "Change an endpoint (members); a new command or model restarts its servers",
        ok="changed",
        answer=Endpoint,
        errors=(401, 403, 404, 422, 503),
        body=EndpointUpdate,
    )
    async def patch(self, slice_name: str, name: str) -> None:
        changes = parse_body(EndpointUpdate, self.json_body())
        self.require_slice_member(slice_name)
        await self.egs.endpoints.update(slice_name, check_slice_name(name, "name"), changes, self.user_name, self.now())
        self.answer(slice_name, name)

    @operation(
        "DELETE /endpoints/{slice}/{name}",
        "Delete an endpoint (members): its replicas' GPRs are given back",
        ok="deleted",
        status=204,
        errors=(401, 403, 404),
    )
    def delete(self, slice_name: str, name: str) -> None:
        self.require_slice_member(slice_name)
        self.egs.endpoints.delete(slice_name, check_slice_name(name, "name"), self.user_name, self.now())
        self.set_status(204)
        self.finish()


class EndpointScaleHandler(EndpointBase):
    @operation(
        "POST /endpoints/{slice}/{name}/scale",
        "Scale an endpoint to this many replicas now (members), kept for its idle_timeout at least, then "
        "following the load",
        ok="scaling",
        answer=Endpoint,
        status=202,
        errors=(401, 403, 404, 422),
        body=EndpointScale,
    )
    def post(self, slice_name: str, name: str) -> None:
        asked = parse_body(EndpointScale, self.json_body())
        self.require_slice_member(slice_name)
        self.egs.endpoints.scale(slice_name, check_slice_name(name, "name"), asked.replicas, self.user_name, self.now())
        self.answer(slice_name, name, 202)
