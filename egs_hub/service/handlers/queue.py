"""The queue in the planner's order, and the evictions it proposes.

An eviction ends lower-priority preemptible provisioned GPRs (the *victims*) so
that the GPR at the top of the queue starts now. The slice policy of that GPR
says whether the reconcile loop evicts at once ("auto"), an admin confirms the
planner's list here ("confirm"), or nothing is evicted ("off").
"""

from __future__ import annotations

from bisect import bisect_right

from ...core.queue import band
from ...core.requests import EvictionConfirm, parse_body
from ...core.units import format_time
from ...roles import ADMIN_SCOPE
from ...store import queries
from .. import cursors
from ..planning import BAND_NAMES, eviction_proposals, factors
from ..serialize import eviction_json
from .base import authenticated, needs_scope
from .gprs import GPRBase


class QueueHandler(GPRBase):
    @authenticated
    async def get(self) -> None:
        """A page of the queue in the planner's order: by queue position, then GPRs without one, by id.

        The order is the plan's, not a column: the queued GPRs come from the planning state in
        memory, ordered by their keys, and only the page's are shown.
        """
        limit = cursors.QUEUE.limit(self.get_argument("limit", None))
        after = cursors.QUEUE.after(self.get_argument("cursor", None))
        now = self.now()
        planned = await self.egs.planning.current(self.egs.sessions, now)
        snapshot, plan, planned_at = planned
        with self.egs.sessions() as session:
            member_of = self.slices_of_caller(self.egs.planning.state.current(session, now).groups)
        keyed = self.egs.planning.queue_order(planned)
        start = 0 if after is None else bisect_right(keyed, tuple(after), key=lambda kg: kg[0])
        page, next_cursor = cursors.QUEUE.page(keyed[start : start + limit + 1], limit, key=lambda kg: kg[0])
        views = [self.view(gpr, plan, gpr.spec.slice in member_of) for _, gpr in page]
        factor_of = factors(snapshot)
        for view in views:
            view["band"] = BAND_NAMES[band(view["priority"])]
            view["fair_share_factor"] = round(factor_of.get(view["slice"], 1.0), 6)
        self.write_json({"queue": views, "next_cursor": next_cursor, "planned_at": format_time(planned_at)})


class EvictionsHandler(GPRBase):
    """GET and POST queue/evictions (admins)."""

    @needs_scope(ADMIN_SCOPE)
    async def get(self) -> None:
        # Planned afresh: a GPR that just arrived is only placed on the last plan, which proposes
        # no eviction for it (the reconcile pass, woken by it, evicts where the policy is auto).
        snapshot, plan, planned_at = await self.egs.planning.fresh(self.egs.sessions, self.now())
        with self.egs.sessions() as session:
            evicting = bool(queries.evictions_in_flight(session))
            views = [self._json(session, e) for e in eviction_proposals(snapshot, plan, planned_at, evicting)]
        self.write_json({"evictions": views})

    @needs_scope(ADMIN_SCOPE)
    async def post(self) -> None:
        body = parse_body(EvictionConfirm, self.json_body())
        proposal, victims = await self.egs.commands.confirm_eviction(body.gpr_id, set(body.victims), self.user_name)
        self.write_json(eviction_json(proposal, victims))

    def _json(self, session, eviction) -> dict:
        victims = [queries.to_gpr(row) for v in eviction.victims if (row := queries.get_gpr_row(session, v))]
        return eviction_json(eviction, victims)
