"""The planner as the service runs it: one plan for admissions and for every read.

Vocabulary: the *promises* are the last plan's estimates. core/planner.py keeps a
queued GPR's promised window unless work arrives ahead of it in the queue or
capacity is lost, so every snapshot (the reconcile pass and the API reads: queue,
GPRs, wait times, inventory schedule) carries them, and every plan made replaces
them: all answers show the same estimates, and an estimate never moves later
because of work behind it or a fair-share change. A slice's *usage* is its decayed
GPU-seconds (fair share); its *week* is the rolling week of its policy's
``max_gpu_hours``.

The snapshot comes from memory (state.py): once ``watch`` has hooked the
service's sessions, a snapshot reads only the rows written since the last one.

A plan is *reused* for reads: ``current`` answers with the last plan while no
commit has written the planner's input other than arrivals (state.py: not events,
samples or saved promises), no promise was dropped, and it is at most
``reuse_for`` old (the reconcile pass's plan usually), so a busy API
does not plan once per request; and whatever was written, while the next plan is
being made in a worker thread. Otherwise it awaits a *fresh* plan, made in a worker
thread too (``fresh``: one plan at a time, shared by every read, submit and pass
that waits for it): no request plans on the event loop, which goes on serving the
others meanwhile. A plan's ``now`` is the time it was made at: answers built on it
use that time. ``plan_now`` is the same choice made synchronously (a fresh plan on
the caller's thread), for callers outside the event loop. *Arrivals* are GPRs just
submitted: a submit's commit is marked (``mark_arrivals``) and does not make reads
plan again; instead ``place_arrivals`` places each on the last plan whatever its
age (core/planner.place_arrival), so the submit answers, and every read shows, the
estimate the next plan gives when nothing else changes, at the cost of one
wait-time query. An arrival that displaces
requests planned behind it (it went ahead of them in the queue and took their
windows) does not wake the reconcile loop: until its next pass (at most
``reconcile_interval`` and a plan's time later) has planned them again, reads show
their old estimates and positions.

The cyclic garbage collector is off while a plan is made aside. A collection runs in
whichever thread allocates when one is due, with the finalizers and weakref callbacks
of what it frees: the planner's thread would run SQLAlchemy's (a session's identity
map, a pooled connection) while the event loop's thread uses the same session or
connection, and SQLAlchemy's sessions and connections are not thread-safe. Garbage
made meanwhile is collected after the pass, on the event loop's thread.

Evictions: ``eviction_proposals`` (pure) picks the plan's evictions worth acting
on; ``issue_eviction`` (I/O) begins releasing the victims.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from ..core import cost, fairshare, lifecycle, planner, promises, quota, usage
from ..core import model as core
from ..core.errors import Conflict
from ..core.queue import band
from ..core.snapshot import Estimate, Eviction, Plan, Request, Snapshot
from ..store import queries
from .state import PlanningState, writes_state

log = logging.getLogger(__name__)

_WROTE = "egs_wrote"  # Session.info key: this transaction flushed a change to the planner's input
_ARRIVALS = "egs_arrivals"  # Session.info key: it wrote arrivals only (Planning.mark_arrivals)
_FEW_ARRIVALS = 8  # arrivals placed on a plan made aside on the event loop when it is adopted, at most


class Taken(NamedTuple):
    """A snapshot about to be planned: ``version`` and ``arrivals`` say how far the store's writes
    and the arrivals placed had gone when it was taken."""

    snapshot: Snapshot
    now: datetime
    version: int
    arrivals: int


class Planned(NamedTuple):
    snapshot: Snapshot
    plan: Plan
    now: datetime  # when it was planned


class Planning:
    """Snapshots with the promises, and plans that renew them.

    The promises are used from memory and kept in the database (``save`` after each
    reconcile pass, ``restore`` when the service starts), so a restarted service keeps
    the estimates it gave. A plan is made in three steps, ``take`` (the snapshot),
    ``decide`` (pure) and ``adopt``; everything but ``decide`` runs on the service's one
    event-loop thread, so no lock is needed, and ``fresh`` runs ``decide`` in a
    worker thread.
    """

    def __init__(self, half_life: timedelta = fairshare.HALF_LIFE, order: core.Order = core.FAIR_SHARE_FIRST):
        self.half_life = half_life
        self.state = PlanningState(half_life, order)
        self._promises: dict[int, Estimate] = {}
        self._bands: dict[int, int] = {}
        self._first_starts: dict[int, datetime] = {}
        # Broken promises (core/promises.py): the start each queued GPR was told when it is not its
        # first, the cause the plans named last, the GPRs to tell afresh (edited), the events to write.
        self._told: dict[int, datetime] = {}
        self._causes: dict[int, str] = {}
        self._retell: set[int] = set()
        self._broken: list[core.Event] = []
        self._saved: dict[int, tuple[Estimate, int, datetime | None]] = {}
        self.pass_seconds = 0.0  # how long the last plan took
        self.reuse_for: timedelta | None = None  # None: never reused (not watching a store)
        self._version = 0  # store commits that wrote the planner's input, and promises dropped
        self._last: tuple[int, Planned] | None = None
        self._current_at = datetime.min.replace(tzinfo=UTC)  # when the last plan was made or found current
        self._arrivals: list[core.GPR] = []  # placed on the last plan, in order
        self._dropped: set[int] = set()  # promises dropped since the last snapshot
        self._queue_order: tuple | None = None  # queue_order's last: (plan, its estimates, state version, order)
        # The plan being made in a worker thread: the version its snapshot saw, and its outcome
        # (the plan, or None when making it failed).
        self._making: tuple[int, asyncio.Future[Planned | None]] | None = None

    def watch(self, sessions: sessionmaker[Session], reuse_for: timedelta) -> None:
        """Count the commits of ``sessions`` that wrote some of the planner's input (state.py: GPRs,
        inventory, slices; not events, samples or the promises saved), and reuse a plan for
        ``reuse_for`` while there is none."""
        self.state.watch(sessions)
        event.listen(sessions, "after_flush", self._flushed)
        event.listen(sessions, "after_commit", self._committed)
        event.listen(sessions, "after_rollback", self._rolled_back)
        self.reuse_for = reuse_for

    @staticmethod
    def _flushed(session: Session, _context) -> None:
        if writes_state((*session.new, *session.dirty, *session.deleted)):
            session.info[_WROTE] = True

    def _committed(self, session: Session) -> None:
        arrivals = session.info.pop(_ARRIVALS, False)
        if session.info.pop(_WROTE, False) and not arrivals:
            self._version += 1

    @staticmethod
    def _rolled_back(session: Session) -> None:
        session.info.pop(_WROTE, None)
        session.info.pop(_ARRIVALS, None)

    @staticmethod
    def mark_arrivals(session: Session) -> None:
        """This transaction writes new GPRs and their events only: its commit leaves the last plan
        reusable, and the GPRs are placed on it with ``place_arrivals``."""
        session.info[_ARRIVALS] = True

    def place_arrivals(self, session: Session, gprs: Iterable[core.GPR], now: datetime) -> dict[int, Estimate]:
        """The estimates of GPRs just submitted (and committed), the queued ones placed in the order
        given on the last plan made, whatever its age and whatever was written since (the caller
        awaits ``current`` first, so that it saw what was written before them; one is made now when
        there is none); reads show them from then on, and they are placed again on a plan whose
        snapshot was taken before they arrived."""
        current = (self._last[1] if self._last is not None else self.plan_now(session, now)).plan
        queued = [gpr for gpr in gprs if gpr.status is core.Status.QUEUED]
        self.state.current(session, now)
        self._place(current, queued, now)
        return {gpr.id: current.estimates[gpr.id] for gpr in queued if gpr.id in current.estimates}

    def restore(self, session: Session) -> None:
        """Take the promises saved by an earlier run of the service."""
        saved = {estimate.gpr_id: (estimate, b, first) for estimate, b, first in queries.load_promises(session)}
        self._promises = {gpr_id: estimate for gpr_id, (estimate, _, _) in saved.items()}
        self._bands = {gpr_id: b for gpr_id, (_, b, _) in saved.items()}
        self._first_starts = {gpr_id: first for gpr_id, (_, _, first) in saved.items() if first is not None}
        self._told = queries.last_moves(session)
        self._saved = saved
        self._version += 1

    def save(self, session: Session) -> list[core.Event]:
        """Store the promises when they changed since the last save, and the events of the promises
        broken since (in the caller's transaction); returns those events."""
        broken, self._broken = self._broken, []
        for event_ in broken:
            queries.add_event(session, event_)
        current = {
            gpr_id: (estimate, self._bands.get(gpr_id, 0), self._first_starts.get(gpr_id))
            for gpr_id, estimate in self._promises.items()
        }
        if current != self._saved:
            changed = {gpr_id: p for gpr_id, p in current.items() if self._saved.get(gpr_id) != p}
            queries.save_promises(session, changed, gone=[gpr_id for gpr_id in self._saved if gpr_id not in current])
            self._saved = current
        return broken

    def snapshot(self, session: Session, now: datetime) -> Snapshot:
        return self.state.snapshot(session, now, self._promises)

    def queue_order(self, planned: Planned) -> list[tuple[tuple[bool, int, int], core.GPR]]:
        """The queued GPRs of the state (read up to the caller's last ``state.current``) in ``planned``'s
        order, each with its key (``position_key``); sorted once per plan, arrival and change of the state."""
        plan, estimates = planned.plan, planned.plan.estimates
        made = self._queue_order
        if made is None or made[0] is not plan or made[1:3] != (len(estimates), self.state.version):
            queued = self.state.queued()
            order = sorted(((position_key(estimates.get(g.id), g.id), g) for g in queued), key=lambda kg: kg[0])
            made = self._queue_order = (plan, len(estimates), self.state.version, order)
        return made[3]

    def first_start(self, gpr_id: int) -> datetime | None:
        """The first start this service estimated for a queued GPR (for the estimate-error metric)."""
        return self._first_starts.get(gpr_id)

    def _reusable(self, now: datetime, any_age: bool = False) -> Planned | None:
        """The last plan, where it may be reused (module doc): ``any_age`` for arrivals. Its age counts
        from when it was last found current (``still_current``)."""
        if self._last is None or self.reuse_for is None:
            return None
        version, last = self._last
        if self._making is not None:
            return last  # while a plan is made aside, the last one serves until it is done
        fresh_enough = any_age or timedelta(0) <= now - self._current_at <= self.reuse_for
        return last if version == self._version and fresh_enough else None

    @property
    def last(self) -> Planned | None:
        """The last plan made."""
        return None if self._last is None else self._last[1]

    def still_current(self, now: datetime) -> bool:
        """Whether a plan made at ``now`` would be the last one: it saw every write of the planner's
        input, no arrival was placed on it since and none is being made (the reconcile pass checks
        that nothing the plan has happen is due first). Then it counts as made at ``now`` for reuse.
        Never while not watching a store."""
        if self.reuse_for is None or self._last is None or self._making is not None or self._arrivals:
            return False
        if self._last[0] != self._version or now < self._current_at:
            return False
        self._current_at = now
        return True

    def plan_now(self, session: Session, now: datetime, *, fresh: bool = False) -> Planned:
        """The plan as of ``now``: the last one where it may be reused unless ``fresh``, else one made
        on the caller's thread."""
        if not fresh and (last := self._reusable(now)) is not None:
            return last
        taken = self.take(session, now, fresh=fresh)
        return self.adopt(taken, self.decide(taken))

    async def current(self, sessions: sessionmaker[Session], now: datetime, *, any_age: bool = False) -> Planned:
        """``plan_now`` for the event loop: the last plan where it may be reused, else ``fresh``."""
        if (last := self._reusable(now, any_age)) is not None:
            return last
        return await self.fresh(sessions, now)

    async def fresh(self, sessions: sessionmaker[Session], now: datetime) -> Planned:
        """A plan whose snapshot saw every write committed before the call, made in a worker thread:
        the one being made when its snapshot was taken after them, else a new one once it is done."""
        wanted = self._version
        while self._making is not None:
            version, making = self._making
            planned = await asyncio.shield(making)
            if planned is not None and version >= wanted:
                return planned
        return await self._plan_aside(sessions, now)

    async def _plan_aside(self, sessions: sessionmaker[Session], now: datetime) -> Planned:
        """A fresh plan as of ``now``, made in a worker thread: the event loop serves requests
        from the last plan (and places arrivals on it) meanwhile. ``fresh`` calls it, so that one plan
        is made at a time."""
        with sessions() as session:
            taken = self.take(session, now, fresh=True)
        making: asyncio.Future[Planned | None] = asyncio.get_running_loop().create_future()
        self._making = (taken.version, making)
        planned: Planned | None = None
        collecting = gc.isenabled()
        gc.disable()  # see the module doc: no garbage collection in the worker thread
        try:
            try:
                made = await asyncio.to_thread(self.decide, taken)
                # The arrivals placed on the last plan meanwhile are placed on this one there too, and
                # those that came while they were, until a few are left: those are placed on the event
                # loop when it is adopted (a pass's worth of arrivals would hold the loop up).
                placed = taken.arrivals
                while len(self._arrivals) - placed > _FEW_ARRIVALS:
                    arrived = self._arrivals[placed:]
                    await asyncio.to_thread(self._place_on, made, arrived, taken.now)
                    placed += len(arrived)
            finally:
                self._making = None
                if collecting:
                    gc.enable()
            planned = self.adopt(taken, made)
        finally:
            making.set_result(planned)  # None: those who waited for it make their own
        return planned

    def take(self, session: Session, now: datetime, *, fresh: bool) -> Taken:
        """Step 1 of a plan: the snapshot, and where the store and the arrivals were."""
        if fresh and self.state.watching and self.state.loaded:
            self.state.refresh_usage(session, now)
        self._dropped = set()
        return Taken(self.snapshot(session, now), now, self._version, len(self._arrivals))

    def decide(self, taken: Taken) -> Plan:
        """Step 2, pure (any thread): plan the snapshot, and make the rewinds that arrivals and
        wait-time queries are placed on (Views.prepare)."""
        started = time.perf_counter()
        made = planner.plan(taken.snapshot, taken.now)
        made.views.prepare()
        self.pass_seconds = time.perf_counter() - started
        return made

    def adopt(self, taken: Taken, made: Plan) -> Planned:
        """Step 3: ``made`` becomes the last plan and its estimates the promises, less those dropped
        since the snapshot; the GPRs that arrived since are placed on it."""
        self._bands = {r.gpr_id: band(r.spec.priority) for r in taken.snapshot.queue}
        # Arrivals placed on it (not in its snapshot) are not promises yet: the next plan weighs them.
        self._promises = {i: e for i, e in made.estimates.items() if i in self._bands and i not in self._dropped}
        self._first_starts = {i: t for i, t in self._first_starts.items() if i in self._bands}
        for estimate in (*made.estimates.values(), *made.admits):
            if estimate.start is not None:
                self._first_starts.setdefault(estimate.gpr_id, estimate.start)
        self._note_broken(taken, made)
        planned = Planned(taken.snapshot, made, taken.now)
        later, self._arrivals = self._arrivals[taken.arrivals :], []
        self._last = (taken.version, planned)
        self._current_at = taken.now
        self._place(made, later, taken.now)
        return planned

    def _note_broken(self, taken: Taken, made: Plan) -> None:
        """Queue an ``estimate-moved`` event for each queued GPR whose estimate in ``made`` breaks the
        start it was told, with the cause the plans named last; it is told the new start."""
        queued = self._bands
        self._causes = {i: c for i, c in (*self._causes.items(), *made.moved.items()) if i in queued}
        self._told = {i: t for i, t in self._told.items() if i in queued}
        broken, retold = [], set()
        for gpr_id, estimate in made.estimates.items():
            if gpr_id not in queued or estimate.start is None:
                continue
            if gpr_id in self._retell:  # told afresh by the first plan made after its edit
                if gpr_id not in self._dropped:
                    self._told[gpr_id] = estimate.start
                    retold.add(gpr_id)
                continue
            told = self._told.get(gpr_id) or self._first_starts.get(gpr_id)
            if told is not None and promises.broken(told, estimate.start):
                broken.append((gpr_id, told, estimate.start))
                self._told[gpr_id] = estimate.start
        self._retell = {i for i in self._retell - retold if i in queued or i in self._dropped}
        if broken:
            slices = {r.gpr_id: r.spec.slice for r in taken.snapshot.queue}
            self._broken += [
                promises.moved_event(i, slices[i], told, start, self._causes.get(i, promises.UNRECORDED), taken.now)
                for i, told, start in broken
            ]

    def _place(self, current: Plan, gprs: list[core.GPR], now: datetime) -> None:
        """Place each arrival on ``current`` (``_place_on``), and count it placed on the last plan."""
        self._place_on(current, gprs, now)
        for gpr in gprs:
            estimate = current.estimates.get(gpr.id)
            if estimate is not None and estimate.start is not None:
                self._first_starts.setdefault(gpr.id, estimate.start)
            self._arrivals.append(gpr)

    def _place_on(self, current: Plan, gprs: list[core.GPR], now: datetime) -> None:
        """Place on ``current`` each arrival it has no estimate for that is still queued; one that cannot
        be placed is left without an estimate (the next plan pass leaves it out too, and the reconcile
        loop fails it: issue 25). In a worker thread only on a plan nobody else uses yet."""
        for gpr in gprs:
            if gpr.id not in current.estimates and self.state.is_queued(gpr.id):
                request = Request(gpr.id, gpr.spec, gpr.created_at, frozenset(gpr.avoid_nodes))
                try:
                    current.estimates[gpr.id] = planner.place_arrival(current, request, now)
                except Exception:
                    log.exception("GPR %s could not be placed on the plan; the next plan pass weighs it", gpr.id)

    def forget(self, gpr_ids: Iterable[int] = (), bands: Iterable[int] = ()) -> None:
        """Drop the promises of these GPRs and of every GPR in these bands, so the next
        plan orders them afresh (an admin changed a priority, an owner edited a GPR)."""
        named = set(gpr_ids)
        drop = set(named)
        bands = set(bands)
        drop.update(gpr_id for gpr_id, b in self._bands.items() if b in bands)
        for gpr_id in drop:
            self._promises.pop(gpr_id, None)
        self._retell |= named
        self._causes.update(dict.fromkeys(drop - named, promises.REORDERED))
        self._dropped |= drop
        self._version += 1


def position_key(estimate: Estimate | None, gpr_id: int) -> tuple[bool, int, int]:
    """Planner order: queue position (those without one last), then id."""
    position = None if estimate is None else estimate.position
    return (position is None, position or 0, gpr_id)


def factors(snapshot: Snapshot) -> dict[str, fairshare.TreeFactor]:
    """Each slice's tree factor (its project's, then its own), as the planner orders the snapshot's queue with."""
    return fairshare.tree_factors(snapshot.usage, snapshot.policies, snapshot.projects, snapshot.project_policies)


def slice_usage(session: Session, now: datetime, half_life: timedelta) -> dict[str, dict]:
    """Per slice: GPU-hours in the rolling week, decayed GPU-hours and fair-share factors (its project's
    and its own within the project)."""
    since = now - max(quota.WEEK, queries.USAGE_HALF_LIVES * half_life)
    uses = queries.gpu_uses(session, since, now)
    decayed = fairshare.decayed_usage(uses, now, half_life)
    rows = queries.all_slices(session)
    policies = {row.name: queries.slice_policy(row) for row in rows}
    projects = {row.name: row.project.name for row in rows}
    project_policies = {p.name: queries.to_project(p) for p in queries.all_projects(session)}
    made = fairshare.tree_factors(decayed, policies, projects, project_policies)
    return {
        name: {
            "gpu_hours_week": round(quota.week_gpu_hours(uses, name, now), 6),
            "decayed_gpu_hours": round(decayed.get(name, 0.0) / 3600, 6),
            "fair_share_factor": round(made[name][1], 6),
            "project_fair_share_factor": round(made[name][0], 6),
        }
        for name in policies
    }


def week_gpu_hours(session: Session, slices: str | list[str], now: datetime) -> float:
    """GPU-hours the slice (or the slices) used in the rolling week; running GPRs count up to now."""
    slices = [slices] if isinstance(slices, str) else slices
    uses = queries.gpu_uses(session, now - quota.WEEK, now, slices)
    return sum(quota.week_gpu_hours(uses, name, now) for name in slices)


def month_spend(session: Session, slices: str | list[str], now: datetime) -> float:
    """What the slice's (or the slices') GPRs reserved in this calendar month (UTC), at their prices."""
    slices = [slices] if isinstance(slices, str) else slices
    start = usage.period_start(now, "month")
    end = usage.next_period(start, "month")
    return cost.reserved_cost_between(queries.gprs_held_between(session, start, end, slices), start, end)


def estimated_cost(
    session: Session,
    nodes: Iterable[core.Node],
    spec: core.GPRSpec,
    gpus: int,
    cluster_projects: Mapping[str, str] = core.SHARED,
    project: str = core.DEFAULT_PROJECT,
) -> float | None:
    """What a GPR of ``spec`` (of a slice of ``project``) holding ``gpus`` GPUs would cost at the highest
    price among the shapes that could serve it (the planner picks the place); None when none has a price."""
    places = {(n.cluster, n.shape.name) for n in planner.eligible_nodes(nodes, spec, cluster_projects, project)}
    prices = queries.prices(session, {cluster for cluster, _ in places})
    known = [prices[place] for place in places if place in prices]
    return cost.estimated_cost(max(known), gpus, spec.duration) if known else None


# Eviction


def eviction_proposals(snapshot: Snapshot, plan: Plan, now: datetime, evicting: bool = False) -> tuple[Eviction, ...]:
    """The evictions of ``plan`` (the plan of ``snapshot``) worth acting on now.

    None while earlier victims are still being unbound (``evicting``): the planner counts
    their GPUs as held until they are back, so it would name more victims than needed;
    the pass after they are back plans again. Nor one whose GPR only waits for GPUs being
    released, or could start now on the GPUs no GPR holds: then what keeps it waiting is
    queued work, not the provisioned GPRs an eviction would end.
    """
    if evicting or not plan.evictions:
        return ()
    specs = {r.gpr_id: r.spec for r in snapshot.queue}
    held_only = dataclasses.replace(snapshot, queue=(), pending=(), previous={})
    proposals = []
    for eviction in plan.evictions:
        estimate = plan.estimates.get(eviction.gpr_id)
        if estimate is not None and estimate.start is not None and estimate.start <= now + planner.JUST_AFTER:
            continue
        spec = specs.get(eviction.gpr_id)
        if spec is not None and any(o.start <= now for o in planner.wait_times(held_only, spec, now)):
            continue
        proposals.append(eviction)
    return tuple(proposals)


def issue_eviction(session: Session, eviction: Eviction, actor: str, now: datetime, note: str = "") -> list[core.GPR]:
    """Begin releasing every victim, evicted for ``eviction.gpr_id``; one event each.

    Raises Conflict, changing nothing, when the GPR is no longer queued or a victim no
    longer holds GPUs. Runs inside the caller's transaction.
    """
    beneficiary = queries.get_gpr_row(session, eviction.gpr_id)
    if beneficiary is None or beneficiary.status != core.Status.QUEUED:
        raise Conflict(f"GPR {eviction.gpr_id} is no longer queued; nothing is evicted for it")
    rows = [queries.get_gpr_row(session, victim, lock=True) for victim in eviction.victims]
    for victim, row in zip(eviction.victims, rows, strict=True):
        if row is None or row.status not in (core.Status.PROVISIONING, core.Status.PROVISIONED):
            raise Conflict(f"GPR {victim} no longer holds GPUs; nothing is evicted")
    reason = (
        f"evicted for GPR {beneficiary.id} (priority {beneficiary.priority}, slice {beneficiary.slice}), "
        "which could not start otherwise" + (f"; {note}" if note else "")
    )
    evicted = []
    for row in rows:
        gpr, event = lifecycle.begin_release(queries.to_gpr(row), core.EndReason.EVICTED, actor, reason, now)
        event = dataclasses.replace(event, data={"for_gpr": beneficiary.id})
        evicted.append(queries.apply(session, row, (gpr, event)))
    return evicted
