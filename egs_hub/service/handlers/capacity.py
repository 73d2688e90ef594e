"""What-if capacity plans (admins): ``/capacity-plans`` (GET the last ten; POST one: 202, it runs in
the background) and ``/capacity-plans/{id}`` (GET: its progress, then its result). service/capacity.py
runs them."""

from __future__ import annotations

from ...core.requests import CapacityPlanCreate, parse_body
from ...core.resources import CapacityPlans
from ...roles import ADMIN_SCOPE
from .base import APIHandler, needs_scope


class CapacityPlansHandler(APIHandler):
    @needs_scope(ADMIN_SCOPE)
    def get(self) -> None:
        runs = sorted(self.egs.capacity.runs.values(), key=lambda r: -r.id)
        self.write_json(CapacityPlans(plans=tuple(r.view() for r in runs)))

    @needs_scope(ADMIN_SCOPE)
    def post(self) -> None:
        asked = parse_body(CapacityPlanCreate, self.json_body())
        with self.egs.sessions() as session:
            run = self.egs.capacity.start(session, asked, self.user_name)
        self.write_json(run.view(), 202)


class CapacityPlanHandler(APIHandler):
    @needs_scope(ADMIN_SCOPE)
    def get(self, plan_id: str) -> None:
        run = self.egs.capacity.runs.get(self.int_argument("id", plan_id))
        if run is None:
            raise self.not_found(f"capacity plan {plan_id} (the service keeps the last ten)")
        self.write_json(run.view())
