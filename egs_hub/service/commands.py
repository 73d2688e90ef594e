"""The use cases that change GPRs, one function each: submit, edit, reprioritise,
cancel, release, approve, deny and confirm an eviction.

HTTP handlers, the GPR custom-resource sync (gpr_sync.py) and the reconcile loop
call these; a handler only parses, authorises, calls and serialises. Each command
is one transaction: it checks, writes the GPR and its audit event, commits, then
tells the planning what changed and wakes the reconcile loop. Nothing is
acknowledged before it is committed.

Vocabulary: the *caller* is who acts (a hub user's name, ``admin`` when they hold
the admin scope); ``authorize`` says whether the caller may see and act in the slice
a command touches (the handler's; the GPR sync, which found the slice from the
resource's namespace, passes none). A command answers a "no" exactly as it answers a
slice or GPR that does not exist (service/visibility.py). A *submit* answers with the GPR's estimate,
placed on the current plan (planning.Planning.place_arrivals) without planning
everything again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from ..core import lifecycle
from ..core import model as core
from ..core.errors import Conflict, Forbidden, NotFound, PolicyViolation
from ..core.policy import approval_reasons, check_request, check_sharing, project_approval_reasons
from ..core.queue import band
from ..core.requests import check_start_after
from ..core.snapshot import Estimate, Eviction
from ..core.templates import GPRTemplate, check_usable, not_usable
from ..store import queries
from ..store.db import transaction
from ..store.models import GPRRow
from ..store.models import Slice as SliceRow
from .planning import (
    Planning,
    estimated_cost,
    eviction_proposals,
    issue_eviction,
    month_spend,
    week_gpu_hours,
)

log = logging.getLogger(__name__)

START_NOW = timedelta(milliseconds=1)  # an arrival estimated to start this soon starts now
Authorize = Callable[[str, str], bool]  # (slice, its hub group): whether the caller may see and act in it
Also = Callable[[Session, core.GPR], None]  # more to write in a command's transaction


@dataclass(frozen=True)
class _Asked:
    """A submit asked for."""

    spec: core.GPRSpec
    requested_by: str
    admin: bool
    authorize: Authorize | None
    also: Also | None = None


@dataclass(frozen=True)
class Submitted:
    gpr: core.GPR
    estimate: Estimate | None  # None unless it is queued


class Commands:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        planning: Planning,
        clock: Callable[[], datetime],
        wake: Callable[[], None] = lambda: None,
        *,
        max_start_after: timedelta,
    ):
        """``max_start_after``: how far from now a GPR's start_after may be (EGSService.max_start_after)."""
        self.sessions = sessions
        self.planning = planning
        self.clock = clock
        self.wake = wake
        self.max_start_after = max_start_after
        self._together: list[tuple[_Asked, asyncio.Future]] = []  # submits waiting for their group
        self._groups: set[asyncio.Task] = set()  # groups being submitted

    # Checks shared by submit and edit

    def vet(
        self, session: Session, spec: core.GPRSpec, policy: core.SlicePolicy, now: datetime, *, admin: bool
    ) -> list[str]:
        """Check a spec's start_after against the horizon (``max_start_after``), then the spec
        against its slice (members' limits, unless ``admin``) and the inventory (can it ever run).
        Returns why it would need an admin's approval (or be rejected): over max_duration,
        max_gpus, auto_approve_max_gpus, the GPU-hours left of the slice's rolling week, or its
        month's budget; or over its project's quota (the sum of the project's slices)."""
        check_start_after(spec.start_after, now, self.max_start_after)
        check_sharing(spec, policy)
        if not admin:
            check_request(spec, policy)
        state = self.planning.state.current(session, now)
        servability = state.servability(spec)
        if servability.reason is not None:
            raise PolicyViolation(servability.field, servability.reason)
        week = week_gpu_hours(session, spec.slice, now) if policy.max_gpu_hours is not None else 0.0
        project_name = state.projects.get(spec.slice, core.DEFAULT_PROJECT)
        project = state.project_policies.get(project_name)
        priced = policy.max_cost_month is not None or (project is not None and project.max_cost_month is not None)
        cost = (
            estimated_cost(session, state.servable_nodes, spec, servability.gpus, state.cluster_projects, project_name)
            if priced
            else None
        )
        month = month_spend(session, spec.slice, now) if policy.max_cost_month is not None else 0.0
        reasons = approval_reasons(spec, servability.equivalents, policy, week, month, cost)
        if project is not None:
            reasons += self._project_reasons(session, state, project, spec, servability.equivalents, cost, now)
        return reasons

    def _project_reasons(self, session, state, project, spec, gpus: float, cost, now: datetime) -> list[str]:
        """Why the GPR needs approval for its project's quota; reads only what the quota limits."""
        if project.max_gpus is None and project.max_gpu_hours is None and project.max_cost_month is None:
            return []
        slices = [name for name, of in state.projects.items() if of == project.name]
        held = state.held_gpus(slices) if project.max_gpus is not None else 0
        week = week_gpu_hours(session, slices, now) if project.max_gpu_hours is not None else 0.0
        month = month_spend(session, slices, now) if project.max_cost_month is not None else 0.0
        hours = spec.duration / timedelta(hours=1)
        return project_approval_reasons(project, gpus, hours, cost, held, week, month)

    def policy_of(
        self, session: Session, slice_name: str, now: datetime, authorize: Authorize | None
    ) -> core.SlicePolicy:
        """The slice's policy, from the planning state (read up to the last commit), once ``authorize``
        let the caller in; PolicyViolation when there is no such slice."""
        state = self.planning.state.current(session, now)
        policy = state.policies.get(slice_name)
        if policy is None or (authorize is not None and not authorize(slice_name, state.groups[slice_name])):
            raise no_slice(slice_name)
        return policy

    # The commands

    async def submit(
        self,
        spec: core.GPRSpec,
        requested_by: str,
        *,
        admin: bool,
        authorize: Authorize | None = None,
        also: Also | None = None,
    ) -> Submitted:
        """POST /gprs: vet the spec, then write the GPR queued, pending approval or rejected as
        the slice's policy says; ``also`` writes more in the same transaction (the GPR resource
        it was made from). InvalidRequest or PolicyViolation naming the field, and nothing
        written, when it cannot be.

        Group commit: the submits that arrive in one turn of the event loop share one transaction
        and one placement step, each with its own answer or error."""
        answer = asyncio.get_running_loop().create_future()
        self._together.append((_Asked(spec, requested_by, admin, authorize, also), answer))
        if len(self._together) == 1:  # the group's task runs once this turn of the loop is done
            task = asyncio.ensure_future(self._submit_group())
            self._groups.add(task)
            task.add_done_callback(self._groups.discard)
        return await answer

    async def _submit_group(self) -> None:
        group, self._together = self._together, []
        try:
            results = await self._submit_all([asked for asked, _ in group])
        except BaseException:
            for _, answer in group:
                answer.cancel()
            raise
        for (_, answer), result in zip(group, results, strict=True):
            if answer.done():  # its caller went away
                continue
            if isinstance(result, Exception):
                answer.set_exception(result)
            else:
                answer.set_result(result)

    async def _submit_all(self, group: list[_Asked]) -> list[Submitted | Exception]:
        """Submit ``group`` in one transaction and one placement step: a submit that fails its checks
        gets its error, writes nothing and leaves the others be; a failed commit fails them all, with
        nothing written. The GPRs are placed on the last plan, or on a fresh one (made in a worker
        thread) when something other than arrivals was written since it was made."""
        now = self.clock()
        answers: dict[int, Submitted | Exception] = {}  # by place in the group
        try:
            with transaction(self.sessions) as session:
                checked: dict[int, tuple[core.GPR, core.Event]] = {}
                for i, asked in enumerate(group):
                    try:
                        checked[i] = self._check(session, asked, now)
                    except Exception as e:  # its own answer: the others go on
                        answers[i] = e
                gprs = dict(zip(checked, queries.add_gprs(session, list(checked.values())), strict=True))
                for i, gpr in gprs.items():
                    if (also := group[i].also) is not None:
                        also(session, gpr)
                self.planning.mark_arrivals(session)
        except Exception as e:
            return [answers.get(i, e) for i in range(len(group))]
        try:
            await self.planning.current(self.sessions, now, any_age=True)
            with self.sessions() as session:
                estimates = self.planning.place_arrivals(session, list(gprs.values()), now)
        except Exception:
            # They are committed: answer them (the next plan gives their estimates), never an error.
            log.exception("placing GPRs %s on the plan failed", [gpr.id for gpr in gprs.values()])
            self.wake()
            estimates = {}
        # The reconcile loop acts on an arrival only when it may start now, or when GPUs may be
        # evicted for it; a later one starts when it is due (the loop sleeps no longer than until
        # the next planned start).
        state, gprs_by_id = self.planning.state, {gpr.id: gpr for gpr in gprs.values()}
        if any(
            e.start is not None and (e.start <= now + START_NOW or state.may_evict_for(gprs_by_id[e.gpr_id].spec))
            for e in estimates.values()
        ):
            self.wake()
        for i, gpr in gprs.items():
            answers[i] = Submitted(gpr, estimates.get(gpr.id))
        return [answers[i] for i in range(len(group))]

    def _check(self, session: Session, asked: _Asked, now: datetime) -> tuple[core.GPR, core.Event]:
        """The GPR a submit makes (id 0 until written) and its event; raises what refuses it. The
        slice's policy and group come from the planning state (read up to the last commit)."""
        spec = asked.spec
        policy = self.policy_of(session, spec.slice, now, asked.authorize)
        reasons = self.vet(session, spec, policy, now, admin=asked.admin)
        return lifecycle.submit(0, spec, asked.requested_by, reasons, now, reject=policy.reject_over_limits)

    def edit(
        self,
        gpr_id: int,
        change: Callable[[core.GPRSpec], core.GPRSpec],
        actor: str,
        *,
        admin: bool,
        authorize: Authorize | None = None,
        also: Also | None = None,
    ) -> core.GPR:
        """PATCH /gprs/{id}: vet the spec ``change`` makes of the GPR's, as submit does, then edit the
        GPR (pending approval or queued) to it; an admin changing the priority alone reprioritises,
        and a spec that is the same writes nothing (``also`` still writes).
        Nothing is written when it raises: InvalidRequest or PolicyViolation naming the field, Conflict
        for a change over the slice's limits that its policy rejects or that a queued GPR would need
        approved for, IllegalTransition for a GPR past queued, Forbidden for another user's GPR."""
        now = self.clock()
        with transaction(self.sessions) as session:
            row, slice_row = self._load(session, gpr_id, authorize)
            before = queries.to_gpr(row)
            if slice_row is None:
                raise PolicyViolation("slice", f"slice {before.spec.slice} is gone")
            if not (admin or before.requested_by == actor):
                raise Forbidden(f"only {before.requested_by} (who asked) or an admin can edit GPR {gpr_id}")
            spec = change(before.spec)
            if also is not None:
                also(session, before)
            if spec == before.spec:
                return before
            if admin and spec == replace(before.spec, priority=spec.priority):
                gpr = queries.apply(session, row, lifecycle.change_priority(before, spec.priority, actor, now))
            else:
                gpr = self._edit(session, row, before, spec, slice_row, actor, now, admin=admin)
        # A new priority may reorder its old and new bands; an edited GPR is planned afresh.
        self.planning.forget([gpr_id], {band(before.spec.priority), band(gpr.spec.priority)})
        self.wake()
        return gpr

    def _edit(self, session, row, gpr, spec, slice_row, actor, now, *, admin: bool) -> core.GPR:
        policy = queries.slice_policy(slice_row)
        reasons = self.vet(session, spec, policy, now, admin=admin)
        if reasons and not admin and policy.reject_over_limits:
            raise Conflict(f"this change is over the slice's limits ({'; '.join(reasons)}); it is not allowed")
        if gpr.status is core.Status.QUEUED and reasons and not admin:
            raise Conflict(
                f"this change needs an admin's approval ({'; '.join(reasons)}); cancel this GPR and submit a new one"
            )
        return queries.apply(session, row, lifecycle.edit(gpr, spec, actor, now))

    def cancel(self, gpr_id: int, actor: str, reason: str, *, authorize: Authorize | None = None) -> core.GPR:
        """DELETE /gprs/{id}: a GPR that holds no GPUs yet ends cancelled."""
        with transaction(self.sessions) as session:
            row, _ = self._load(session, gpr_id, authorize)
            gpr = queries.to_gpr(row)
            if gpr.status.holds_gpus:
                raise Conflict(
                    f"GPR {gpr.id} is {gpr.status} and holds GPUs; release it with POST gprs/{gpr.id}/release"
                )
            gpr = queries.apply(session, row, lifecycle.cancel(gpr, actor, reason, self.clock()))
        self.wake()
        return gpr

    def release(self, gpr_id: int, actor: str, reason: str, *, authorize: Authorize | None = None) -> core.GPR:
        """POST /gprs/{id}/release: a GPR holding GPUs begins releasing them early."""
        with transaction(self.sessions) as session:
            row, _ = self._load(session, gpr_id, authorize)
            gpr = queries.to_gpr(row)
            if gpr.status in (core.Status.PENDING_APPROVAL, core.Status.QUEUED):
                raise Conflict(f"GPR {gpr.id} is {gpr.status} and holds no GPUs; cancel it with DELETE gprs/{gpr.id}")
            change = lifecycle.begin_release(
                gpr, core.EndReason.RELEASED_EARLY, actor, reason or "released early", self.clock()
            )
            gpr = queries.apply(session, row, change)
        self.wake()
        return gpr

    def end(self, gpr_id: int, actor: str, reason: str) -> core.GPR:
        """Cancel a waiting GPR, or release early one holding GPUs (its GPR resource was deleted);
        a GPR already releasing or finished is left as it is."""
        with transaction(self.sessions) as session:
            row, _ = self._load(session, gpr_id, None)
            gpr = queries.to_gpr(row)
            now = self.clock()
            if gpr.status in (core.Status.PENDING_APPROVAL, core.Status.QUEUED):
                gpr = queries.apply(session, row, lifecycle.cancel(gpr, actor, reason, now))
            elif gpr.status in (core.Status.PROVISIONING, core.Status.PROVISIONED):
                gpr = queries.apply(
                    session, row, lifecycle.begin_release(gpr, core.EndReason.RELEASED_EARLY, actor, reason, now)
                )
            else:
                return gpr
        self.wake()
        return gpr

    def decide(self, gpr_id: int, approve: bool, actor: str, reason: str) -> core.GPR:
        """POST /gprs/{id}/approve or deny (admins)."""
        decide = lifecycle.approve if approve else lifecycle.deny
        with transaction(self.sessions) as session:
            row, _ = self._load(session, gpr_id, None)
            gpr = queries.apply(session, row, decide(queries.to_gpr(row), actor, reason, self.clock()))
        self.wake()
        return gpr

    async def confirm_eviction(self, gpr_id: int, victims: set[int], actor: str) -> tuple[Eviction, list[core.GPR]]:
        """POST /queue/evictions (admins): evict the victims the planner proposes now for ``gpr_id``
        (a fresh plan), when they are the ones confirmed. Conflict, nothing written, when the
        proposal changed, or a victim no longer holds GPUs when it is written."""
        snapshot, plan, _ = await self.planning.fresh(self.sessions, self.clock())
        now = self.clock()
        with transaction(self.sessions) as session:
            evicting = bool(queries.evictions_in_flight(session))
            proposal = next((e for e in eviction_proposals(snapshot, plan, now, evicting) if e.gpr_id == gpr_id), None)
            if proposal is None:
                raise Conflict(
                    f"the planner proposes no eviction for GPR {gpr_id} now; GET queue/evictions for the current list"
                )
            if set(proposal.victims) != victims:
                raise Conflict(
                    f"the planner's eviction for GPR {gpr_id} is now GPRs "
                    f"{', '.join(map(str, proposal.victims))}, not {', '.join(map(str, sorted(victims)))}; "
                    "GET queue/evictions and confirm the current list"
                )
            evicted = issue_eviction(session, proposal, actor, now, note=f"confirmed by {actor}")
        self.planning.forget([proposal.gpr_id])
        self.wake()
        return proposal, evicted

    def _load(self, session: Session, gpr_id: int, authorize: Authorize | None) -> tuple[GPRRow, SliceRow | None]:
        """The GPR's row, locked, and its slice's (None when the slice is gone), after ``authorize``."""
        row = queries.get_gpr_row(session, gpr_id, lock=True)
        missing = NotFound(f"no GPR with id {gpr_id}")
        if row is None:
            raise missing
        slice_row = queries.get_slice(session, row.slice)
        # A slice since deleted has no group: only an admin sees its GPRs.
        if authorize is not None and not authorize(row.slice, slice_row.group_name if slice_row else ""):
            raise missing
        return row, slice_row


def no_slice(name: str) -> PolicyViolation:
    """What a body naming a slice that does not exist, or one the caller may not see, is answered."""
    return PolicyViolation("slice", f"no slice named {name!r}; GET /slices lists yours")


def slice_of(session: Session, name: str) -> SliceRow:
    row = queries.get_slice(session, name)
    if row is None:
        raise no_slice(name)
    return row


def template_for(session: Session, name: str, slice_name: str) -> GPRTemplate:
    """The template ``name`` for a GPR of slice ``slice_name``: PolicyViolation naming ``template``
    when there is none, or the slice may not use it."""
    template = queries.get_template(session, name)
    if template is None:
        raise not_usable(name, slice_name)
    check_usable(template, slice_name, queries.project_of_slice(session, slice_name))
    return template
