"""Dynamic node pools in a replay: core/node_pools.py decides, this module keeps the books.

Vocabulary: a pool's *joined* nodes are real nodes of the snapshot, named ``<pool>-p<k>`` (``k``
counts from 1 in each pool and is never reused) with GPUs ``<node>-g<i>``, whole as on Kubernetes;
its *joining* nodes are core's virtual ones, closed until they could join. After each pass the pool
is *asked* for the nodes core's ``growth`` names: they are *coming* until they join, at the ask plus
``scale_up_delay``. A joined node is *idle* from when no GPR holds it (from its join, at first) until
one does; core's ``to_give_back`` names the idle nodes to *give back*, and they leave the snapshot.
A pool's ``min`` nodes are there from the start. *Pool events* record all of it, for the figures
and the tests. Times are virtual microseconds, as the engine's.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from ..core.model import Node
from ..core.node_pools import (
    ASK_SLACK,
    NodePool,
    PoolNode,
    PoolState,
    growth,
    joining_name,
    joining_nodes,
    planned_nodes,
    to_give_back,
)

US = timedelta(microseconds=1)
MIN, ASK, JOIN, GIVE_BACK = "min", "ask", "join", "give-back"


class PoolEvent(NamedTuple):
    """``time``: seconds from the trace start; ``kind``: MIN (``node`` is one of the pool's ``min``
    nodes, there from the start), ASK (``count`` nodes asked for), JOIN (``node`` joined) or
    GIVE_BACK (``node`` given back)."""

    time: float
    pool: str
    kind: str
    node: str | None = None
    count: int = 1


class Fleet:
    """The pools of one replay: their joined nodes, what was asked of them and when it joins, and
    since when each joined node is idle."""

    def __init__(self, pools: Sequence[NodePool]):
        self.pools = {p.name: p for p in pools}
        self.states = {p.name: PoolState(target=p.min_nodes) for p in pools}
        self.joined: dict[str, dict[str, Node]] = {p.name: {} for p in pools}
        self.idle_since: dict[str, int | None] = {}  # joined node -> idle since; None: a GPR holds it
        self.holders: dict[str, int] = {}  # joined node -> GPRs holding it
        self.coming: list[tuple[int, str]] = []  # (join time, pool) of the nodes asked for, a heap
        self.made = dict.fromkeys(self.pools, 0)
        self.joining = {p.name: frozenset(joining_name(p.name, k) for k in range(1, p.max_nodes + 1)) for p in pools}
        self.events: list[PoolEvent] = []
        self.wake: int | None = None  # when a pool needs a pass: an idle node's give-back, a window's ask
        for pool in pools:
            for _ in range(pool.min_nodes):
                self._join(pool, 0, MIN)

    def next_event(self) -> int | None:
        """The earliest of the next join and ``wake``."""
        times = [t for t in (self.wake, self.coming[0][0] if self.coming else None) if t is not None]
        return min(times, default=None)

    def join_due(self, t: int) -> None:
        """The nodes asked for that join by ``t`` join (idle)."""
        while self.coming and self.coming[0][0] <= t:
            _, name = heapq.heappop(self.coming)
            self._join(self.pools[name], t, JOIN)

    def nodes(self, now: datetime) -> tuple[Node, ...]:
        """Each pool's joined nodes, then its joining ones as of ``now``."""
        made: list[Node] = []
        for name, pool in self.pools.items():
            made += self.joined[name].values()
            made += joining_nodes(pool, self.states[name], len(self.joined[name]), now)
        return tuple(made)

    def hold(self, nodes: Iterable[str]) -> None:
        """A GPR was bound on ``nodes``: the pools' among them are no longer idle."""
        for node in nodes:
            if node in self.holders:
                self.holders[node] += 1
                self.idle_since[node] = None

    def let_go(self, nodes: Iterable[str], t: int) -> None:
        """A GPR on ``nodes`` let go of them at ``t``: those of the pools it was the last on are idle."""
        for node in nodes:
            if node in self.holders:
                self.holders[node] -= 1
                if not self.holders[node]:
                    self.idle_since[node] = t

    def act(self, estimates: Iterable, t: int, now: datetime) -> None:
        """After the pass at ``t`` (``now``) planned ``estimates``: ask each pool for the nodes
        ``growth`` names, give back the nodes ``to_give_back`` names, and set ``wake``."""
        if not self.pools:
            return
        estimates = list(estimates)
        wake = []
        for name, pool in self.pools.items():
            planned = planned_nodes(estimates, pool.cluster)
            joined = self.joined[name]
            asked = growth(pool, self.states[name], len(joined), planned, now)
            if asked:
                self.states[name] = PoolState(self.states[name].target + asked, now)
                for _ in range(asked):
                    heapq.heappush(self.coming, (t + pool.scale_up_delay // US, name))
                self.events.append(PoolEvent(t / 1e6, name, ASK, count=asked))
            members = [PoolNode(node, self._time(self.idle_since[node], t, now)) for node in joined]
            given = to_give_back(pool, members, planned, now)
            for node in given:
                self._give_back(pool, node, t)
            if given:
                state = self.states[name]
                self.states[name] = PoolState(state.target - len(given), state.asked_at, state.retry_at)
            # Plan again when an idle node has been idle for scale_down_idle, and when a window
            # planned on a joining node comes close enough for growth to ask for it.
            idle = pool.scale_down_idle // US
            wake += [s + idle for node in joined if (s := self.idle_since[node]) is not None and s + idle > t]
            lead = pool.scale_up_delay + ASK_SLACK
            wake += [t + (start - lead - now) // US for node, start in planned if node in self.joining[name]]
        self.wake = min((w for w in wake if w > t), default=None)

    def _join(self, pool: NodePool, t: int, kind: str) -> None:
        self.made[pool.name] += 1
        name = f"{pool.name}-p{self.made[pool.name]:04d}"
        gpus = tuple(f"{name}-g{i}" for i in range(pool.shape.gpus_per_node))
        self.joined[pool.name][name] = Node(name, pool.cluster, pool.shape, gpus, whole=True, pool=pool.name)
        self.idle_since[name] = t
        self.holders[name] = 0
        self.events.append(PoolEvent(t / 1e6, pool.name, kind, name))

    def _give_back(self, pool: NodePool, node: str, t: int) -> None:
        if self.holders[node]:
            raise RuntimeError(f"node pool {pool.name}: to_give_back named {node}, which a GPR holds")
        del self.joined[pool.name][node], self.idle_since[node], self.holders[node]
        self.events.append(PoolEvent(t / 1e6, pool.name, GIVE_BACK, node))

    @staticmethod
    def _time(us: int | None, t: int, now: datetime) -> datetime | None:
        return None if us is None else now - (t - us) * US


def sizes_over_time(events: Iterable[PoolEvent]) -> dict[str, list[tuple[float, int]]]:
    """Each pool's joined nodes over time: (time, nodes from then on), in time order."""
    sizes: dict[str, list[tuple[float, int]]] = {}
    for event in events:
        steps = sizes.setdefault(event.pool, [(0.0, 0)])
        if event.kind == ASK:
            continue
        now = steps[-1][1] + (-1 if event.kind == GIVE_BACK else 1)
        if steps[-1][0] == event.time:
            steps[-1] = (event.time, now)
        else:
            steps.append((event.time, now))
    return sizes


def step_integral(steps: Sequence[tuple[float, int]], low: float, high: float) -> float:
    """The integral over [low, high) of the step function ``steps`` ((time, value from then on))."""
    total = 0.0
    for (start, value), (end, _) in zip(steps, [*steps[1:], (high, 0)], strict=True):
        total += value * max(0.0, min(end, high) - max(start, low))
    return total


def total_steps(sizes: dict[str, list[tuple[float, int]]], weights: dict[str, int]) -> list[tuple[float, int]]:
    """The sum over pools of ``weights[pool]`` x its size, as one step function."""
    current = dict.fromkeys(sizes, 0)
    total: list[tuple[float, int]] = []
    for time, name, value in sorted((time, name, value) for name, steps in sizes.items() for time, value in steps):
        current[name] = value
        value = sum(weights[n] * v for n, v in current.items())
        if total and total[-1][0] == time:
            total[-1] = (time, value)
        else:
            total.append((time, value))
    return total
