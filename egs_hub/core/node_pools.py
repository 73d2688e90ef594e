"""Dynamic node pools: nodes a cluster's autoscaler adds on demand and takes back when idle.

A *pool* is the nodes of one shape that carry the label ``egs.io/pool=<name>`` (the cluster's node
group or Karpenter NodePool puts it on them), between ``min_nodes`` and ``max_nodes``. The nodes that
may still join (``max_nodes`` less those that joined) are *joining nodes*: the planner counts them as
capacity closed until ``scale_up_delay`` from now (a node already asked for: from when it was asked),
never bound. A plan that places a window on a joining node not asked for, starting as soon as that
node could join, asks the pool to grow by it (``growth``); below ``min_nodes`` the pool grows too. A
pool node idle for ``scale_down_idle``, beyond ``min_nodes`` and with no window planned on it before a
new node could join, is given back (``to_give_back``).

What egs-hub asked of a pool is its ``PoolState``: ``target`` nodes (joined and coming), the last ask at
``asked_at``; after an ask the autoscaler failed, nothing is asked before ``retry_at``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from .model import Node, Shape

POOL_LABEL = "egs.io/pool"
ATOMIC_SCALE_UP: Final = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
PROVISIONING_CLASSES = (ATOMIC_SCALE_UP, CHECK_CAPACITY)
# A node asked for that has not joined by its delay is expected this long after each plan.
OVERDUE_LEAD = timedelta(seconds=60)
# A window on a joining node that starts this long after the node could join still asks for it.
ASK_SLACK = timedelta(seconds=60)


@dataclass(frozen=True)
class NodePool:
    cluster: str
    name: str
    shape: Shape
    min_nodes: int
    max_nodes: int
    scale_up_delay: timedelta
    scale_down_idle: timedelta
    provisioning_class: str = ATOMIC_SCALE_UP


@dataclass(frozen=True)
class PoolState:
    target: int = 0
    asked_at: datetime | None = None
    retry_at: datetime | None = None


@dataclass(frozen=True)
class PoolNode:
    """A node of a pool that joined; ``idle_since`` None while a GPR holds it."""

    name: str
    idle_since: datetime | None


def joining_name(pool: str, k: int) -> str:
    """The k-th (from 1) joining node of a pool: a name no Kubernetes node can have."""
    return f"{pool}+{k}"


def joining_nodes(pool: NodePool, state: PoolState, joined: int, now: datetime) -> tuple[Node, ...]:
    """The pool's nodes that may still join, as nodes that join at ``joins_at``: first those asked
    for and not joined (at their ask plus the delay, or OVERDUE_LEAD from now when late), then the
    rest (at the delay from now, or from ``retry_at`` after a failed ask)."""
    room = max(pool.max_nodes - joined, 0)
    coming = min(max(state.target - joined, 0), room)
    asked = state.asked_at or now
    coming_at = max(asked + pool.scale_up_delay, now + OVERDUE_LEAD)
    ask_from = max(now, state.retry_at) if state.retry_at is not None else now
    rest_at = ask_from + pool.scale_up_delay
    nodes = []
    for k in range(1, room + 1):
        name = joining_name(pool.name, k)
        gpus = tuple(f"{pool.cluster}/{name}/gpu{i}" for i in range(pool.shape.gpus_per_node))
        joins_at = coming_at if k <= coming else rest_at
        nodes.append(Node(name, pool.cluster, pool.shape, gpus, whole=True, pool=pool.name, joins_at=joins_at))
    return tuple(nodes)


def joined(nodes: Iterable[Node]) -> Counter[tuple[str, str]]:
    """How many nodes of each (cluster, pool) joined and may be planned on (a node given back is
    cordoned, so it no longer counts)."""
    return Counter((n.cluster, n.pool) for n in nodes if n.pool is not None and n.joins_at is None and n.schedulable)


def all_joining(pools: Iterable[tuple[NodePool, PoolState]], nodes: Iterable[Node], now: datetime) -> tuple[Node, ...]:
    """The joining nodes of every pool, given the inventory's ``nodes``."""
    count = joined(nodes)
    return tuple(n for pool, state in pools for n in joining_nodes(pool, state, count[(pool.cluster, pool.name)], now))


def growth(
    pool: NodePool, state: PoolState, joined: int, planned: Iterable[tuple[str, datetime]], now: datetime
) -> int:
    """How many nodes to ask the pool for now: the joining nodes not asked for that have a window
    planned (``planned``: (node name, window start) pairs of the plan's estimates) starting by when
    they could join (plus ASK_SLACK), and those that bring it up to ``min_nodes``; none while a
    failed ask waits for ``retry_at``."""
    if state.retry_at is not None and now < state.retry_at:
        return 0
    room = max(pool.max_nodes - joined, 0)
    coming = min(max(state.target - joined, 0), room)
    by = now + pool.scale_up_delay + ASK_SLACK
    unasked = {joining_name(pool.name, k) for k in range(coming + 1, room + 1)}
    wanted = {name for name, start in planned if name in unasked and start <= by}
    below_min = max(pool.min_nodes - joined - coming, 0)
    return min(max(len(wanted), below_min), room - coming)


def to_give_back(
    pool: NodePool, nodes: Sequence[PoolNode], planned: Iterable[tuple[str, datetime]], now: datetime
) -> tuple[str, ...]:
    """The pool's joined nodes to give back now, longest idle first: idle for ``scale_down_idle``,
    with no window planned on them by when a node asked for now could join (plus ASK_SLACK: keeping
    it is then cheaper than asking again), as long as ``min_nodes`` stay."""
    soon = now + pool.scale_up_delay + ASK_SLACK
    kept = {name for name, start in planned if start <= soon}
    idle = sorted(
        (n for n in nodes if n.idle_since is not None and now - n.idle_since >= pool.scale_down_idle),
        key=lambda n: (n.idle_since, n.name),
    )
    spare = max(len(nodes) - pool.min_nodes, 0)
    return tuple(n.name for n in idle if n.name not in kept)[:spare]


def planned_nodes(estimates: Iterable, cluster: str) -> list[tuple[str, datetime]]:
    """(node name, window start) of every estimate placed on ``cluster`` (``core.snapshot.Estimate``s)."""
    return [
        (name, e.start)
        for e in estimates
        if e.placement is not None and e.start is not None and e.placement.cluster == cluster
        for name in e.placement.nodes
    ]
