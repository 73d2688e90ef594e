"""What the node-pool pass does with each of a pool's requests to the autoscaler (service/pools.py), as a
rule table over a backend double that holds the requests: a failed one stops asks until the retry, one
whose nodes all joined goes, one that ended while its nodes were awaited tells the admin to check the
node group's labels, and one still pending stays. And a whole pass on a store where the node asked for
joined, given the plan made before it joined: it asks for no second node."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.backends.kubernetes.pools import PoolRequest
from egs_hub.core.model import Node, Shape
from egs_hub.core.node_pools import NodePool, PoolState, joining_nodes
from egs_hub.core.snapshot import Estimate, Placement, Plan, Snapshot
from egs_hub.service.planning import Planned
from egs_hub.service.pools import PoolScaler, Step
from egs_hub.store import db, queries
from egs_hub.store.db import transaction

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
DELAY = timedelta(minutes=10)
POOL = NodePool("kc", "burst", Shape("H100", 80, 8), 0, 4, DELAY, timedelta(minutes=30))


class Requests:
    """The part of a Kubernetes backend the pass reads requests through."""

    scales_pools = True

    def __init__(self, *requests: PoolRequest):
        self.requests = list(requests)
        self.ended: list[str] = []

    async def pool_requests(self, pool: str) -> list[PoolRequest]:
        return self.requests

    async def end_pool_request(self, name: str) -> None:
        self.ended.append(name)


class Pool(Requests):
    """The whole part of a Kubernetes backend the pass asks of a pool."""

    def __init__(self, *requests: PoolRequest):
        super().__init__(*requests)
        self.asked: list[int] = []
        self.kept: list[str] = []

    async def grow_pool(self, pool: NodePool, nodes: int) -> str:
        self.asked.append(nodes)
        return f"egs-{pool.name}-{len(self.asked) + 1}"

    async def keep_pool_node(self, node: str) -> None:
        self.kept.append(node)


CASES = {
    # name: (request state and message, nodes coming, wanted: deleted, error contains (None: no failure))
    "pending stays": ("pending", "", 1, False, None),
    "provisioned, nodes still coming: stays": ("provisioned", "", 1, False, None),
    "provisioned, all joined: deleted": ("provisioned", "", 0, True, None),
    "failed: deleted, told, retried later": ("failed", "no stock", 1, True, "could not add 2 node(s): no stock"),
    "expired, all joined: deleted": ("expired", "booking expired", 0, True, None),
    "expired before its nodes joined: their labels": ("expired", "booking expired", 1, True, "egs.io/pool=burst"),
}


@pytest.mark.parametrize(("state", "message", "coming", "deleted", "error"), CASES.values(), ids=CASES.keys())
async def test_a_pools_requests(state, message, coming, deleted, error):
    backend = Requests(PoolRequest("egs-burst-1", 2, "", state, message))
    step = Step(POOL, PoolState(target=1 + coming, asked_at=NOW - DELAY), 1, NOW)
    await PoolScaler._settle_requests(backend, step)
    assert backend.ended == (["egs-burst-1"] if deleted else [])
    if error is None:
        assert (step.error, step.events, step.state.retry_at) == (None, [], None)
    else:
        assert error in step.error and step.state == PoolState(1, NOW - DELAY, NOW + DELAY)
        assert [e.kind for e in step.events] == ["pool-scale-up-failed"]


class Served:
    """The planning the pass reads: the one plan it was given (the last one, served while the next is made)."""

    def __init__(self, planned: Planned):
        self.planned = planned

    async def current(self, sessions, now: datetime) -> Planned:
        return self.planned


async def test_a_plan_made_before_the_node_joined_asks_for_no_second_node(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path}/egs.sqlite")
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    asked_at = NOW - DELAY + timedelta(seconds=30)
    joined = Node("burst-1", "kc", POOL.shape, tuple(f"kc/burst-1/gpu{i}" for i in range(8)), whole=True, pool="burst")
    with transaction(sessions) as session:
        queries.sync_inventory(session, "kc", "kubernetes", [joined], [], NOW)
        row = queries.pool_row(POOL, "admin", asked_at)
        row.target, row.asked_at = 1, asked_at
        session.add(row)
    # made before burst-1 joined: the waiting GPR's window is on the first joining node, burst+1
    before = joining_nodes(POOL, PoolState(1, asked_at), 0, NOW - timedelta(seconds=5))
    placement = Placement("kc", POOL.shape, ("burst+1",), ())
    estimate = Estimate(7, 0, before[0].joins_at, before[0].joins_at + DELAY, placement)
    plan = Plan(admits=(), ends=(), estimates={7: estimate}, approvals=())
    backend = Pool(PoolRequest("egs-burst-1", 1, "", "provisioned", ""))
    scaler = PoolScaler(sessions, Served(Planned(Snapshot(before), plan, NOW)), {"kc": backend}, lambda: NOW, 1.0)
    await scaler.tick()
    assert (backend.asked, backend.ended, backend.kept) == ([], ["egs-burst-1"], ["burst-1"])
    with sessions() as session:
        assert queries.pool_state(queries.find_pool(session, "kc", "burst")) == PoolState(1, asked_at)
    # the next plan saw burst-1 joined: GPR 7's window is on it, and GPR 8's on burst+1, now a second node
    after = (joined, *joining_nodes(POOL, PoolState(1, asked_at), 1, NOW))
    on_joined = Estimate(7, 0, NOW, NOW + DELAY, Placement("kc", POOL.shape, ("burst-1",), ()))
    second = Estimate(8, 0, after[1].joins_at, after[1].joins_at + DELAY, Placement("kc", POOL.shape, ("burst+1",), ()))
    scaler.planning = Served(Planned(Snapshot(after), Plan((), (), {7: on_joined, 8: second}, ()), NOW))
    await scaler.tick()
    assert backend.asked == [1]
