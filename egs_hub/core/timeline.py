"""The planner's working state: every pool's node profiles and every limited slice's use.

Times are float seconds from ``now``. A *window* put on the timeline is a
booking, a placement, or a promise held for a request (see planner.py); each
can be taken off again exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

from .model import Node, Shape, SlicePolicy
from .pool import Fit, Pool
from .profile import INF, Profile


class Window(NamedTuple):
    slice: str
    pool: Pool
    picks: tuple[tuple[int, int], ...]
    start: float
    end: float

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.picks)


class SliceUse:
    """A slice's active GPRs and held GPUs over time, against ``max_active_gprs`` and ``max_gpus``."""

    def __init__(self, policy: SlicePolicy):
        self.max_active = policy.max_active_gprs
        self.max_gpus = policy.max_gpus
        self.active = Profile(0)
        self.gpus = Profile(0)

    def copy(self) -> SliceUse:
        clone = SliceUse.__new__(SliceUse)
        clone.max_active, clone.max_gpus = self.max_active, self.max_gpus
        clone.active, clone.gpus = self.active.copy(), self.gpus.copy()
        return clone

    def add(self, start: float, end: float, gpus: int, sign: int) -> None:
        self.active.add(start, end, sign)
        if self.max_gpus is not None:  # else nothing reads the GPUs held
            self.gpus.add(start, end, sign * gpus)

    def earliest(self, gpus: int, duration: float, lower: float) -> float:
        """Earliest ``t >= lower`` at which one more GPR of ``gpus`` keeps both limits over
        ``[t, t + duration)``. A GPR over ``max_gpus`` alone was approved over quota: it
        runs while the slice holds nothing else."""
        t = lower
        while t != INF:
            t1 = self.active.earliest_at_most(self.max_active - 1, duration, t)
            if self.max_gpus is None or t1 == INF:
                return t1
            t2 = self.gpus.earliest_at_most(max(self.max_gpus, gpus) - gpus, duration, t1)
            if t2 == t1:
                return t1
            t = t2
        return INF

    def allows(self, gpus: int, start: float, end: float) -> bool:
        if self.active.maximum(start, end) + 1 > self.max_active:
            return False
        return self.max_gpus is None or self.gpus.maximum(start, end) + gpus <= max(self.max_gpus, gpus)


class Timeline:
    def __init__(
        self, nodes: tuple[Node, ...], unhealthy: frozenset[str], policies: Mapping[str, SlicePolicy], gprs: int
    ):
        groups: dict[tuple[str, Shape], list[Node]] = defaultdict(list)
        for node in sorted(nodes, key=lambda n: n.key):
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

    def copy(self) -> Timeline:
        clone = Timeline.__new__(Timeline)
        mapping = {id(p): p.copy() for p in self.pools}
        clone.pools = [mapping[id(p)] for p in self.pools]
        clone.where = {key: (mapping[id(pool)], i) for key, (pool, i) in self.where.items()}
        clone.policies, clone.gprs = self.policies, self.gprs
        clone.slices = {name: None if use is None else use.copy() for name, use in self.slices.items()}
        return clone

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
            use.add(window.start, window.end, window.gpus, sign)

    def fits(self, window: Window) -> bool:
        if not window.pool.fits(window.picks, window.start, window.end):
            return False
        use = self.use(window.slice)
        return use is None or use.allows(window.gpus, window.start, window.end)

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
        need = pool.need(gpus, nodes)
        use = self.use(slice_name)
        held = need[0] * need[1] - need[1] + need[2]
        t = lower
        while True:
            if use is not None:
                t = use.earliest(held, duration, t)
                if t >= upper:
                    return None
            fit: Fit | None = pool.earliest(need, duration, t, upper, node)
            if fit is None:
                return None
            if use is None or fit.start == t or use.allows(held, fit.start, fit.start + duration):
                return Window(slice_name, pool, fit.picks, fit.start, fit.start + duration)
            t = fit.start
