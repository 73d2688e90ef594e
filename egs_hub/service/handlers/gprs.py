"""GPRs: submit, read, edit, cancel, release early, approve and deny; wait-time
estimates. Each change is a command (commands.py), which a GPR resource applied
with kubectl goes through too (gpr_sync.py), so both are checked alike. Estimates
come from the same planner as admission, with the same promises (planning.py);
the queue and evictions are in queue.py.
"""

from __future__ import annotations

import logging

from ...core import model as core
from ...core import planner
from ...core.requests import GPRCreate, GPRUpdate, Reason, WaitTimeQuery, parse_body
from ...core.resources import GPR, GPRChecks, GPRPage, WaitTimes
from ...core.snapshot import Estimate, Plan
from ...store import queries
from ...store.models import GPRRow
from .. import cursors
from ..commands import no_slice, slice_of, template_for
from ..idempotency import GPRS, Claim
from ..operations import Named, body_at
from ..parameters import GPRsQuery, read
from ..serialize import check_run_resource, gpr_resource, option_resource
from .base import APIHandler, operation

log = logging.getLogger(__name__)


class GPRBase(APIHandler):
    def load_gpr(self, session, gpr_id: str, *, lock: bool = False) -> GPRRow:
        row = queries.get_gpr_row(session, self.int_argument("id", gpr_id), lock=lock)
        if row is None:
            raise self.not_found(f"GPR with id {gpr_id}")
        return row

    def visible_gpr(self, session, gpr_id: str) -> GPRRow:
        """The GPR's row; 404 when there is none or the caller may not see its slice (the GPRs of a slice
        since deleted are the admins')."""
        row = self.load_gpr(session, gpr_id)
        slice_row = queries.get_slice(session, row.slice)
        if slice_row is not None:
            self.require_member(slice_row, f"GPR with id {gpr_id}")
        elif not self.is_admin:
            raise self.not_found(f"GPR with id {gpr_id}")
        return row

    def spec_of(self, body: GPRCreate | WaitTimeQuery) -> core.GPRSpec:
        """The spec a body asks for, with the fields it leaves out from the template it names (once
        the caller is known to be a member of its slice)."""
        if body.template is None:
            return body.to_spec()
        with self.egs.sessions() as session:
            slice_row = slice_of(session, body.slice)
            if not self.may_act_in(slice_row.name, slice_row.group_name):
                raise no_slice(body.slice)
            return body.to_spec(template_for(session, body.template, body.slice))

    async def plan(self) -> Plan:
        """The plan reads answer from (planning.Planning.current): never made on the event loop."""
        return (await self.egs.planning.current(self.egs.sessions, self.now())).plan

    def view(self, gpr: core.GPR, plan: Plan) -> GPR:
        return gpr_resource(gpr, estimate_of(gpr, plan), self.now())

    async def answer(self, gpr: core.GPR, status: int = 200) -> None:
        """The GPR a command returned (and committed), with its estimate when it is queued, from a plan
        made after the change (planning.Planning.fresh). The change is made: a plan that fails now is
        logged, and the GPR answered without its estimate (GET shows it once a plan has it), never
        with a 5xx that would tell the caller nothing changed."""
        estimate = None
        if gpr.status is core.Status.QUEUED:
            try:
                estimate = estimate_of(gpr, (await self.egs.planning.fresh(self.egs.sessions, self.now())).plan)
            except Exception:
                log.exception("GPR %d is changed; planning its estimate failed", gpr.id)
        self.write_json(gpr_resource(gpr, estimate, self.now()), status)


def estimate_of(gpr: core.GPR, plan: Plan) -> Estimate | None:
    """A queued GPR's estimate (a plan made before it ended may still hold one)."""
    return plan.estimates.get(gpr.id) if gpr.status is core.Status.QUEUED else None


class GPRsHandler(GPRBase):
    @operation(
        "GET /gprs",
        "GPRs of the caller's slices",
        ok="a page of GPRs",
        answer=GPRPage,
        errors=(401, 403, 404),
        query=GPRsQuery,
        names=(Named("/gprs/{id}", body_at("/gprs/0", id="id")),),
    )
    async def get(self) -> None:
        """A page of the caller's GPRs in id order (cursors.py)."""
        query = read(GPRsQuery, self)
        slice_name, status, limit, after = query.slice, query.status, query.limit, query.cursor
        plan = await self.plan()
        with self.egs.sessions() as session:
            state = self.egs.planning.state.current(session, self.now())
            if slice_name is not None:
                slices = [self.member_slice(session, slice_name).name]
            elif self.is_admin:
                slices = None
            else:
                slices = sorted(self.slices_of_caller(state.groups))
            gprs = queries.gprs_page(
                session,
                slices=slices,
                statuses=[status] if status else None,
                after_id=after[0] if after else None,
                limit=limit + 1,
                known=state.gprs,  # the active ones
            )
            gprs, next_cursor = cursors.GPRS.page(gprs, limit, key=lambda g: (g.id,))
            views = [self.view(gpr, plan) for gpr in gprs]
        self.write_json(GPRPage(gprs=views, next_cursor=next_cursor))

    @operation(
        "POST /gprs",
        "Ask for GPUs",
        ok="submitted",
        idempotent=GPRS,
        answer=GPR,
        status=201,
        errors=(401, 403, 409, 422),
        body=GPRCreate,
        names=(Named("/gprs/{id}", body_at("", id="id")),),
    )
    async def post(self, key: Claim) -> None:
        spec = self.spec_of(parse_body(GPRCreate, self.json_body()))
        submitted = await self.egs.commands.submit(
            spec, self.user_name, admin=self.is_admin, authorize=self.may_act_in, also=key.record
        )
        self.set_header("Location", f"{self.egs.api_prefix}gprs/{submitted.gpr.id}")
        self.write_json(gpr_resource(submitted.gpr, submitted.estimate, self.now()), 201)


class GPRHandler(GPRBase):
    @operation("GET /gprs/{id}", "One GPR", ok="the GPR", answer=GPR, errors=(401, 403, 404))
    async def get(self, gpr_id: str) -> None:
        """A GPR waiting or holding GPUs comes from the planning state in memory, with its slice's
        group; one that ended, or whose slice the state does not know, from the store."""
        number = self.int_argument("id", gpr_id)
        plan = await self.plan()
        with self.egs.sessions() as session:
            state = self.egs.planning.state.current(session, self.now())
            gpr = state.gprs.get(number)
            group = None if gpr is None else state.groups.get(gpr.spec.slice)
            if gpr is None or group is None:
                gpr = queries.to_gpr(self.visible_gpr(session, gpr_id))
            else:
                self.require_member_of(gpr.spec.slice, group, f"GPR with id {gpr_id}")
        self.write_json(self.view(gpr, plan))

    @operation(
        "PATCH /gprs/{id}",
        "Edit before provisioning (owner); change priority any time (admin)",
        ok="changed",
        answer=GPR,
        errors=(401, 403, 404, 409, 422),
        body=GPRUpdate,
    )
    async def patch(self, gpr_id: str) -> None:
        update = parse_body(GPRUpdate, self.json_body())
        gpr = self.egs.commands.edit(
            self.int_argument("id", gpr_id),
            update.apply,
            self.user_name,
            admin=self.is_admin,
            authorize=self.may_act_in,
        )
        await self.answer(gpr)

    @operation(
        "DELETE /gprs/{id}",
        "Cancel before provisioning",
        ok="cancelled",
        answer=GPR,
        errors=(401, 403, 404, 409),
        body=Reason,
    )
    async def delete(self, gpr_id: str) -> None:
        reason = parse_body(Reason, self.json_body()).reason
        gpr = self.egs.commands.cancel(
            self.int_argument("id", gpr_id), self.user_name, reason, authorize=self.may_act_in
        )
        await self.answer(gpr)


class ReleaseHandler(GPRBase):
    @operation(
        "POST /gprs/{id}/release", "Release early", ok="releasing", answer=GPR, errors=(401, 403, 404, 409), body=Reason
    )
    async def post(self, gpr_id: str) -> None:
        reason = parse_body(Reason, self.json_body()).reason
        gpr = self.egs.commands.release(
            self.int_argument("id", gpr_id), self.user_name, reason, authorize=self.may_act_in
        )
        await self.answer(gpr)


class DecisionHandler(GPRBase):
    """POST gprs/{id}/approve and gprs/{id}/deny: admins, and the admins of the GPR's project."""

    async def decide(self, gpr_id: str, approve: bool) -> None:
        reason = parse_body(Reason, self.json_body()).reason
        if not self.is_admin:
            with self.egs.sessions() as session:
                slice_name = self.visible_gpr(session, gpr_id).slice
            self.require_manager(self.planning_state().projects.get(slice_name, core.DEFAULT_PROJECT))
        gpr = self.egs.commands.decide(self.int_argument("id", gpr_id), approve, self.user_name, reason)
        await self.answer(gpr)


class ApproveHandler(DecisionHandler):
    @operation(
        "POST /gprs/{id}/approve",
        "Approve (admin, or an admin of its project)",
        ok="approved",
        answer=GPR,
        errors=(401, 403, 404, 409),
        body=Reason,
    )
    async def post(self, gpr_id: str) -> None:
        await self.decide(gpr_id, approve=True)


class DenyHandler(DecisionHandler):
    @operation(
        "POST /gprs/{id}/deny",
        "Deny (admin, or an admin of its project)",
        ok="rejected",
        answer=GPR,
        errors=(401, 403, 404, 409),
        body=Reason,
    )
    async def post(self, gpr_id: str) -> None:
        await self.decide(gpr_id, approve=False)


class WaitTimesHandler(GPRBase):
    @operation(
        "POST /wait-times",
        "Estimated start on every shape and cluster that could serve a GPR",
        ok="options",
        answer=WaitTimes,
        errors=(401, 403, 422),
        body=WaitTimeQuery,
    )
    async def post(self) -> None:
        spec = self.spec_of(parse_body(WaitTimeQuery, self.json_body()))
        now = self.now()
        with self.egs.sessions() as session:
            policy = self.egs.commands.policy_of(session, spec.slice, now, self.may_act_in)
            reasons = self.egs.commands.vet(session, spec, policy, now, admin=self.is_admin)
        snapshot, plan, planned_at = await self.egs.planning.current(self.egs.sessions, now)
        options = planner.wait_times(snapshot, spec, planned_at, current=plan)
        prices = self.egs.planning.state.prices  # read with the inventory, up to the last commit (policy_of)
        self.write_json(
            WaitTimes(options=[option_resource(o, spec.duration, prices) for o in options], needs_approval=reasons)
        )


class GPRChecksHandler(GPRBase):
    @operation(
        "GET /gprs/{id}/checks",
        "The checks of the GPR's nodes at entry and exit, with status, values and log",
        ok="its checklist",
        answer=GPRChecks,
        errors=(401, 403, 404),
    )
    def get(self, gpr_id: str) -> None:
        """The GPR's checklist: every check of its nodes at entry and exit (members of its slice)."""
        with self.egs.sessions() as session:
            row = self.visible_gpr(session, gpr_id)
            runs = queries.gpr_check_runs(session, row.id)
        runs.sort(key=lambda run: (run.node, run.phase != "entry", run.id))
        self.write_json(GPRChecks(gpr=row.id, checks=[check_run_resource(run) for run in runs]))
