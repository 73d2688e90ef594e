"""What-if capacity plans (admins): ``/capacity-plans`` (GET the last ten; POST one: 202, it runs in
the background) and ``/capacity-plans/{id}`` (GET: its progress, then its result). service/capacity.py
runs them."""

from __future__ import annotations

from ...core.requests import CapacityPlanCreate, parse_body
from ...core.resources import CapacityPlan, CapacityPlans
from ..operations import ADMIN, Named, body_at
from .base import APIHandler, operation


class CapacityPlansHandler(APIHandler):
    @operation(
        "GET /capacity-plans",
        "The last ten what-if capacity plans, running or done (admin)",
        ok="plans",
        answer=CapacityPlans,
        errors=(401, 403),
        auth=ADMIN,
        names=(Named("/capacity-plans/{id}", body_at("/plans/0", id="id")),),
    )
    def get(self) -> None:
        runs = sorted(self.egs.capacity.runs.values(), key=lambda r: -r.id)
        self.write_json(CapacityPlans(plans=tuple(r.view() for r in runs)))

    @operation(
        "POST /capacity-plans",
        "Replay the GPRs recorded over a period through the planner on the nodes as they are and with nodes added "
        "or removed, in the background; one runs at a time (admin)",
        ok="started",
        answer=CapacityPlan,
        status=202,
        errors=(401, 403, 409, 422),
        body=CapacityPlanCreate,
        auth=ADMIN,
        names=(Named("/capacity-plans/{id}", body_at("", id="id")),),
    )
    def post(self) -> None:
        asked = parse_body(CapacityPlanCreate, self.json_body())
        with self.egs.sessions() as session:
            run = self.egs.capacity.start(session, asked, self.user_name)
        self.write_json(run.view(), 202)


class CapacityPlanHandler(APIHandler):
    @operation(
        "GET /capacity-plans/{id}",
        "A what-if capacity plan: its progress, then the waits and GPUs bound, recorded and replayed (admin)",
        ok="the plan",
        answer=CapacityPlan,
        errors=(401, 403, 404),
        auth=ADMIN,
    )
    def get(self, plan_id: str) -> None:
        run = self.egs.capacity.runs.get(self.int_argument("id", plan_id))
        if run is None:
            raise self.not_found(f"capacity plan {plan_id} (the service keeps the last ten)")
        self.write_json(run.view())
