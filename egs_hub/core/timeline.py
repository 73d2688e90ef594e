"""The planner's working state: every pool's node profiles and every limited slice's use.

Times are float seconds from ``now``. A *window* put on the timeline is a
booking, a placement, or a promise held for a request (see planner.py); each
can be taken off again exactly. A *rewind* is the timeline as it was at some
place in the order its windows were planned in (for wait-time queries).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .model import DEFAULT_PROJECT, Node, Shape, SlicePolicy
from .pool import Fit, Pool, summaries
from .profile import INF, Profile, end_of
from .sharing import PARTS


class Window(NamedTuple):
    slice: str
    pool: Pool
    picks: tuple[tuple[int, int], ...]
    start: float
    end: float

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.picks)

    @property
    def parts(self) -> int:
        """What its units count as in its slice's quota, in sharing.PARTS of a GPU."""
        return self.gpus * self.pool.unit_parts


class SliceUse:
    """A slice's active GPRs and held GPU-equivalents over time, against ``max_active_gprs`` and
    ``max_gpus``; GPU-equivalents are counted in sharing.PARTS of a GPU (``parts``)."""

    def __init__(self, policy: SlicePolicy):
        self.max_active = policy.max_active_gprs
        self.max_parts = None if policy.max_gpus is None else policy.max_gpus * PARTS
        self.active = Profile(0)
        self.parts = Profile(0)

    def copy(self) -> SliceUse:
        clone = SliceUse.__new__(SliceUse)
        clone.max_active, clone.max_parts = self.max_active, self.max_parts
        clone.active, clone.parts = self.active.copy(), self.parts.copy()
        return clone

    def add(self, start: float, end: float, parts: int, sign: int) -> None:
        self.active.add(start, end, sign)
        if self.max_parts is not None:  # else nothing reads the GPUs held
            self.parts.add(start, end, sign * parts)

    def earliest(self, parts: int, duration: float, lower: float) -> float:
        """Earliest ``t >= lower`` at which one more GPR of ``parts`` keeps both limits over
        ``[t, t + duration)``. A GPR over ``max_gpus`` alone was approved over quota: it
        runs while the slice holds nothing else."""
        t = lower
        while t != INF:
            t1 = self.active.earliest_at_most(self.max_active - 1, duration, t)
            if self.max_parts is None or t1 == INF:
                return t1
            t2 = self.parts.earliest_at_most(max(self.max_parts, parts) - parts, duration, t1)
            if t2 == t1:
                return t1
            t = t2
        return INF

    def take_off(self, windows: list[Window]) -> None:
        """``add`` with sign -1 of every window at once."""
        self.active.add_many([(w.start, w.end, -1) for w in windows])
        if self.max_parts is not None:
            self.parts.add_many([(w.start, w.end, -w.parts) for w in windows])

    def allows(self, parts: int, start: float, end: float) -> bool:
        if self.active.maximum(start, end) + 1 > self.max_active:
            return False
        return self.max_parts is None or self.parts.maximum(start, end) + parts <= max(self.max_parts, parts)


class Timeline:
    def __init__(
        self,
        nodes: tuple[Node, ...],
        unhealthy: frozenset[str],
        policies: Mapping[str, SlicePolicy],
        gprs: int,
        cluster_projects: Mapping[str, str] | None = None,
        projects: Mapping[str, str] | None = None,
    ):
        groups: dict[tuple[str, Shape], list[Node]] = defaultdict(list)
        # by key, a pool's joining nodes after the joined ones: the first of equal fits is a node that is there
        for node in sorted(nodes, key=lambda n: (n.cluster, n.joins_at is not None, n.name)):
            if node.schedulable:
                groups[(node.cluster, node.shape)].append(node)
        self.pools = [
            Pool(cluster, shape, members, [sum(g not in unhealthy for g in n.gpus) for n in members])
            for (cluster, shape), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].name))
        ]
        self.where = {node.key: (pool, i) for pool in self.pools for i, node in enumerate(pool.nodes)}
        self.policies = policies
        self.gprs = gprs
        self.slices: dict[str, SliceUse | None] = {}
        # Clusters of a project other than the default serve only its slices (core.model.serves).
        self.cluster_projects = cluster_projects or {}
        self.projects = projects or {}

    def copy(self) -> Timeline:
        clone = Timeline.__new__(Timeline)
        mapping = {id(p): p.copy() for p in self.pools}
        clone.pools = [mapping[id(p)] for p in self.pools]
        clone.where = {key: (mapping[id(pool)], i) for key, (pool, i) in self.where.items()}
        clone.policies, clone.gprs = self.policies, self.gprs
        clone.cluster_projects, clone.projects = self.cluster_projects, self.projects
        clone.slices = {name: None if use is None else use.copy() for name, use in self.slices.items()}
        return clone

    def project(self, slice_name: str) -> str:
        return self.projects.get(slice_name, DEFAULT_PROJECT)

    def translate(self, window: Window) -> Window:
        """The same window on this timeline (which may be a copy of the one it came from)."""
        pool = self.where[window.pool.nodes[window.picks[0][0]].key][0]
        return Window(window.slice, pool, window.picks, window.start, window.end)

    def use(self, name: str) -> SliceUse | None:
        """The slice's use over time; None when no number of GPRs can reach its limits."""
        if name not in self.slices:
            policy = self.policies.get(name, SlicePolicy())
            limited = policy.max_gpus is not None or policy.max_active_gprs <= self.gprs
            self.slices[name] = SliceUse(policy) if limited else None
        return self.slices[name]

    def put(self, window: Window, sign: int = 1, later: set | None = None) -> None:
        window.pool.reserve(window.picks, window.start, window.end, sign, later)
        use = self.use(window.slice)
        if use is not None:
            use.add(window.start, window.end, window.parts, sign)

    def fits(self, window: Window) -> bool:
        if not window.pool.fits(window.picks, window.start, window.end):
            return False
        use = self.use(window.slice)
        return use is None or use.allows(window.parts, window.start, window.end)

    def earliest(
        self,
        slice_name: str,
        pool: Pool,
        gpus: int | None,
        nodes: int | None,
        duration: float,
        lower: float,
        upper: float = INF,
        node: int | None = None,
    ) -> Window | None:
        """The earliest window on ``pool`` (or on its ``node``, for a one-node request) for the
        request that its slice's limits allow, starting before ``upper``."""
        return earliest_window(self.use(slice_name), slice_name, pool, gpus, nodes, duration, lower, upper, node)


def earliest_window(
    use: SliceUse | None,
    slice_name: str,
    pool: Pool,
    gpus: int | None,
    nodes: int | None,
    duration: float,
    lower: float,
    upper: float = INF,
    node: int | None = None,
) -> Window | None:
    """``Timeline.earliest`` with the slice's ``use`` given."""
    need = pool.need(gpus, nodes)
    held = (need[0] * need[1] - need[1] + need[2]) * pool.unit_parts
    t = lower
    while True:
        if use is not None:
            t = use.earliest(held, duration, t)
            if t >= upper:
                return None
        fit: Fit | None = pool.earliest(need, duration, t, upper, node)
        if fit is None:
            return None
        end = end_of(fit.start, duration)
        if use is None or fit.start == t or use.allows(held, fit.start, end):
            return Window(slice_name, pool, fit.picks, fit.start, end)
        t = fit.start


STEP = 1 << 32  # a rewind row's key: its node's rank times STEP, plus its place (places stay below STEP)


class Rewind:
    """A timeline after some requests were planned, taken back to any place in their order:
    what a request placed there would find, with the windows of those from the place on
    (counted from 0) given back.

    ``windows`` are the requests' windows in their order, on the timeline or a copy of it.
    Made once (per pool and node, its profile without its windows from each of them on, and
    the summaries of that; per slice its windows), then asked often. Nothing here changes
    the timeline.

    Windows put on the timeline later are taken in as they come (``arrived``), on the few
    nodes they touch: a request's window placed at some place of the order (those from there
    on move one place later), or a higher band's, before every place."""

    def __init__(self, timeline: Timeline, windows: list[Window]):
        self.timeline = timeline
        slices: dict[str, list[tuple[int, Window]]] = defaultdict(list)
        # Per pool (by id) and node: (place, GPUs taken off its profile, window), by place
        held: dict[int, dict[int, list[tuple[int, int, Window]]]] = defaultdict(lambda: defaultdict(list))
        for place, window in enumerate(windows):
            window = timeline.translate(window)
            slices[window.slice].append((place, window))
            for i, gpus in window.picks:
                held[id(window.pool)][i].append((place, window.pool.taken(i, gpus), window))
        self._slices = {name: _SliceRewind(placed) for name, placed in slices.items()}
        self._pools = {id(pool): _PoolRewind(pool, held[id(pool)]) for pool in timeline.pools if id(pool) in held}

    def arrived(self, place: int, window: Window) -> None:
        """``window`` was put on the timeline since: a request's, now at ``place`` of the order (those
        from there on move one place later), or, with ``place`` -1, a higher band's."""
        window = self.timeline.translate(window)
        if place >= 0:
            for rewind in self._slices.values():
                rewind.shift(place)
            for pool_rewind in self._pools.values():
                pool_rewind.shift(place)
            self._slices.setdefault(window.slice, _SliceRewind([])).insert(place, window)
        rewound = self._pools.get(id(window.pool))
        if rewound is None and place >= 0:
            rewound = self._pools[id(window.pool)] = _PoolRewind(window.pool, {})
        if rewound is not None:
            rewound.arrived(place, window)

    def pool(self, pool: Pool, place: int) -> Pool:
        """``pool`` (of the timeline) without the windows from ``place`` on; a node with none there
        keeps its live profile."""
        rewound = self._pools.get(id(pool))
        return pool if rewound is None else rewound.at(place)

    def use(self, slice_name: str, place: int) -> SliceUse | None:
        """The slice's use without its windows from ``place`` on."""
        use = self.timeline.use(slice_name)
        rewound = self._slices.get(slice_name)
        if use is None or rewound is None:
            return use
        later = rewound.from_place(place)
        if not later:
            return use
        use = use.copy()
        use.take_off(later)
        return use


class _SliceRewind:
    """One slice's windows of a Rewind, by place."""

    def __init__(self, placed: list[tuple[int, Window]]):
        self.places = np.array([place for place, _ in placed], dtype=np.int64)
        self.windows = [window for _, window in placed]

    def shift(self, place: int) -> None:
        self.places[self.places >= place] += 1

    def insert(self, place: int, window: Window) -> None:
        k = int(np.searchsorted(self.places, place))
        self.places = np.insert(self.places, k, place)
        self.windows.insert(k, window)

    def from_place(self, place: int) -> list[Window]:
        return self.windows[int(np.searchsorted(self.places, place)) :]


class _PoolRewind:
    """One pool of a Rewind. A *row* is a node and one of its windows (by node, then place);
    each row has the node's profile without its windows from that one on, and its summary.
    The rows sort by ``keys``: the node's rank among ``nodes`` times STEP, plus the place;
    ``ends[rank]`` is where the node's rows end."""

    def __init__(self, pool: Pool, held: dict[int, list[tuple[int, int, Window]]]):
        self.pool = pool
        nodes = sorted(held.items())
        self.nodes = np.array([i for i, _ in nodes], dtype=np.int64)
        keys: list[int] = []
        self.profiles: list[Profile] = []
        ends = []
        for rank, (i, rows) in enumerate(nodes):
            profile, given_back = pool.profiles[i], []
            for _, taken, window in reversed(rows):
                profile = profile.copy()
                profile.add(window.start, window.end, taken)
                given_back.append(profile)
            self.profiles += reversed(given_back)
            keys += (rank * STEP + place for place, _, _ in rows)
            ends.append(len(self.profiles))
        self.keys = np.array(keys, dtype=np.int64)
        self.ends = np.array(ends, dtype=np.int64)
        self.summary = summaries(self.profiles, pool.width)

    def at(self, place: int) -> Pool:
        """The pool without the windows from ``place`` on: each node's first row at or after
        ``place``, where it has one."""
        rows = np.searchsorted(self.keys, np.arange(len(self.nodes)) * STEP + place)
        changed = rows < self.ends
        if not changed.any():
            return self.pool
        rows = rows[changed]
        profiles = [self.profiles[r] for r in rows.tolist()]
        summary = tuple(part[..., rows] for part in self.summary)
        return self.pool.with_profiles(self.nodes[changed].tolist(), profiles, summary)

    def shift(self, place: int) -> None:
        """A window arrived at ``place``: the rows from there on move one place later."""
        self.keys[self.keys % STEP >= place] += 1

    def arrived(self, place: int, window: Window) -> None:
        """``window``, on the pool's live profiles now, at ``place`` (after ``shift``), or before
        every place (-1): its nodes get a row at ``place``, and their rows after it have it taken."""
        for i, gpus in window.picks:
            taken = self.pool.taken(i, gpus)
            rank = int(np.searchsorted(self.nodes, i))
            if rank == len(self.nodes) or self.nodes[rank] != i:
                if place < 0:
                    continue  # no row: its live profile has the window, as every place must
                self._add_node(rank, i)
            first = int(self.ends[rank - 1]) if rank else 0
            after = first + int(np.searchsorted(self.keys[first : self.ends[rank]], rank * STEP + max(place, 0)))
            if place >= 0:
                self._insert_row(rank, after, place, window, taken)
                after += 1
            self._take(after, int(self.ends[rank]), window, taken)

    def _insert_row(self, rank: int, at: int, place: int, window: Window, taken: int) -> None:
        """Node ``rank``'s row for ``window`` at ``place``, before the node's row ``at`` (if it has one):
        that row's profile as it is, else the live profile without the window."""
        if at < self.ends[rank]:
            profile, column = self.profiles[at], tuple(part[..., [at]] for part in self.summary)
        else:
            profile = self.pool.profiles[int(self.nodes[rank])].copy()
            profile.add(window.start, window.end, taken)
            column = summaries([profile], self.pool.width)
        self.keys = np.insert(self.keys, at, rank * STEP + place)
        self.profiles.insert(at, profile)
        parts = zip(self.summary, column, strict=True)
        self.summary = tuple(np.insert(part, [at], col, axis=-1) for part, col in parts)
        self.ends[rank:] += 1

    def _take(self, start: int, end: int, window: Window, taken: int) -> None:
        """Rows ``start`` to ``end`` with ``window``'s GPUs taken off their profiles."""
        if start == end:
            return
        later = [profile.copy() for profile in self.profiles[start:end]]
        for profile in later:
            profile.add(window.start, window.end, -taken)
        self.profiles[start:end] = later
        for part, made in zip(self.summary, summaries(later, self.pool.width), strict=True):
            part[..., start:end] = made

    def _add_node(self, rank: int, i: int) -> None:
        """Node ``i``, with no row yet, at ``rank``."""
        self.keys[self.keys >= rank * STEP] += STEP
        self.nodes = np.insert(self.nodes, rank, i)
        self.ends = np.insert(self.ends, rank, self.ends[rank - 1] if rank else 0)
