"""GPRs: submit, read, edit, cancel, release early, approve and deny; wait-time
estimates. ``submit_gpr`` is also how a GPR resource applied with kubectl becomes
a GPR, and ``edit_gpr`` how an edit of its spec reaches the GPR (gpr_sync.py), so
both are checked alike. Estimates come from the same planner as admission, with the same
promises (planning.py); the queue and evictions are in queue.py.
"""

from __future__ import annotations

from datetime import datetime

from tornado import web

from ...core import lifecycle, planner
from ...core import model as core
from ...core.errors import Conflict, InvalidRequest, PolicyViolation
from ...core.policy import approval_reasons, check_request
from ...core.queue import band
from ...core.requests import GPRCreate, GPRUpdate, Reason, WaitTimeQuery, parse_body
from ...core.snapshot import Plan, Snapshot
from ...roles import ADMIN_SCOPE
from ...store import queries
from ...store.db import transaction
from ...store.models import GPRRow
from ...store.models import Slice as SliceRow
from ..planning import Planning, week_gpu_hours
from ..serialize import gpr_json, option_json
from .base import APIHandler, authenticated, needs_scope

STATUS_VALUES = [s.value for s in core.Status]


def vet(
    session, planning: Planning, spec: core.GPRSpec, slice_row: SliceRow, now: datetime, *, admin: bool
) -> tuple[Snapshot, list[str]]:
    """Check a spec against its slice (members' limits, unless ``admin``) and the inventory (can it ever run).

    Returns the snapshot it was checked against and why it would need an admin's approval
    (or be rejected): over max_duration, max_gpus, auto_approve_max_gpus, or the GPU-hours
    left of the slice's rolling week.
    """
    policy = queries.slice_policy(slice_row)
    if not admin:
        check_request(spec, policy)
    snapshot = planning.snapshot(session, now)
    check_servable(snapshot, spec)
    week = week_gpu_hours(session, spec.slice, now) if policy.max_gpu_hours is not None else 0.0
    return snapshot, approval_reasons(spec, planner.gpu_count(spec, snapshot.nodes), policy, week)


def check_servable(snapshot: Snapshot, spec: core.GPRSpec) -> None:
    reason = planner.unservable_reason(spec, snapshot.nodes, snapshot.unhealthy_gpus)
    if reason is None:
        return
    field = "nodes" if spec.nodes is not None else "gpus"
    if not planner.eligible_nodes(snapshot.nodes, spec):
        field = "shape" if spec.shape else "cluster" if spec.cluster else field
    raise PolicyViolation(field, reason)


def submit_gpr(
    session,
    planning: Planning,
    spec: core.GPRSpec,
    slice_row: SliceRow,
    requested_by: str,
    now: datetime,
    *,
    admin: bool,
) -> core.GPR:
    """POST /gprs after its caller's checks (body, membership), for the API and GPR resources alike:
    vet the spec, then write the GPR queued, pending approval or rejected as the slice's policy says.
    InvalidRequest or PolicyViolation naming the field, and nothing written, when it cannot be."""
    _, reasons = vet(session, planning, spec, slice_row, now, admin=admin)
    reject = queries.slice_policy(slice_row).reject_over_limits
    row = queries.new_gpr_row(session, spec, requested_by, now)
    submitted = lifecycle.submit(row.id, spec, requested_by, reasons, now, reject=reject)
    return queries.apply(session, row, submitted)


def edit_gpr(
    session,
    planning: Planning,
    row: GPRRow,
    spec: core.GPRSpec,
    slice_row: SliceRow,
    actor: str,
    now: datetime,
    *,
    admin: bool,
) -> core.GPR:
    """PATCH /gprs/{id} after its caller's checks (body, who may edit), for the API and GPR resources alike:
    vet the new spec as submit_gpr does, then edit the GPR (pending approval or queued) to it.
    Nothing is written when it raises: InvalidRequest or PolicyViolation naming the field, Conflict for a
    change over the slice's limits that its policy rejects or that a queued GPR would need approved for,
    IllegalTransition for a GPR past queued."""
    gpr = queries.to_gpr(row)
    _, reasons = vet(session, planning, spec, slice_row, now, admin=admin)
    if reasons and not admin and queries.slice_policy(slice_row).reject_over_limits:
        raise Conflict(f"this change is over the slice's limits ({'; '.join(reasons)}); it is not allowed")
    if gpr.status is core.Status.QUEUED and reasons and not admin:
        raise Conflict(
            f"this change needs an admin's approval ({'; '.join(reasons)}); cancel this GPR and submit a new one"
        )
    return queries.apply(session, row, lifecycle.edit(gpr, spec, actor, now))


class GPRBase(APIHandler):
    def load_gpr(self, session, gpr_id: str, *, lock: bool = False) -> GPRRow:
        row = queries.get_gpr_row(session, self.int_argument("id", gpr_id), lock=lock)
        if row is None:
            raise self.not_found(f"GPR with id {gpr_id}")
        return row

    def slice_of(self, session, name: str) -> SliceRow:
        row = queries.get_slice(session, name)
        if row is None:
            raise PolicyViolation("slice", f"no slice named {name!r}; GET /slices lists yours")
        return row

    def plan_now(self, session) -> Plan:
        return self.egs.planning.plan_now(session, self.now()).plan

    def vet(self, session, spec: core.GPRSpec, slice_row: SliceRow, now: datetime) -> tuple[Snapshot, list[str]]:
        return vet(session, self.egs.planning, spec, slice_row, now, admin=self.is_admin)

    def view(self, gpr: core.GPR, plan: Plan, member: bool = True) -> dict:
        return gpr_json(gpr, plan.estimates.get(gpr.id), redact=not member)

    def answer(self, gpr_id: int, status: int = 200) -> None:
        with self.egs.sessions() as session:
            gpr = queries.to_gpr(queries.get_gpr_row(session, gpr_id))
            view = self.view(gpr, self.plan_now(session))
        self.write_json(view, status)


class GPRsHandler(GPRBase):
    @authenticated
    def get(self) -> None:
        slice_name = self.get_argument("slice", None)
        status = self.get_argument("status", None)
        if status is not None and status not in STATUS_VALUES:
            raise InvalidRequest("status", f"status must be one of {', '.join(STATUS_VALUES)}")
        with self.egs.sessions() as session:
            if slice_name is not None:
                slices = [self.member_slice(session, slice_name).name]
            elif self.is_admin:
                slices = None
            else:
                slices = [r.name for r in queries.all_slices(session) if self.is_member(r)]
            rows = queries.gpr_rows(session, slices=slices, statuses=[status] if status else None)
            plan = self.plan_now(session)
            views = [self.view(queries.to_gpr(r), plan) for r in rows]
        self.write_json({"gprs": views})

    @authenticated
    def post(self) -> None:
        spec = parse_body(GPRCreate, self.json_body()).to_spec()
        now = self.now()
        with transaction(self.egs.sessions) as session:
            slice_row = self.slice_of(session, spec.slice)
            self.require_member(slice_row)
            gpr = submit_gpr(session, self.egs.planning, spec, slice_row, self.user_name, now, admin=self.is_admin)
        self.egs.reconciler.wake()
        self.set_header("Location", f"{self.egs.api_prefix}gprs/{gpr.id}")
        self.answer(gpr.id, 201)


class GPRHandler(GPRBase):
    @authenticated
    def get(self, gpr_id: str) -> None:
        with self.egs.sessions() as session:
            row = self.load_gpr(session, gpr_id)
            self.require_member(self.slice_of(session, row.slice))
            view = self.view(queries.to_gpr(row), self.plan_now(session))
        self.write_json(view)

    @authenticated
    def patch(self, gpr_id: str) -> None:
        update = parse_body(GPRUpdate, self.json_body(), partial=True)
        changes = update.changes()
        now = self.now()
        with transaction(self.egs.sessions) as session:
            row = self.load_gpr(session, gpr_id, lock=True)
            slice_row = self.slice_of(session, row.slice)
            self.require_member(slice_row)
            gpr = queries.to_gpr(row)
            if self.is_admin and set(changes) == {"priority"}:
                queries.apply(session, row, lifecycle.change_priority(gpr, changes["priority"], self.user_name, now))
            else:
                self._edit(session, row, gpr, update, slice_row, now)
        # A new priority may reorder its old and new bands; an edited GPR is planned afresh.
        new_priority = changes.get("priority", gpr.spec.priority)
        self.egs.planning.forget([gpr.id], {band(gpr.spec.priority), band(new_priority)})
        self.egs.reconciler.wake()
        self.answer(row.id)

    def _edit(self, session, row, gpr: core.GPR, update: GPRUpdate, slice_row: SliceRow, now) -> None:
        if not (self.is_admin or gpr.requested_by == self.user_name):
            raise web.HTTPError(403, f"only {gpr.requested_by} (who asked) or an admin can edit GPR {gpr.id}")
        spec = update.apply(gpr.spec)
        edit_gpr(session, self.egs.planning, row, spec, slice_row, self.user_name, now, admin=self.is_admin)

    @authenticated
    def delete(self, gpr_id: str) -> None:
        with transaction(self.egs.sessions) as session:
            row = self.load_gpr(session, gpr_id, lock=True)
            self.require_member(self.slice_of(session, row.slice))
            gpr = queries.to_gpr(row)
            if gpr.status.holds_gpus:
                raise Conflict(
                    f"GPR {gpr.id} is {gpr.status} and holds GPUs; release it with POST gprs/{gpr.id}/release"
                )
            reason = parse_body(Reason, self.json_body()).reason
            queries.apply(session, row, lifecycle.cancel(gpr, self.user_name, reason, self.now()))
        self.egs.reconciler.wake()
        self.answer(row.id)


class ReleaseHandler(GPRBase):
    @authenticated
    def post(self, gpr_id: str) -> None:
        reason = parse_body(Reason, self.json_body()).reason
        with transaction(self.egs.sessions) as session:
            row = self.load_gpr(session, gpr_id, lock=True)
            self.require_member(self.slice_of(session, row.slice))
            gpr = queries.to_gpr(row)
            if gpr.status in (core.Status.PENDING_APPROVAL, core.Status.QUEUED):
                raise Conflict(f"GPR {gpr.id} is {gpr.status} and holds no GPUs; cancel it with DELETE gprs/{gpr.id}")
            change = lifecycle.begin_release(
                gpr, core.EndReason.RELEASED_EARLY, self.user_name, reason or "released early", self.now()
            )
            queries.apply(session, row, change)
        self.egs.reconciler.wake()
        self.answer(row.id)


class DecisionHandler(GPRBase):
    """POST gprs/{id}/approve and gprs/{id}/deny."""

    @needs_scope(ADMIN_SCOPE)
    def post(self, gpr_id: str, decision: str) -> None:
        reason = parse_body(Reason, self.json_body()).reason
        decide = lifecycle.approve if decision == "approve" else lifecycle.deny
        with transaction(self.egs.sessions) as session:
            row = self.load_gpr(session, gpr_id, lock=True)
            queries.apply(session, row, decide(queries.to_gpr(row), self.user_name, reason, self.now()))
        self.egs.reconciler.wake()
        self.answer(row.id)


class WaitTimesHandler(GPRBase):
    @authenticated
    def post(self) -> None:
        spec = parse_body(WaitTimeQuery, self.json_body()).to_spec()
        now = self.now()
        with self.egs.sessions() as session:
            slice_row = self.slice_of(session, spec.slice)
            self.require_member(slice_row)
            _, reasons = self.vet(session, spec, slice_row, now)
            snapshot, plan, planned_at = self.egs.planning.plan_now(session, now)
        options = planner.wait_times(snapshot, spec, planned_at, current=plan)
        self.write_json({"options": [option_json(o) for o in options], "needs_approval": reasons})
