"""The nodes of one cluster and shape, and where a request fits among them soonest.

Each node has a :class:`Profile` of its free GPUs. To avoid walking every node
for every request, the pool keeps two summaries per node and GPU level ``g``
(1 .. GPUs per node), in numpy arrays so that a query looks at all nodes at once:

- ``tail[g, i]``: from this time on node ``i`` has ``g`` free GPUs for good;
- ``hole[g, i]``: the longest earlier stretch with ``g`` free GPUs;
- ``first[g, i]``: when node ``i`` first has ``g`` free GPUs.

A request for ``g`` GPUs and ``d`` seconds fits at ``max(lower, tail)`` on any
node, and earlier only on nodes with ``hole >= d``: those few are walked, in
order of ``first``, until ``first`` passes the best start found.

A *whole* node (``Node.whole``) is bound to one GPR at a time: a window on it takes
all its GPUs off its profile, whatever number it asked for, so the node has either
all its GPUs free or none, and the same level queries find only nodes free of any
other window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from typing import NamedTuple

import numpy as np

from . import sharing
from .model import Node, Shape
from .profile import INF, Profile, end_of


class Fit(NamedTuple):
    """Where a request fits: start time and ``(node index, GPUs)`` per node used."""

    start: float
    picks: tuple[tuple[int, int], ...]


# ``tail``, ``hole``, ``first`` (levels x nodes) and ``free_now`` (nodes) of some nodes.
Summary = tuple[np.ndarray, ...]  # the four arrays summaries() makes


class Pool:
    def __init__(self, cluster: str, shape: Shape, nodes: list[Node], healthy: list[int]):
        self.cluster = cluster
        self.shape = shape
        self.nodes = nodes
        self.width = shape.gpus_per_node
        self.unit_parts = int(shape.equivalents * sharing.PARTS)  # what one of its units counts in quotas
        self.capacity = healthy
        self.whole = [n.whole for n in nodes]
        self.profiles = [Profile(c) for c in healthy]
        # Nothing reserved yet: node i has its healthy GPUs free from now on, for good.
        level = np.arange(self.width + 1)[:, None]
        free = (level >= 1) & (level <= np.array(healthy)[None, :])
        self.tail = np.where(free, 0.0, INF)
        self.hole = np.zeros(free.shape)
        self.first = self.tail.copy()
        self.free_now = np.array(healthy, dtype=float)

    def copy(self) -> Pool:
        clone = Pool.__new__(Pool)
        clone.__dict__.update(self.__dict__)
        clone.profiles = [p.copy() for p in self.profiles]
        clone.tail = self.tail.copy()
        clone.hole = self.hole.copy()
        clone.first = self.first.copy()
        clone.free_now = self.free_now.copy()
        return clone

    def with_profiles(self, nodes: list[int], profiles: list[Profile], summary: Summary) -> Pool:
        """A what-if copy of the pool in which ``nodes`` have ``profiles``, with ``summary``
        (their ``summaries``); it shares everything else with this pool, so nothing may be
        reserved on it."""
        clone = Pool.__new__(Pool)
        clone.__dict__.update(self.__dict__)
        clone.profiles = self.profiles.copy()
        for i, profile in zip(nodes, profiles, strict=True):
            clone.profiles[i] = profile
        clone.tail, clone.hole, clone.first = self.tail.copy(), self.hole.copy(), self.first.copy()
        clone.free_now = self.free_now.copy()
        clone.tail[:, nodes], clone.hole[:, nodes], clone.first[:, nodes], clone.free_now[nodes] = summary
        return clone

    def reserve(
        self, picks: tuple[tuple[int, int], ...], start: float, end: float, sign: int = 1, later: set | None = None
    ) -> None:
        """Take (``sign`` 1) or give back (-1) ``picks``' GPUs over ``[start, end)``. With
        ``later``, the summaries wait: ``(pool, node)`` pairs are added for ``summarize``."""
        for i, gpus in picks:
            self.profiles[i].add(start, end, -sign * self.taken(i, gpus))
            if later is None:
                self._summarize(i)
            else:
                later.add((self, i))

    def taken(self, i: int, gpus: int) -> int:
        """GPUs of node ``i`` that a window for ``gpus`` of them takes off its profile: all
        its healthy GPUs on a whole node, else ``gpus``."""
        return self.capacity[i] if self.whole[i] else gpus

    @staticmethod
    def summarize(later: set) -> None:
        """Bring the summaries of the nodes ``reserve`` deferred up to date."""
        for pool, i in later:
            pool._summarize(i)
        later.clear()

    def fits(self, picks: tuple[tuple[int, int], ...], start: float, end: float) -> bool:
        return all(self.profiles[i].minimum(start, end) >= gpus for i, gpus in picks)

    def need(self, gpus: int | None, nodes: int | None) -> tuple[int, int, int]:
        """``(nodes, GPUs on each full node, GPUs on the last)`` for a request of ``gpus`` or
        ``nodes``: ``gpus`` up to a node's width go on one node, more take whole nodes;
        ``nodes`` take whole nodes."""
        width = self.width
        if nodes is not None:
            return (nodes, width, width)
        assert gpus is not None  # a request asks for GPUs or nodes (GPRSpec)
        if gpus <= width:
            return (1, gpus, gpus)
        count = math.ceil(gpus / width)
        return (count, width, gpus - (count - 1) * width)

    def earliest(
        self, need: tuple[int, int, int], duration: float, lower: float, upper: float = INF, node: int | None = None
    ) -> Fit | None:
        """The earliest fit starting at ``lower`` or later and before ``upper``; None if none.
        With ``node``, a one-node fit on that node, read from its profile, not the summaries."""
        count, full, last = need
        if node is not None:
            t = self.profiles[node].earliest_at_least(last, duration, lower)
            return Fit(t, ((node, last),)) if t < upper else None
        if count == 1:
            return self._earliest_one(last, duration, lower, upper)
        return self._earliest_many(count, full, last, duration, lower, upper)

    def _earliest_one(self, gpus: int, duration: float, lower: float, upper: float) -> Fit | None:
        tails = self.tail[gpus]
        first_tail = int(tails.argmin())
        tail = float(tails[first_tail])
        best = min(max(tail, lower), upper)
        from_holes = []
        holes = ((self.hole[gpus] >= duration) & (self.first[gpus] < best)).nonzero()[0]
        if holes.size:
            firsts = self.first[gpus, holes]
            for j in np.argsort(firsts, kind="stable").tolist():
                if firsts[j] >= best:
                    break
                i = int(holes[j])
                t = self.profiles[i].earliest_at_least(gpus, duration, lower)
                if t < best:
                    best, from_holes = t, [i]
                elif t == best:
                    from_holes.append(i)
        if best >= upper:
            return None
        if best < tail:
            candidates = np.zeros(len(self.nodes), dtype=bool)
        elif best == tail and best > lower and not from_holes:
            return Fit(best, ((first_tail, gpus),))  # the first node whose tail starts it
        else:
            candidates = tails <= best
        candidates[from_holes] = True
        return Fit(best, ((self._best_fit(candidates, gpus, best), gpus),))

    def _best_fit(self, candidates: np.ndarray, gpus: int, t: float) -> int:
        """Among the ``candidates`` (a mask), the node that keeps the fewest GPUs idle at ``t``
        (packing), then the first. Now that is the fewest free GPUs; later, the most levels
        above ``gpus`` still taken at ``t``, which the summaries give for all nodes at once."""
        if t == 0.0:
            return int(np.where(candidates, self.free_now, INF).argmin())
        taken = (self.tail[gpus + 1 :] > t).sum(axis=0)
        return int(np.where(candidates, taken, -1).argmax())

    def _earliest_many(
        self, count: int, full: int, last: int, duration: float, lower: float, upper: float
    ) -> Fit | None:
        """``count - 1`` nodes with ``full`` GPUs and one more with ``last``, all at once."""
        tail_full, tail_last = self.tail[full], self.tail[last]
        if len(self.nodes) < count:
            return None
        bound = max(
            lower,
            float(np.partition(tail_full, count - 2)[count - 2]) if count >= 2 else 0.0,
            float(np.partition(tail_last, count - 1)[count - 1]),
        )
        bound = min(bound, upper)
        hole_nodes = set(((self.hole[last] >= duration) | (self.hole[full] >= duration)).nonzero()[0].tolist())
        times = {lower, bound}
        for tails in (tail_full, tail_last):
            times.update(tails[(tails > lower) & (tails < bound)].tolist())
        for i in hole_nodes:
            times.update(self.profiles[i].runs_at_least(last, duration, lower, bound))
            times.update(self.profiles[i].runs_at_least(full, duration, lower, bound))
        for t in sorted(times):
            if t >= upper:
                return None
            fit = self._pick_many(count, full, last, duration, t, hole_nodes)
            if fit is not None:
                return fit
        return None

    def _pick_many(
        self, count: int, full: int, last: int, duration: float, t: float, hole_nodes: set[int]
    ) -> Fit | None:
        full_ok = set((self.tail[full] <= t).nonzero()[0].tolist())
        last_ok = set((self.tail[last] <= t).nonzero()[0].tolist())
        for i in hole_nodes:
            if i in full_ok:
                continue
            low = self.profiles[i].minimum(t, end_of(t, duration))
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
            mask = np.zeros(len(self.nodes), dtype=bool)
            mask[list(partial)] = True
            return Fit(t, (*((i, full) for i in fulls[: count - 1]), (self._best_fit(mask, last, t), last)))
        return Fit(t, (*((i, full) for i in fulls[: count - 1]), (fulls[count - 1], last)))

    def _summarize(self, i: int) -> None:
        """Recompute node ``i``'s ``tail`` and ``hole`` for every level, and ``free_now``."""
        self.tail[:, i], self.hole[:, i], self.first[:, i], self.free_now[i] = _summary(self.profiles[i], self.width)


def _summary(profile: Profile, width: int) -> tuple[list[float], list[float], list[float], int]:
    """One profile's ``tail``, ``hole`` and ``first`` per level (0 .. ``width``), and free GPUs now."""
    times, free = profile.times, profile.values
    levels = width + 1
    tails = [INF] * levels
    top = free[-1]
    for k in range(len(times) - 2, -1, -1):
        f = free[k]
        if f < top:
            for g in range(f + 1 if f > 0 else 1, top + 1):
                tails[g] = times[k + 1]
            top = f
    for g in range(1, top + 1):
        tails[g] = 0.0
    # A run at level g starts where free rises to g and, unless it is the tail, ends
    # where free drops below g: one pass over the steps touches each level change once.
    holes = [0.0] * levels
    starts = [0.0] * levels
    firsts = [INF] * levels
    previous = 0
    for t, f in zip(times, free, strict=True):
        if f > previous:
            for g in range(previous + 1 if previous > 0 else 1, f + 1):
                starts[g] = t
                if firsts[g] == INF:
                    firsts[g] = t
        else:
            for g in range(f + 1 if f > 0 else 1, previous + 1):
                run = t - starts[g]
                if run > holes[g]:
                    holes[g] = run
        previous = f
    return tails, holes, firsts, free[0]


_FEW = 8  # summaries of up to this many profiles are made one by one (numpy's set-up costs more)


def summaries(profiles: Sequence[Profile], width: int) -> Summary:
    """``tail``, ``hole`` and ``first`` (levels x profiles) and ``free_now`` of many profiles
    at once, as ``Pool._summarize`` makes them one node at a time, for what-if pools."""
    if len(profiles) <= _FEW:
        made = [_summary(p, width) for p in profiles]
        if not made:
            empty = np.empty((width + 1, 0))
            return empty, empty.copy(), empty.copy(), np.empty(0)
        tails, holes, firsts, free_now = zip(*made, strict=True)
        return np.array(tails).T, np.array(holes).T, np.array(firsts).T, np.array(free_now, dtype=np.int64)
    counts = np.fromiter((len(p.times) for p in profiles), dtype=np.int64, count=len(profiles))
    size = int(counts.sum())
    times = np.fromiter(chain.from_iterable(p.times for p in profiles), dtype=float, count=size)
    free = np.fromiter(chain.from_iterable(p.values for p in profiles), dtype=np.int64, count=size)
    owner = np.repeat(np.arange(len(profiles)), counts)
    starts = np.cumsum(counts) - counts
    ends = starts + counts - 1
    index = np.arange(size)
    tail = np.full((width + 1, len(profiles)), INF)
    hole = np.zeros(tail.shape)
    first = tail.copy()
    for g in range(1, width + 1):
        above = free >= g
        before = np.concatenate(([False], above[:-1]))
        before[starts] = False  # a profile starts from nothing free, as _summarize's scan does
        rises = np.flatnonzero(above & ~before)
        np.minimum.at(first[g], owner[rises], times[rises])
        falls = np.flatnonzero(before & ~above)
        if falls.size:  # a run that ends is a hole; it began at the last rise before
            began = np.maximum.accumulate(np.where(above & ~before, index, 0))[falls]
            np.maximum.at(hole[g], owner[falls], times[falls] - times[began])
        below = np.flatnonzero(~above)
        last_below = np.full(len(profiles), -1)
        np.maximum.at(last_below, owner[below], below)
        from_ = np.where(last_below < 0, 0.0, times[np.minimum(last_below + 1, ends)])
        tail[g] = np.where(above[ends], from_, INF)
    return tail, hole, first, free[starts]
