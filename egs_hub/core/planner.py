"""The planner: ``plan(snapshot, now) -> Plan``: who gets which GPUs when.

Conservative backfill. Queued requests are planned in queue order (queue.py:
band, fair share, priority, submit time; or the multifactor order the snapshot's
``order`` names); each gets the earliest window in
which its GPUs are free for its whole duration, after everything ahead of it,
and what starts now is admitted. The same pass estimates every queued request,
so an estimate comes from the planner that will start it.

Estimates are kept. The snapshot carries the previous plan's estimates, its
*promises*: before a band is planned, each of its requests holds its promised
window, and gives it back only when its own turn comes, to take an earlier one
if there is one. A request that had no promise (it is new), or whose promise no
longer fits (capacity was lost, a higher band took it), takes its place in the
queue: it is planned without the promises of the requests behind it, and those
it displaces are planned afresh. So an estimate moves later only when
work arrives ahead of it in the queue (a higher band, or better fair share) or
capacity is lost; fair-share changes among waiting requests, early and idle
releases never move it later, and the next pass moves requests earlier into
what was released. Promises that came due and did not start (the service was
away, a pass came late) move every promise of their band, and of the bands
below, by as much as the latest of them where that drops fewer, rather than
let those behind them on their GPUs be dropped: a late start moves an estimate
by no more than it was late. A promise that no longer fits because what runs before
it on its GPUs ends a little later (a window the last plan admitted, written after
that plan's now) is held later on the same GPUs, by no more than the admitted windows
were written late and at most ``SLIP_S``, rather than dropped: dropped, a backfilled
request would lose its gap and wait for those ahead of it. Nothing else slips: a
promise held later than that would take the window a request behind it could have
had. The plan says why each promise was not held where it was (``Plan.moved``).

The wait-time query for a request not yet submitted answers from what the pass
leaves (``Views``): the start the next pass would give it, wherever it sorts in
its band, read off the band's timeline taken back to its place in the queue.

One GPR never stops planning (issue 25): when placing a queued request raises, the
pass is made again without it, and the plan names it in ``unplaced`` with the reason
(the service fails it). No window is planned to end after ``units.LATEST_TIME``: a
request that would need one is refused that way, so no time the planner computes can
overflow, whatever a stored GPR's ``start_after`` or ``duration`` is.

Also here: the baselines the simulator compares against (``easy``: only the
head of the queue holds a reservation; ``none``: strict order), and the
eviction that would let a blocked top of the queue start now. Pure: no I/O,
no clock, deterministic (``Views`` keeps what a query makes, for the next).
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from . import fairshare, sharing
from .model import DEFAULT_PROJECT, GPR, SHARED, GPRSpec, Node, serves
from .pool import Pool
from .profile import INF, end_of
from .queue import PriorityQueue, band
from .snapshot import Booking, Estimate, Eviction, Option, Placement, Plan, Request, Snapshot, Unplaced
from .timeline import Rewind, Timeline, Window, earliest_window
from .units import LATEST_TIME, format_duration, format_time

BACKFILL = ("conservative", "easy", "none")
BANDS = (2, 1, 0)

# A booking that is releasing, or whose window has passed, still holds its GPUs
# at ``now``; they are free for planning right after.
JUST_AFTER = timedelta(microseconds=1)
_JUST_AFTER_S = JUST_AFTER.total_seconds()
# A promise that no longer fits where it was, because what runs before it on its GPUs ends a
# little later (a window the service admitted after the plan's now: by a plan's time at most), is
# held as much later as the admitted windows were late, up to this many seconds (module doc).
SLIP_S = 5.0

# A promise is kept when its GPR starts no later than this after it (issue 21); a move later than
# that is a broken promise, and the service says why in the GPR's events.
KEPT_SLACK = timedelta(seconds=60)

# Why a promise was not held where it was (Plan.moved), by cause.
MOVED = {
    "capacity-lost": "the GPUs it was promised are gone, unhealthy or to be avoided",
    "taken": (
        "the GPUs it was promised are not free then (higher-priority work, maintenance, or a GPR holding them longer)"
    ),
    "late": "what runs before it on its GPUs started or ends later than planned",
    "overtaken": (
        "a GPR queued ahead of it that had no promise (a better fair share, or one that lost its own) took its window"
    ),
}


@dataclass(frozen=True)
class Views:
    """What a pass leaves for wait-time queries: per band, the timeline after that band
    and every band above it were planned (a request never waits for lower bands); the
    band's requests that got a window, with it, in queue order; and the key that ordered them."""

    now: datetime
    after_band: dict[int, Timeline]
    placed: Mapping[int, list[tuple[Request, Window]]]
    key: Callable[[Request], tuple] = field(repr=False, compare=False)  # the queue's order (queue.queue_key)
    rewinds: dict[int, Rewind] = field(default_factory=dict, repr=False, compare=False)  # made by queries

    def ahead(self, spec: GPRSpec, now: datetime, request: Request | None = None) -> int:
        """How many of the band's placed requests sort ahead of a request for ``spec``
        submitted ``now`` (``request``, once submitted), which gets a GPR id after theirs
        (queue.queue_key)."""
        key = self.key
        probe = key(request or Request(0, spec, now))[:-1]
        members = self.placed[band(spec.priority)]
        return bisect_right(members, probe, key=lambda m: key(m[0])[:-1])

    def prepare(self) -> None:
        """Make every band's rewind now: a plan made in a worker thread does, so that the first
        arrivals and wait-time queries on it do not."""
        for b, placed in self.placed.items():
            if placed:
                self.rewind(b)

    def rewind(self, b: int) -> Rewind:
        """Band ``b``'s timeline at any place in its queue order, made on the first query
        that needs it."""
        if b not in self.rewinds:
            self.rewinds[b] = Rewind(self.after_band[b], [window for _, window in self.placed[b]])
        return self.rewinds[b]


class TooLate(Exception):
    """A request's window would end after ``LATEST_TIME``: the planner does not place it."""


class _NotPlaced(Exception):
    """Placing the request ``gpr_id`` raised ``error``."""

    def __init__(self, gpr_id: int, error: Exception):
        super().__init__(gpr_id, error)
        self.gpr_id = gpr_id
        self.error = error


class _Placing:
    """``with _Placing(gpr_id):`` what placing that request raises becomes _NotPlaced naming it."""

    __slots__ = ("gpr_id",)

    def __init__(self, gpr_id: int):
        self.gpr_id = gpr_id

    def __enter__(self) -> None:
        return None

    def __exit__(self, _type, error, _traceback) -> None:
        if isinstance(error, Exception) and not isinstance(error, _NotPlaced):
            raise _NotPlaced(self.gpr_id, error) from error


def plan(snapshot: Snapshot, now: datetime, *, backfill: str = "conservative") -> Plan:
    """Windows to end, GPRs to admit now, an estimate for every queued GPR, and evictions.

    A queued request whose placing raises is left out: the pass is made again without it
    (so the plan is exactly the plan without it), and ``Plan.unplaced`` names it."""
    if backfill not in BACKFILL:
        raise ValueError(f"backfill must be one of {', '.join(BACKFILL)}, not {backfill!r}")
    unplaced: list[Unplaced] = []
    while True:
        try:
            return _plan_pass(snapshot, now, backfill, tuple(unplaced))
        except _NotPlaced as e:
            error = e.error
            if error.__traceback__ is not None:  # keep the traceback's lines, not the pass it held
                traceback.clear_frames(error.__traceback__)
            reason = str(error) if isinstance(error, TooLate) else f"{type(error).__name__}: {error}"
            unplaced.append(Unplaced(e.gpr_id, reason, error))
            queue = tuple(r for r in snapshot.queue if r.gpr_id != e.gpr_id)
            snapshot = dataclasses.replace(snapshot, queue=queue)


def _plan_pass(snapshot: Snapshot, now: datetime, backfill: str, unplaced: tuple[Unplaced, ...]) -> Plan:
    """One pass over the snapshot; _NotPlaced when placing one of its requests raises."""
    state = _Pass(snapshot, now)
    ends = tuple(
        b.gpr_id for b in sorted(snapshot.bookings, key=lambda b: (b.end, b.gpr_id)) if not b.releasing and b.end <= now
    )
    if backfill == "conservative":
        state.conservative()
    elif backfill == "easy":
        state.easy()
    else:
        state.strict()
    admits = tuple(e for e in state.estimates.values() if e.start == now)
    approvals = tuple(r.gpr_id for r in sorted(snapshot.pending, key=state.key))
    try:
        evictions = state.evictions() if backfill == "conservative" else ()
    except Exception as e:  # weighed for the top of the queue alone
        raise _NotPlaced(state.queue[0].gpr_id, e) from e
    return Plan(
        admits=admits,
        ends=ends,
        estimates=state.estimates,
        approvals=approvals,
        evictions=evictions,
        unplaced=unplaced,
        moved=state.moved,
        views=Views(now, state.after_band, state.placed, state.key),
    )


def window_times(base: datetime, start: float, spec: GPRSpec) -> tuple[datetime, datetime]:
    """A window for ``spec`` starting ``start`` seconds after ``base``, as times. TooLate
    when it would end after LATEST_TIME: no time is computed past it, so none overflows."""
    if start + spec.duration.total_seconds() > (LATEST_TIME - base).total_seconds():
        asked = f"duration {format_duration(spec.duration)}"
        if spec.start_after is not None:
            asked = f"start_after {format_time(spec.start_after)}, {asked}"
        raise TooLate(f"its window would end after {format_time(LATEST_TIME)}, the latest time planned ({asked})")
    begins = base + timedelta(seconds=start)
    return begins, begins + spec.duration


def _promised(estimate: Estimate) -> tuple[datetime, datetime]:
    """The start and end of an estimate given as a promise (_Pass._promise: one with a start)."""
    if estimate.start is None or estimate.end is None:
        raise ValueError(f"the estimate of GPR {estimate.gpr_id} is no promise: it has no start")
    return estimate.start, estimate.end


def wait_times(snapshot: Snapshot, spec: GPRSpec, now: datetime, *, current: Plan | None = None) -> list[Option]:
    """When a request for ``spec`` submitted now would start, on every (cluster, shape)
    that could serve it: the start the next plan gives it when it joins the queue of
    ``current`` (the plan of ``snapshot``, computed when not given), whose estimates are
    then the promises.

    It waits for the bands above and for the requests of its band ahead of it, not for
    those behind it (it has a better fair share, or a higher priority): the next plan
    lets a new request take windows promised to the requests behind it. So it is asked
    on its band's timeline without their windows (the first such query on a band of a
    plan makes that band's ``Rewind``)."""
    current = current or plan(snapshot, now)
    base = current.views.now
    options = []
    for window in _arrival_windows(current.views, spec, now)[1]:
        start, _ = window_times(base, window.start, spec)
        options.append(Option(window.pool.cluster, window.pool.shape, start, start - now, _placement(window, ())))
    return sorted(options, key=lambda o: (o.start, o.cluster, o.shape.name))


def place_arrival(current: Plan, request: Request, now: datetime) -> Estimate:
    """Place a request just submitted into ``current`` (a plan whose queue did not have it),
    as the next plan would if nothing else changed: the earliest of its ``wait_times``
    options. Its window is put on ``current``'s views (its band's timeline and every lower
    band's), so the next arrival and query wait for it. Its position counts the placed
    requests ahead of it. A request it displaced (planned behind it, in its band or a
    lower one, on GPUs it now takes) keeps its estimate and position until the next pass
    plans it again."""
    views = current.views
    spec = request.spec
    place, windows = _arrival_windows(views, spec, now, request)
    b = band(spec.priority)
    position = sum(len(views.placed[higher]) for higher in BANDS if higher > b) + place + 1
    if not windows:
        return Estimate(request.gpr_id, position, None, None, None)
    best = min(windows, key=lambda w: (w.start, w.pool.cluster, w.pool.shape.name))
    start, end = window_times(views.now, best.start, spec)
    held = views.after_band[b].translate(best)
    views.placed[b].insert(place, (request, held))
    timelines = {id(views.after_band[lower]): views.after_band[lower] for lower in BANDS if lower <= b}
    for timeline in timelines.values():
        later: set = set()
        timeline.put(timeline.translate(held), 1, later)
        Pool.summarize(later)
    for lower, rewind in views.rewinds.items():
        if lower <= b:
            rewind.arrived(place if lower == b else -1, held)
    return Estimate(request.gpr_id, position, start, end, _placement(held, ()))


def replacement(
    current: Plan, snapshot: Snapshot, gpr: GPR, failed: tuple[str, str], count: int, now: datetime
) -> Placement | None:
    """Where ``count`` GPUs would replace those the provisioned ``gpr`` holds on node ``failed``
    ((cluster, name)) until its window ends: on one healthy node of that cluster and shape that the GPR
    does not hold and that no one is planned on before the window ends (``current``'s timeline after
    every band, so no estimate moves), free now; a whole-node GPR takes a whole node. None: no node is.
    ``current`` is the plan of ``snapshot``."""
    views = current.views
    timeline = views.after_band[min(BANDS)]
    where = timeline.where.get(failed)
    if where is None or gpr.window_end is None or gpr.window_end <= now:
        return None
    pool = where[0]
    lower = max(0.0, (now - views.now).total_seconds())
    duration = (gpr.window_end - now).total_seconds()
    held = frozenset((failed[0], name) for name in gpr.bound_nodes) | {failed}
    gpus, nodes = (None, 1) if gpr.spec.nodes is not None else (count, None)
    with _avoiding(timeline, held):
        window = earliest_window(None, gpr.spec.slice, pool, gpus, nodes, duration, lower, lower + _JUST_AFTER_S)
    if window is None:
        return None
    bound = {g for b in snapshot.bookings for g in b.gpus} | snapshot.unhealthy_gpus
    ((i, _),) = window.picks
    free = [g for g in pool.nodes[i].gpus if g not in bound][:count]
    return _placement(window, tuple(free)) if len(free) == count else None


def _arrival_windows(views: Views, spec: GPRSpec, now: datetime, request: Request | None = None) -> tuple[int, list]:
    """A request for ``spec`` submitted ``now`` (``request``, once it has its GPR id): its
    place among its band's placed requests, and its earliest window on each pool that could
    serve it, on its band's timeline without the windows of those behind it; none that ends
    after LATEST_TIME."""
    b = band(spec.priority)
    timeline = views.after_band[b]
    base = views.now
    lower = max(0.0, (spec.start_after - base).total_seconds()) if spec.start_after else 0.0
    lower = max(lower, (now - base).total_seconds())
    duration = spec.duration.total_seconds()
    place = views.ahead(spec, now, request)
    pools = _eligible_pools(timeline, spec)
    if place < len(views.placed[b]):  # some of its band sort behind it
        rewind = views.rewind(b)
        use, pools = rewind.use(spec.slice, place), [rewind.pool(p, place) for p in pools]
    else:
        use = timeline.use(spec.slice)
    windows = [earliest_window(use, spec.slice, pool, spec.gpus, spec.nodes, duration, lower) for pool in pools]
    latest = (LATEST_TIME - base).total_seconds()
    return place, [w for w in windows if w is not None and w.end <= latest]


def eligible_nodes(
    nodes: Iterable[Node], spec: GPRSpec, cluster_projects: Mapping[str, str] = SHARED, project: str = DEFAULT_PROJECT
) -> list[Node]:
    """Nodes of the cluster and shape the spec allows, on clusters that serve the slice's ``project``
    (``cluster_projects``: core.model.serves), that accept new work."""
    return sorted(
        (
            n
            for n in nodes
            if n.schedulable
            and (spec.cluster is None or n.cluster == spec.cluster)
            and n.shape.serves(spec.shape, spec.gpu_share)
            and serves(cluster_projects, n.cluster, project)
        ),
        key=lambda n: n.key,
    )


def gpu_count(
    spec: GPRSpec, nodes: Iterable[Node], cluster_projects: Mapping[str, str] = SHARED, project: str = DEFAULT_PROJECT
) -> int:
    """GPUs the spec holds: ``gpus``, or ``nodes`` times the largest node it may get."""
    if spec.gpus is not None:
        return spec.gpus
    per_node = max((n.shape.gpus_per_node for n in eligible_nodes(nodes, spec, cluster_projects, project)), default=0)
    return (spec.nodes or 0) * per_node


def unit_equivalents(
    spec: GPRSpec, nodes: Iterable[Node], cluster_projects: Mapping[str, str] = SHARED, project: str = DEFAULT_PROJECT
) -> float:
    """What one unit the spec holds counts as in quotas: 1 for a GPU, a MIG instance's share of its
    GPU (the spec's shape names the profile, so every node it may get has the same; sharing.py)."""
    eligible = eligible_nodes(nodes, spec, cluster_projects, project)
    shape = eligible[0].shape if eligible else None
    return 1.0 if shape is None else float(shape.equivalents)


def unservable_reason(
    spec: GPRSpec,
    nodes: tuple[Node, ...],
    unhealthy: frozenset[str],
    cluster_projects: Mapping[str, str] = SHARED,
    project: str = DEFAULT_PROJECT,
) -> str | None:
    """Why no amount of waiting serves ``spec`` here (on the clusters that serve ``project``); None when
    it can be served."""
    candidates = eligible_nodes(nodes, spec, cluster_projects, project)
    where = f"shape {spec.shape!r}" if spec.shape else "any shape"
    if spec.gpu_share is not None:
        where = f"a {spec.gpu_share:g} share of a time-sliced GPU" + (f" of {where}" if spec.shape else "")
    where += f" in cluster {spec.cluster!r}" if spec.cluster else ""
    if not candidates:
        if cluster_projects and eligible_nodes(nodes, spec):
            return f"no schedulable node offers {where} on the clusters of project {project!r} or shared ones"
        return f"no schedulable node offers {where}"
    empty = Timeline(tuple(candidates), unhealthy, {}, 0)
    duration = spec.duration.total_seconds()
    if all(pool.earliest(pool.need(spec.gpus, spec.nodes), duration, 0.0) is None for pool in empty.pools):
        units = "GPUs" if sharing.requested_profile(spec.shape) is None else "MIG instances"
        asked = f"{spec.gpus} {units}" if spec.gpus is not None else f"{spec.nodes} whole nodes"
        largest = max(n.shape.gpus_per_node for n in candidates)
        unusable = sum(g in unhealthy for n in candidates for g in n.gpus)
        return (
            f"{asked} of {where} cannot be placed: the inventory has {len(candidates)} such "
            f"node(s) with up to {largest} {units} each"
            + (f", and {unusable} of their {units} are unhealthy or on quarantined nodes" if unusable else "")
        )
    return None


def _eligible_pools(timeline: Timeline, spec: GPRSpec) -> list[Pool]:
    pools = [
        p
        for p in timeline.pools
        if (spec.cluster is None or p.cluster == spec.cluster) and p.shape.serves(spec.shape, spec.gpu_share)
    ]
    if not timeline.cluster_projects:
        return pools
    project = timeline.project(spec.slice)
    return [p for p in pools if serves(timeline.cluster_projects, p.cluster, project)]


def _soonest(
    timeline: Timeline,
    spec: GPRSpec,
    pools: Iterable[Pool],
    lower: float,
    upper: float = INF,
    node: int | None = None,
) -> Window | None:
    """The earliest window for ``spec`` from ``lower`` on and before ``upper``, on the first
    of ``pools`` where it starts soonest (or on their ``node``)."""
    duration = spec.duration.total_seconds()
    best = None
    for pool in pools:
        window = timeline.earliest(spec.slice, pool, spec.gpus, spec.nodes, duration, lower, upper, node)
        if window is not None:
            best, upper = window, window.start
    return best


@contextmanager
def _avoiding(timeline: Timeline, avoid: frozenset[tuple[str, str]]) -> Iterator[None]:
    """While inside, the ``avoid`` nodes have no GPU free at any time on ``timeline``; after,
    their profiles are exactly what they were."""
    where = [timeline.where[key] for key in avoid if key in timeline.where]
    later: set = set()
    for pool, i in where:
        pool.reserve(((i, pool.capacity[i]),), 0.0, INF, 1, later)
    Pool.summarize(later)
    try:
        yield
    finally:
        for pool, i in where:
            pool.reserve(((i, pool.capacity[i]),), 0.0, INF, -1, later)
        Pool.summarize(later)


def _placement(window: Window, gpus: tuple[str, ...]) -> Placement:
    pool = window.pool
    return Placement(
        cluster=pool.cluster,
        shape=pool.shape,
        nodes=tuple(pool.nodes[i].name for i, _ in window.picks),
        gpus=gpus,
        count=window.gpus,
    )


class _Pass:
    """One planning pass over a snapshot: the timeline and the estimates it builds."""

    def __init__(self, snapshot: Snapshot, now: datetime):
        self.snapshot = snapshot
        self.now = now
        queue = self._queue()
        self.key = queue.key
        self.queue = list(queue)
        self.timeline = self._empty_timeline()
        self.bound = {g for b in snapshot.bookings for g in b.gpus}
        self.booked: dict[int, list[Window]] = {}
        later: set = set()
        self._book_all(later)
        self._close_unavailable(self.timeline, later)
        Pool.summarize(later)
        self.estimates: dict[int, Estimate] = {}
        self.after_band: dict[int, Timeline] = {}
        self.placed: dict[int, list[tuple[Request, Window]]] = {b: [] for b in BANDS}
        self.free_now: dict[tuple[str, str], list[str]] = {}
        self.late = 0.0  # how late the latest promise of the bands planned so far starts
        self.slip = self._admitted_late()
        self.moved: dict[int, str] = {}  # Plan.moved
        self._pools: dict[tuple[str | None, str | None, float | None, str | None], list[Pool]] = {}

    def _queue(self) -> PriorityQueue:
        """The snapshot's queue in its order. A request for whole nodes counts the GPUs it would hold,
        found once per spec: the key is also what wait-time queries sort by (Views.ahead)."""
        s = self.snapshot
        factors = fairshare.tree_factors(s.usage, s.policies, s.projects, s.project_policies)
        sizes: dict[GPRSpec, int] = {}

        def gpus(spec: GPRSpec) -> int:
            if spec not in sizes:
                sizes[spec] = gpu_count(spec, s.nodes, s.cluster_projects, s.projects.get(spec.slice, DEFAULT_PROJECT))
            return sizes[spec]

        return PriorityQueue(s.queue, factors, s.order, gpus)

    def _admitted_late(self) -> float:
        """How much later than the previous plan said the windows it admitted were written (the
        service writes a window when it admits it, after the plan's now), up to ``SLIP_S``: the
        promises after them on their GPUs may be held that much later (``_slipped``)."""
        previous = self.snapshot.previous
        late = 0.0
        for booking in self.snapshot.bookings:
            estimate = previous.get(booking.gpr_id)
            if estimate is not None and estimate.start is not None:
                late = max(late, (booking.start - estimate.start).total_seconds())
        return min(late, SLIP_S)

    def _empty_timeline(self) -> Timeline:
        s = self.snapshot
        gprs = len(s.bookings) + len(s.queue) + 1
        return Timeline(s.nodes, s.unhealthy_gpus, s.policies, gprs, s.cluster_projects, s.projects)

    def _bookings_only(self) -> Timeline:
        """A timeline with the bookings and nothing planned: where evictions are weighed.
        Built only when an eviction is weighed, so that no pass pays for a copy."""
        timeline = self._empty_timeline()
        later: set = set()
        for booking in self.snapshot.bookings:
            self._unbook(timeline, booking, 1, later)
        self._close_unavailable(timeline, later)
        Pool.summarize(later)
        return timeline

    def _close_unavailable(self, timeline: Timeline, later: set) -> None:
        """Take every GPU of a node under maintenance over its window, so nothing is planned across it
        (a window already held across it overlaps: the node is overcommitted there, and nothing more fits);
        and of a pool's node that has not joined until it joins (core/node_pools.py), so none starts now."""
        snapshot = self.snapshot
        closed = [(m.cluster, m.node, max(self.seconds(m.start), 0), self.seconds(m.end)) for m in snapshot.maintenance]
        closed += [
            (n.cluster, n.name, 0.0, max(self.seconds(n.joins_at), _JUST_AFTER_S))
            for n in snapshot.nodes
            if n.joins_at is not None
        ]
        for cluster, node, start, end in closed:
            where = timeline.where.get((cluster, node))
            if where is not None and end > start:
                pool, i = where
                pool.reserve(((i, pool.capacity[i]),), start, end, 1, later)

    def seconds(self, when: datetime) -> float:
        return (when - self.now).total_seconds()

    def _book_all(self, later: set) -> None:
        """Put every booking on the fresh timeline: its windows (``booked``), each node's profile
        changed once for all the bookings on it (Profile.add_many), and its slice's use."""
        timeline = self.timeline
        place_of = {g: (pool, i) for pool in timeline.pools for i, node in enumerate(pool.nodes) for g in node.gpus}
        changes: dict[tuple[Pool, int], list[tuple[float, float, int]]] = defaultdict(list)
        for booking in self.snapshot.bookings:
            end = self._held_until(booking)
            counts: dict[tuple[Pool, int] | None, int] = {}
            for place in map(place_of.get, booking.gpus):
                counts[place] = counts.get(place, 0) + 1
            on: dict[Pool, list[tuple[int, int]]] = {}
            for place, gpus in counts.items():
                if place is not None:  # None: GPUs of nodes the planner does not use (they count in _use)
                    pool, i = place
                    on.setdefault(pool, []).append((i, gpus))
                    changes[place].append((0.0, end, -pool.taken(i, gpus)))
            windows = [Window(booking.slice, pool, tuple(sorted(picks)), 0.0, end) for pool, picks in on.items()]
            self.booked[booking.gpr_id] = windows
            self._use(timeline, booking, windows, 1)
        for (pool, i), node_changes in changes.items():
            pool.profiles[i].add_many(node_changes)
            later.add((pool, i))

    def _held_until(self, booking: Booking) -> float:
        """When a booking's GPUs are free for planning: just after now when it is releasing
        or its window has passed, else at its window's end."""
        return _JUST_AFTER_S if booking.releasing else max(self.seconds(booking.end), _JUST_AFTER_S)

    # Planning a request

    def pools(self, spec: GPRSpec, on: Timeline | None = None) -> list[Pool]:
        """The spec's pools on the pass's timeline (cached), or on ``on``."""
        if on is not None:
            return _eligible_pools(on, spec)
        project = self.timeline.project(spec.slice) if self.timeline.cluster_projects else None
        key = (spec.cluster, spec.shape, spec.gpu_share, project)
        if key not in self._pools:
            self._pools[key] = _eligible_pools(self.timeline, spec)
        return self._pools[key]

    def earliest(
        self,
        request: Request,
        floor: float = 0.0,
        upper: float = INF,
        *,
        only: Pool | None = None,
        node: int | None = None,
        on: Timeline | None = None,
    ) -> Window | None:
        """The earliest window for the request from ``floor`` on and before ``upper``, on the
        first of its pools where the earliest start is (or on pool ``only``, or its ``node``),
        on the pass's timeline or ``on``."""
        spec = request.spec
        lower = max(floor, self.seconds(spec.start_after) if spec.start_after else 0.0)
        timeline = on or self.timeline
        pools = self.pools(spec, on) if only is None else (only,)
        with _avoiding(timeline, request.avoid) if request.avoid else nullcontext():
            return _soonest(timeline, spec, pools, lower, upper, node)

    def place(self, request: Request, position: int, window: Window | None, *, put: bool = True) -> None:
        """Put ``window`` on the timeline (unless it is held there already) and record the
        request's estimate (None: unservable)."""
        if window is None:
            self.estimates[request.gpr_id] = Estimate(request.gpr_id, position, None, None, None)
            return
        start, end = window_times(self.now, window.start, request.spec)
        if put:
            self.timeline.put(window)
        gpus = self._gpus_now(window) if window.start == 0.0 else ()
        self.estimates[request.gpr_id] = Estimate(request.gpr_id, position, start, end, _placement(window, gpus))

    def _gpus_now(self, window: Window) -> tuple[str, ...]:
        """Exact GPUs for a window starting now: free, healthy, not given to another admit."""
        chosen = []
        for i, count in window.picks:
            node = window.pool.nodes[i]
            free = self.free_now.get(node.key)
            if free is None:
                unusable = self.snapshot.unhealthy_gpus
                free = self.free_now[node.key] = [g for g in node.gpus if g not in self.bound and g not in unusable]
            chosen += free[:count]
            del free[:count]
        return tuple(chosen)

    # The three ways to plan

    def conservative(self) -> None:
        by_band: dict[int, list[tuple[int, Request]]] = {b: [] for b in BANDS}
        for position, request in enumerate(self.queue, start=1):
            by_band[band(request.spec.priority)].append((position, request))
        for b in BANDS:
            members = by_band[b]
            # A request without a promise (new, or not planned before) takes its place in the
            # queue: it may take windows promised to requests behind it. While one is ahead of
            # a promised request, the band is also planned on a timeline without the promises
            # of the requests behind; after capacity was lost, for the rest of the band.
            promised = [self._promise(r) is not None for _, r in members]
            last_promised = max((k for k, p in enumerate(promised) if p), default=-1)
            last_ahead = max((k for k, p in enumerate(promised) if not p and k < last_promised), default=-1)
            open_ = self.timeline.copy() if last_ahead >= 0 else None
            holds = self._hold_promises([r for _, r in members])
            # A promise that no longer fits is dropped: its request takes its place in the queue
            # as a new one does, ahead of the promises held behind it.
            kept_promise = [r.gpr_id in holds for _, r in members]
            last_held = max((k for k, h in enumerate(kept_promise) if h), default=-1)
            dropped = max(
                (k for k, p in enumerate(promised) if p and not kept_promise[k] and k < last_held), default=-1
            )
            lost = dropped >= 0
            self._why_moved([r for _, r in members], holds)
            if dropped > last_ahead:
                open_ = open_ or self._without(holds.values())
                last_ahead = dropped
            overtaken = False
            for k, (position, request) in enumerate(members):
                with _Placing(request.gpr_id):
                    held = holds.pop(request.gpr_id, None)
                    kept: Window | None = None  # the promise held as it was
                    if held is None:  # no promise, or one that no longer fits
                        window = self._in_order(request, open_) if promised[k] else self.earliest(request, on=open_)
                        overtaken = overtaken or (open_ is not None and window is not None)
                    elif overtaken:
                        window = self._keep_or_replan(request, held, open_ if lost else None)
                        if window is None or window.start > held.start:
                            self.moved[request.gpr_id] = "overtaken"
                    else:
                        earlier = self._earlier_than_promise(request, held)
                        window, kept = earlier or held, None if earlier else held
                    if open_ is not None and window is not None:
                        open_.put(open_.translate(window))
                        window = self.timeline.translate(window)
                    if kept is not None:
                        self._keep(request, position, kept)
                    else:
                        self.place(request, position, window)
                    if window is not None:  # the window it has on the timeline (``held``, kept)
                        self.placed[b].append((request, window))
                if k == last_ahead and not (lost and overtaken):
                    open_ = None
            later = any(by_band[lower] for lower in BANDS if lower < b)
            self.after_band[b] = self.timeline.copy() if later else self.timeline

    def _why_moved(self, requests: list[Request], holds: Mapping[int, Window]) -> None:
        """Note the cause of each promise of ``requests`` not held where it was (``holds``): dropped
        because its GPUs are gone or are not free then, or held later (late starts before it)."""
        for request in requests:
            promise = self._promise(request)
            if promise is None:
                continue
            held = holds.get(request.gpr_id)
            if held is None:
                gone = self._promised_window(request, promise, 0.0) is None
                self.moved[request.gpr_id] = "capacity-lost" if gone else "taken"
            elif held.start > max(0.0, self.seconds(_promised(promise)[0])) + _JUST_AFTER_S:
                self.moved[request.gpr_id] = "late"

    def _without(self, holds: Iterable[Window]) -> Timeline:
        """A copy of the timeline with the ``holds`` (on it) taken off."""
        open_ = self.timeline.copy()
        for window in holds:
            open_.put(open_.translate(window), -1)
        return open_

    def _keep(self, request: Request, position: int, held: Window) -> None:
        """The request keeps its promised window (held on the timeline): its estimate is the
        promise itself when nothing about it changed, as most are on most passes."""
        promise = self.snapshot.previous[request.gpr_id]
        start, end = _promised(promise)
        same = self.seconds(start) == held.start and end - start == request.spec.duration
        if same and held.start > 0.0 and promise.position == position:  # starting now, it needs exact GPUs
            self.estimates[request.gpr_id] = promise
        else:
            self.place(request, position, held, put=False)

    def _keep_or_replan(self, request: Request, held: Window, open_: Timeline | None) -> Window | None:
        """After a request without a promise went ahead of it: the request keeps its promise
        if it still fits (or moves earlier), else it is planned afresh. After capacity was
        lost (``open_``: the timeline without the promises of those behind it) it takes its
        place in the queue again, so the loss falls on the queue in order: it never lands
        behind the promises of requests queued after it. After an arrival went ahead, it is
        planned behind every promise: nobody else's moves. Leaves its promise given back."""
        self.timeline.put(held, -1)
        if self.timeline.fits(held):
            return self.earliest(request, upper=held.start) or held
        return self._in_order(request, open_)

    def _in_order(self, request: Request, open_: Timeline | None) -> Window | None:
        """A request that lost its promise takes its place in the queue: its earliest window on
        ``open_`` (without the promises of the requests behind it; None: on the timeline).
        When a window as early takes no promised window, that one: nobody else's promise moves."""
        window = self.earliest(request, on=open_)
        if window is None or open_ is None:
            return window
        return self.earliest(request, upper=math.nextafter(window.start, INF)) or window

    def _earlier_than_promise(self, request: Request, held: Window) -> Window | None:
        """The earliest window that starts before the request's promise ``held``, searched as
        if the promise were given back (it is, when one is found); None when none does.

        Most promises are kept, so a one-node promise is given back only on its node's
        profile and its slice's use while they are searched, and keeping it costs nothing."""
        if held.start == 0.0:
            return None
        if len(held.picks) > 1:
            self.timeline.put(held, -1)
            window = self.earliest(request, upper=held.start)
            if window is None:
                self.timeline.put(held)
            return window
        (i, gpus), profile = held.picks[0], held.pool.profiles[held.picks[0][0]]
        taken = held.pool.taken(i, gpus)
        use = self.timeline.use(held.slice)
        if use is not None:
            use.add(held.start, held.end, held.parts, -1)
        window = self.earliest(request, upper=held.start)  # its own node still holds the promise
        profile.add(held.start, held.end, taken)
        upper = held.start if window is None else window.start
        if window is not None and self.late:
            # Held later after a late start, it goes back to its own node where as early there: moved
            # off it, it would take a window that the promises of the bands below were planned around.
            upper = math.nextafter(upper, INF)
        own = self.earliest(request, upper=upper, only=held.pool, node=i)
        profile.add(held.start, held.end, -taken)
        if use is not None:
            use.add(held.start, held.end, held.parts, 1)
        window = own or window
        if window is not None:
            self.timeline.put(held, -1)
        return window

    def _hold_promises(self, requests: list[Request]) -> dict[int, Window]:
        """Put each request's promised window back on the timeline, earliest first; a
        promise that no longer fits (capacity lost, higher band arrived) is dropped.

        Promises due before now that did not start (the service was away, or a pass came
        late) start late and end late, so those after them on their GPUs may no longer fit.
        Then every promise of the band is held that much later, when that drops fewer: a
        late start moves each promise by no more than it was late (each moves earlier at its
        turn where it can), where dropping them would let one ahead in the queue take the
        window of one behind it and move that one by a whole window. The bands below were
        planned around this band's windows, the late ones too: their promises are held at
        least as much later."""
        promised = sorted(
            ((e, r) for e, r in ((self._promise(r), r) for r in requests) if e is not None),
            key=lambda er: (er[0].start, er[1].gpr_id),
        )
        holds = self._hold(promised, 0.0)
        late = self.late = max(self.late, max((-self.seconds(_promised(e)[0]) for e, _ in promised), default=0.0))
        if late <= 0.0 or len(holds) == len(promised):
            return holds
        self._put(holds, -1)
        shifted = self._hold(promised, late)
        if len(shifted) > len(holds):
            return shifted
        self._put(shifted, -1)
        self._put(holds, 1)
        return holds

    def _put(self, holds: dict[int, Window], sign: int) -> None:
        """Put the ``holds`` back on the timeline (1), or take them off (-1)."""
        later: set = set()
        for window in holds.values():
            self.timeline.put(window, sign, later=later)
        Pool.summarize(later)

    def _hold(self, promised: list[tuple[Estimate, Request]], shift: float) -> dict[int, Window]:
        """Hold each promise ``shift`` seconds later, earliest first, where it fits."""
        holds: dict[int, Window] = {}
        later: set = set()
        for estimate, request in promised:
            with _Placing(request.gpr_id):
                window = self._promised_window(request, estimate, shift)
                if window is not None and (shift or window.start < _JUST_AFTER_S) and not self.timeline.fits(window):
                    # Due now, on GPUs whose window ended at this instant: they are free just after.
                    # The hold keeps its end, so a promise that follows it right away still fits.
                    # Such a hold is a microsecond shorter than its request's estimate, and the promise
                    # planned after it starts that microsecond early: held later, it is likewise.
                    start = end_of(window.start, _JUST_AFTER_S)
                    window = Window(window.slice, window.pool, window.picks, start, window.end)
                if window is not None and not self.timeline.fits(window):
                    window = self._slipped(window) if self.slip else None
                if window is not None:
                    self.timeline.put(window, later=later)
                    holds[request.gpr_id] = window
        Pool.summarize(later)
        return holds

    def _slipped(self, window: Window) -> Window | None:
        """``window`` on the same GPUs at its earliest start up to ``slip`` later where it fits
        (its GPUs free, its slice's limits kept); None when there is none."""
        duration = window.end - window.start
        use = self.timeline.use(window.slice)
        profiles = window.pool.profiles
        t, limit = window.start, window.start + self.slip
        while t <= limit:
            starts = [profiles[i].earliest_at_least(gpus, duration, t) for i, gpus in window.picks]
            if use is not None:
                starts.append(use.earliest(window.gpus, duration, t))
            latest = max(starts)
            if latest == t:
                return Window(window.slice, window.pool, window.picks, t, end_of(t, duration))
            t = latest
        return None

    def _promise(self, request: Request) -> Estimate | None:
        """The previous plan's estimate for the request, when it gave a start and a place."""
        estimate = self.snapshot.previous.get(request.gpr_id)
        if estimate is None or estimate.start is None or estimate.placement is None:
            return None
        return estimate

    def _promised_window(self, request: Request, estimate: Estimate, shift: float) -> Window | None:
        spec, placement, promised_start = request.spec, estimate.placement, estimate.start
        if placement is None or promised_start is None:  # not a promise (_promise)
            return None
        if any((placement.cluster, name) in request.avoid for name in placement.nodes):
            return None
        found = [self.timeline.where.get((placement.cluster, name)) for name in placement.nodes]
        where = [w for w in found if w is not None]
        if not where or len(where) != len(found) or len({id(w[0]) for w in where}) != 1:
            return None
        pool = where[0][0]
        if pool not in self.pools(spec):
            return None
        count, full, last = pool.need(spec.gpus, spec.nodes)
        if count != len(where):
            return None
        start = max(0.0, end_of(self.seconds(promised_start), shift))
        if spec.start_after is not None and start < self.seconds(spec.start_after):
            return None
        picks = (*((i, full) for _, i in where[:-1]), (where[-1][1], last))
        return Window(spec.slice, pool, picks, start, end_of(start, spec.duration.total_seconds()))

    def easy(self) -> None:
        """EASY backfill: the first request that cannot start now holds a reservation; the
        others start now if they fit without delaying it. Their estimates are where they
        would go after that, in queue order (as a showstart would say)."""
        head_reserved = False
        waiting = []
        for position, request in enumerate(self.queue, start=1):
            with _Placing(request.gpr_id):
                window = self.earliest(request)
                if window is None or window.start == 0.0 or not head_reserved:
                    self.place(request, position, window)
                    head_reserved = head_reserved or (window is not None and window.start > 0.0)
                else:
                    waiting.append((position, request))
        for position, request in waiting:
            with _Placing(request.gpr_id):
                self.place(request, position, self.earliest(request, floor=_JUST_AFTER_S))
        self.after_band = dict.fromkeys(BANDS, self.timeline)

    def strict(self) -> None:
        """Strict order, no backfill: nobody starts before the request ahead of it."""
        floor = 0.0
        for position, request in enumerate(self.queue, start=1):
            with _Placing(request.gpr_id):
                window = self.earliest(request, floor)
                self.place(request, position, window)
            if window is not None:
                floor = window.start
        self.after_band = dict.fromkeys(BANDS, self.timeline)

    # Eviction

    def evictions(self) -> tuple[Eviction, ...]:
        """For the top of the queue, blocked now: the fewest preemptible lower-priority
        provisioned GPRs (lowest priority first, then least time left) whose end lets it
        start now, as the slice's eviction policy says (none when it is "off")."""
        if not self.queue:
            return ()
        top = self.queue[0]
        estimate = self.estimates[top.gpr_id]
        policy = self.snapshot.policies.get(top.spec.slice)
        if estimate.start == self.now or policy is None or policy.eviction == "off":
            return ()
        if top.spec.start_after is not None and top.spec.start_after > self.now:
            return ()
        candidates = sorted(
            (
                b
                for b in self.snapshot.bookings
                if b.preemptible and not b.releasing and b.priority < top.spec.priority and b.end > self.now
            ),
            key=lambda b: (b.priority, b.end, b.gpr_id),
        )
        if not candidates:
            return ()
        timeline = self._bookings_only()
        chosen = []
        for victim in candidates:
            self._unbook(timeline, victim, -1)
            chosen.append(victim)
            if self._starts_now(timeline, top):
                break
        else:
            return ()
        for victim in reversed(chosen[:-1]):
            self._unbook(timeline, victim, 1)
            if self._starts_now(timeline, top):
                chosen.remove(victim)
            else:
                self._unbook(timeline, victim, -1)
        return (Eviction(top.gpr_id, tuple(v.gpr_id for v in chosen), automatic=policy.eviction == "auto"),)

    def _unbook(self, timeline: Timeline, booking: Booking, sign: int, later: set | None = None) -> None:
        """Take (``sign`` 1) or give back (-1) a booking's GPUs on ``timeline``; its GPUs
        on nodes the planner does not use still count against its slice's limits (as whole GPUs)."""
        windows = self.booked[booking.gpr_id]
        for window in windows:
            window = timeline.translate(window)
            window.pool.reserve(window.picks, window.start, window.end, sign, later)
        self._use(timeline, booking, windows, sign)

    def _use(self, timeline: Timeline, booking: Booking, windows: list[Window], sign: int) -> None:
        """Count (``sign`` 1) or stop counting (-1) a booking against its slice's limits; its GPUs
        on nodes the planner does not use count as whole GPUs."""
        use = timeline.use(booking.slice)
        if use is not None:
            end = windows[0].end if windows else self._held_until(booking)
            placed = sum(w.gpus for w in windows)
            use.add(0.0, end, sum(w.parts for w in windows) + (len(booking.gpus) - placed) * sharing.PARTS, sign)

    def _starts_now(self, timeline: Timeline, request: Request) -> bool:
        pools = _eligible_pools(timeline, request.spec)
        with _avoiding(timeline, request.avoid):
            window = _soonest(timeline, request.spec, pools, 0.0)
        return window is not None and window.start == 0.0
