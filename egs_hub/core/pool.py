"""The nodes of one cluster and shape, and where a request fits among them soonest.

Each node has a :class:`Profile` of its free GPUs. To avoid walking every node
for every request, the pool keeps two summaries per node and GPU level ``g``
(1 .. GPUs per node), in numpy arrays so that a query looks at all nodes at once:

- ``tail[g, i]``: from this time on node ``i`` has ``g`` free GPUs for good;
- ``hole[g, i]``: the longest earlier stretch with ``g`` free GPUs.

A request for ``g`` GPUs and ``d`` seconds fits at ``max(lower, tail)`` on any
node, and earlier only on nodes with ``hole >= d``: those few are walked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import Node, Shape
from .profile import INF, Profile


@dataclass(frozen=True)
class Fit:
    """Where a request fits: start time and ``(node index, GPUs)`` per node used."""

    start: float
    picks: tuple[tuple[int, int], ...]


class Pool:
    def __init__(self, cluster: str, shape: Shape, nodes: list[Node], healthy: list[int]):
        self.cluster = cluster
        self.shape = shape
        self.nodes = nodes
        self.width = shape.gpus_per_node
        self.capacity = healthy
        self.profiles = [Profile(c) for c in healthy]
        levels = self.width + 1
        self.tail = np.full((levels, len(nodes)), INF)
        self.hole = np.zeros((levels, len(nodes)))
        self.free_now = np.array(healthy, dtype=float)
        for i in range(len(nodes)):
            self._summarize(i)

    def copy(self) -> Pool:
        clone = Pool.__new__(Pool)
        clone.__dict__.update(self.__dict__)
        clone.profiles = [p.copy() for p in self.profiles]
        clone.tail = self.tail.copy()
        clone.hole = self.hole.copy()
        clone.free_now = self.free_now.copy()
        return clone

    def reserve(self, picks: tuple[tuple[int, int], ...], start: float, end: float, sign: int = 1) -> None:
        """Take (``sign`` 1) or give back (-1) ``picks``' GPUs over ``[start, end)``."""
        for i, gpus in picks:
            self.profiles[i].add(start, end, -sign * gpus)
            self._summarize(i)

    def fits(self, picks: tuple[tuple[int, int], ...], start: float, end: float) -> bool:
        return all(self.profiles[i].minimum(start, end) >= gpus for i, gpus in picks)

    def need(self, gpus: int | None, nodes: int | None) -> tuple[int, int, int] | None:
        """``(nodes, GPUs on each full node, GPUs on the last)`` for a request, or None when
        this shape cannot hold it: ``gpus`` up to a node's width go on one node, more take
        whole nodes; ``nodes`` take whole nodes."""
        width = self.width
        if nodes is not None:
            return (nodes, width, width)
        if gpus <= width:
            return (1, gpus, gpus)
        count = math.ceil(gpus / width)
        return (count, width, gpus - (count - 1) * width)

    def earliest(self, need: tuple[int, int, int], duration: float, lower: float) -> Fit | None:
        count, full, last = need
        if count == 1:
            return self._earliest_one(last, duration, lower)
        return self._earliest_many(count, full, last, duration, lower)

    def _earliest_one(self, gpus: int, duration: float, lower: float) -> Fit | None:
        tails = self.tail[gpus]
        best = max(float(tails.min()), lower)
        holes = np.flatnonzero(self.hole[gpus] >= duration)
        hole_starts = {}
        for i in holes.tolist():
            t = self.profiles[i].earliest_at_least(gpus, duration, lower)
            hole_starts[i] = t
            best = min(best, t)
        if best == INF:
            return None
        candidates = set(np.flatnonzero(tails <= best).tolist())
        candidates.update(i for i, t in hole_starts.items() if t == best)
        node = self._best_fit(candidates, best)
        return Fit(best, ((node, gpus),))

    def _best_fit(self, candidates: set[int], t: float) -> int:
        """The node with the fewest free GPUs at ``t`` (packing), then the first."""
        if t == 0.0:
            return min(candidates, key=lambda i: (self.free_now[i], i))
        return min(candidates, key=lambda i: (self.profiles[i].at(t), i))

    def _earliest_many(self, count: int, full: int, last: int, duration: float, lower: float) -> Fit | None:
        """``count - 1`` nodes with ``full`` GPUs and one more with ``last``, all at once."""
        tail_full, tail_last = self.tail[full], self.tail[last]
        if len(self.nodes) < count:
            return None
        bound = max(
            lower,
            float(np.partition(tail_full, count - 2)[count - 2]) if count >= 2 else 0.0,
            float(np.partition(tail_last, count - 1)[count - 1]),
        )
        hole_nodes = set(np.flatnonzero((self.hole[last] >= duration) | (self.hole[full] >= duration)).tolist())
        times = {lower, bound}
        times.update(t for t in tail_full.tolist() if lower < t < bound)
        times.update(t for t in tail_last.tolist() if lower < t < bound)
        for i in hole_nodes:
            times.update(self.profiles[i].runs_at_least(last, duration, lower, bound))
            times.update(self.profiles[i].runs_at_least(full, duration, lower, bound))
        for t in sorted(times):
            if t == INF:
                return None
            fit = self._pick_many(count, full, last, duration, t, hole_nodes)
            if fit is not None:
                return fit
        return None

    def _pick_many(
        self, count: int, full: int, last: int, duration: float, t: float, hole_nodes: set[int]
    ) -> Fit | None:
        full_ok = set(np.flatnonzero(self.tail[full] <= t).tolist())
        last_ok = set(np.flatnonzero(self.tail[last] <= t).tolist())
        for i in hole_nodes:
            if i in full_ok:
                continue
            low = self.profiles[i].minimum(t, t + duration)
            if low >= last:
                last_ok.add(i)
            if low >= full:
                full_ok.add(i)
        if len(full_ok) < count - 1 or len(last_ok) < count:
            return None
        fulls = sorted(full_ok)
        if full == last:
            return Fit(t, tuple((i, full) for i in fulls[:count]))
        partial = last_ok - full_ok
        if partial:
            return Fit(t, (*((i, full) for i in fulls[: count - 1]), (self._best_fit(partial, t), last)))
        return Fit(t, (*((i, full) for i in fulls[: count - 1]), (fulls[count - 1], last)))

    def _summarize(self, i: int) -> None:
        """Recompute node ``i``'s ``tail`` and ``hole`` for every level, and ``free_now``."""
        profile = self.profiles[i]
        times, free = profile.times, profile.values
        tail, hole = self.tail, self.hole
        capacity = self.capacity[i]
        self.free_now[i] = free[0]
        top = free[-1]
        for g in range(top + 1, capacity + 1):
            tail[g, i] = INF
        for k in range(len(times) - 2, -1, -1):
            f = free[k]
            if f < top:
                t = times[k + 1]
                for g in range(max(f, 0) + 1, top + 1):
                    tail[g, i] = t
                top = f
        for g in range(1, top + 1):
            tail[g, i] = 0.0
        for g in range(1, capacity + 1):
            until = tail[g, i]
            longest = 0.0
            run = INF
            for k, start in enumerate(times):
                if start >= until:
                    break
                if free[k] >= g:
                    if run == INF:
                        run = start
                else:
                    if run != INF:
                        longest = max(longest, start - run)
                    run = INF
            hole[g, i] = longest
