"""Dynamic node pools at work (core/node_pools.py decides; the cluster's backend asks its autoscaler).

At each interval, for every pool: what became of the pool's requests to the autoscaler (a failed one
stops asks until ``retry_at`` and is told in an event; one whose nodes all joined is deleted); then the
current plan's windows on the pool's joining nodes ask it to grow (``growth``); its nodes' idle times are
brought up to date from their bindings, new nodes are kept from the autoscaler's own scale-down, and
idle ones are given back (``to_give_back``: cordoned, so the planner stops counting them at once).

Growing and giving back read the plan only when it saw as many of the pool's nodes joined as the store
holds now: a joining node's name counts from the nodes joined (``burst+1`` is the first one not yet
there), so a plan made before a node joined (the one served while the next is made) still has the
window on ``burst+1`` that the joined node now serves, and would ask for a second node. The next pass,
on a plan that saw the node, decides.

What was asked (``target``, ``asked_at``, ``retry_at``) and since when each node idles are in the
store, so a restarted service goes on where it was; the nodes kept this run are remembered in memory
only (keeping one again is harmless).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend
from ..backends.kubernetes import ClusterUnavailable
from ..backends.kubernetes.nodes import FREE, SLICE_LABEL
from ..core.model import Event
from ..core.node_pools import (
    POOL_LABEL,
    NodePool,
    PoolNode,
    PoolState,
    growth,
    joined,
    planned_nodes,
    to_give_back,
)
from ..core.units import format_duration
from ..store import queries
from ..store.db import transaction
from ..store.models import NodePoolRow
from .periodic import Periodic
from .planning import Planning

log = logging.getLogger(__name__)
ACTOR = "node-pools"


class PoolScaler(Periodic):
    name = "node pool pass"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        planning: Planning,
        backends: Mapping[str, Backend],
        clock: Callable[[], datetime],
        interval: float,
    ):
        self.sessions = sessions
        self.planning = planning
        self.backends = backends
        self.clock = clock
        self.interval = interval
        self._kept: set[tuple[str, str]] = set()

    async def tick(self) -> None:
        """One pass over every pool (module doc)."""
        with self.sessions() as session:
            ids = [row.id for row in queries.pool_rows(session)]
        if not ids:
            return
        planned = await self.planning.current(self.sessions, self.clock())
        estimates = list(planned.plan.estimates.values())
        seen = joined(planned.snapshot.nodes)
        for pool_id in ids:
            try:
                await self._scale(pool_id, estimates, seen)
            except ClusterUnavailable as e:
                log.warning("node pool %s: %s", pool_id, e)

    async def _scale(self, pool_id: int, estimates: list, seen: Counter[tuple[str, str]]) -> None:
        """One pool's pass; ``seen``: how many nodes of each pool the plan of ``estimates`` saw joined (none: 0)."""
        now = self.clock()
        with self.sessions() as session:
            row = session.get(NodePoolRow, pool_id)
            if row is None:
                return
            pool, state, error = queries.to_pool(row), queries.pool_state(row), row.last_error
            members = queries.pool_members(session, pool.cluster, pool.name)
            held = queries.held_pool_nodes(session, pool.cluster, pool.name)
            idle = {n.name: (None if n.name in held else n.idle_since or now) for n in members}
            live = [n.name for n in members if n.schedulable]
        backend = self.backends.get(pool.cluster)
        if backend is None or not backend.scales_pools:
            return
        step = Step(pool, state, len(live), now, error)
        given: set[str] = set()
        try:  # what was done is saved even when a later call to the cluster fails (it is not done twice)
            await self._settle_requests(backend, step)
            for name in live:
                if (pool.cluster, name) not in self._kept:
                    await backend.keep_pool_node(name)
                    self._kept.add((pool.cluster, name))
            if seen[(pool.cluster, pool.name)] != len(live):
                return  # the plan's joining nodes are not these (module doc)
            on_cluster = planned_nodes(estimates, pool.cluster)
            await self._grow(backend, step, on_cluster)
            for name in to_give_back(pool, [PoolNode(name, idle[name]) for name in live], on_cluster, now):
                await backend.give_back_pool_node(name)
                given.add(name)
                self._kept.discard((pool.cluster, name))
                idled = format_duration(now - idle[name])
                step.tell("pool-node-given-back", f"node {name} idled {idled}: given back", node=name)
                step.state = replace(step.state, target=max(step.state.target, step.joined) - 1)
                step.joined -= 1
        finally:
            self._save(pool_id, step, idle, given)

    @staticmethod
    async def _settle_requests(backend: Backend, step: Step) -> None:
        """A failed request: nothing coming, no ask before the retry; one whose nodes all joined: deleted;
        one whose booking expired (or capacity was revoked) while nodes are still awaited: those nodes never
        joined the pool (their labels), which fails as the autoscaler's failure does."""
        pool, coming = step.pool, max(step.state.target - step.joined, 0)
        for request in await backend.pool_requests(pool.name):
            if request.state == "failed":
                step.failed(f"the autoscaler could not add {request.nodes} node(s): {request.message}", request.name)
            elif request.state == "expired" and coming:
                step.failed(
                    f"the autoscaler's request for {request.nodes} node(s) ended ({request.message}) before they "
                    f"joined: do the node group's nodes carry the labels {POOL_LABEL}={pool.name} and "
                    f"{SLICE_LABEL}={FREE}?",
                    request.name,
                )
            elif request.state == "pending" or coming:
                continue
            await backend.end_pool_request(request.name)

    @staticmethod
    async def _grow(backend: Backend, step: Step, on_cluster: list) -> None:
        pool, state, now = step.pool, step.state, step.now
        wanted = growth(pool, state, step.joined, on_cluster, now)
        if not wanted:
            return
        try:
            name = await backend.grow_pool(pool, wanted)
        except ClusterUnavailable as e:
            step.failed(str(e))
            return
        step.state = PoolState(max(state.target, step.joined) + wanted, now, None)
        step.error = None
        within = format_duration(pool.scale_up_delay)
        step.tell(
            "pool-grown", f"asked for {wanted} node(s) of {pool.shape.name}, expected within {within}", request=name
        )

    def _save(self, pool_id: int, step: Step, idle: dict[str, datetime | None], given: set[str]) -> None:
        with transaction(self.sessions) as session:
            row = session.get(NodePoolRow, pool_id)
            if row is None:
                return
            state = step.state
            if (row.target, row.asked_at, row.retry_at) != (state.target, state.asked_at, state.retry_at):
                row.target, row.asked_at, row.retry_at = state.target, state.asked_at, state.retry_at
            if row.last_error != step.error:
                row.last_error = step.error
            for node in queries.pool_members(session, row.cluster, row.name):
                if node.name in idle and node.idle_since != idle[node.name]:
                    node.idle_since = idle[node.name]
                if node.name in given:
                    node.schedulable = False
            for event in step.events:
                queries.add_event(session, event)


class Step:
    """One pool's pass: what was asked of it as the pass goes, and the events it made."""

    def __init__(self, pool: NodePool, state: PoolState, joined: int, now: datetime, error: str | None = None):
        self.pool, self.state, self.joined, self.now = pool, state, joined, now
        self.error = error
        self.events: list[Event] = []

    def tell(self, kind: str, reason: str, **data) -> None:
        pool = self.pool
        self.events.append(
            Event(
                kind=kind,
                actor=ACTOR,
                reason=f"pool {pool.name} ({pool.cluster}): {reason}",
                time=self.now,
                data={"cluster": pool.cluster, "pool": pool.name, **data},
            )
        )

    def failed(self, why: str, request: str | None = None) -> None:
        """An ask failed: nothing is coming, and none is asked before the delay has passed."""
        retry_at = self.now + self.pool.scale_up_delay
        self.state = PoolState(self.joined, self.state.asked_at, retry_at)
        self.error = why
        self.tell(
            "pool-scale-up-failed",
            f"{why}; asking again after {format_duration(self.pool.scale_up_delay)}",
            request=request,
        )
