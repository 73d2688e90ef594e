"""The queue in the planner's order, and the evictions it proposes.

An eviction ends lower-priority preemptible provisioned GPRs (the *victims*) so
that the GPR at the top of the queue starts now. The slice policy of that GPR
says whether the reconcile loop evicts at once ("auto"), an admin confirms the
planner's list here ("confirm"), or nothing is evicted ("off").
"""

from __future__ import annotations

from bisect import bisect_right

from ...core import fairshare
from ...core.queue import band
from ...core.requests import EvictionConfirm, parse_body
from ...core.resources import BANDS, Eviction, Evictions, QueuedGPR, QueuePage
from ...store import queries
from .. import cursors
from ..operations import ADMIN, Named, body_at
from ..parameters import QueueQuery, read
from ..planning import eviction_proposals, factors
from ..serialize import eviction_resource, gpr_resource
from .base import operation
from .gprs import GPRBase, estimate_of


class QueueHandler(GPRBase):
    @operation(
        "GET /queue",
        "Queued GPRs in order, with position, estimated start, band and fair share",
        ok="a page of the queue",
        answer=QueuePage,
        errors=(401,),
        query=QueueQuery,
        names=(Named("/gprs/{id}", body_at("/queue/0", id="id")),),
    )
    async def get(self) -> None:
        """A page of the queue in the planner's order: by queue position, then GPRs without one, by id.

        The order is the plan's, not a column: the queued GPRs come from the planning state in
        memory, ordered by their keys, and only the page's are shown.
        """
        query = read(QueueQuery, self)
        limit, after = query.limit, query.cursor
        now = self.now()
        planned = await self.egs.planning.current(self.egs.sessions, now)
        snapshot, plan, planned_at = planned
        viewer = self.viewer
        keyed = self.egs.planning.queue_order(planned)
        start = 0 if after is None else bisect_right(keyed, tuple(after), key=lambda kg: kg[0])
        page, next_cursor = cursors.QUEUE.page(keyed[start : start + limit + 1], limit, key=lambda kg: kg[0])
        factor_of = factors(snapshot)
        views = [
            gpr_resource(
                gpr,
                estimate_of(gpr, plan),
                now,
                redact=not viewer.sees(gpr.spec.slice),
                model=QueuedGPR,
                band=BANDS[band(gpr.spec.priority)],
                project_fair_share_factor=round(factor_of.get(gpr.spec.slice, fairshare.UNUSED)[0], 6),
                fair_share_factor=round(factor_of.get(gpr.spec.slice, fairshare.UNUSED)[1], 6),
            )
            for _, gpr in page
        ]
        self.write_json(QueuePage(queue=views, next_cursor=next_cursor, planned_at=planned_at))


class EvictionsHandler(GPRBase):
    """GET and POST queue/evictions (admins)."""

    @operation(
        "GET /queue/evictions",
        "Evictions the planner proposes now (admin)",
        ok="proposals",
        answer=Evictions,
        errors=(401, 403),
        auth=ADMIN,
    )
    async def get(self) -> None:
        # Planned afresh: a GPR that just arrived is only placed on the last plan, which proposes
        # no eviction for it (the reconcile pass, woken by it, evicts where the policy is auto).
        snapshot, plan, planned_at = await self.egs.planning.fresh(self.egs.sessions, self.now())
        with self.egs.sessions() as session:
            evicting = bool(queries.evictions_in_flight(session))
            views = [self._resource(session, e) for e in eviction_proposals(snapshot, plan, planned_at, evicting)]
        self.write_json(Evictions(evictions=views))

    @operation(
        "POST /queue/evictions",
        "Evict exactly the victims the planner proposes for a GPR (admin)",
        ok="evicted",
        answer=Eviction,
        errors=(401, 403, 409),
        body=EvictionConfirm,
        auth=ADMIN,
    )
    async def post(self) -> None:
        body = parse_body(EvictionConfirm, self.json_body())
        proposal, victims = await self.egs.commands.confirm_eviction(body.gpr_id, set(body.victims), self.user_name)
        self.write_json(eviction_resource(proposal, victims))

    def _resource(self, session, eviction) -> Eviction:
        victims = [queries.to_gpr(row) for v in eviction.victims if (row := queries.get_gpr_row(session, v))]
        return eviction_resource(eviction, victims)
