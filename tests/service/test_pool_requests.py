"""What the node-pool pass does with each of a pool's requests to the autoscaler (service/pools.py), as a
rule table over a backend double that holds the requests: a failed one stops asks until the retry, one
whose nodes all joined goes, one that ended while its nodes were awaited tells the admin to check the
node group's labels, and one still pending stays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.backends.kubernetes.pools import PoolRequest
from egs_hub.core.model import Shape
from egs_hub.core.node_pools import NodePool, PoolState
from egs_hub.service.pools import PoolScaler, Step

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
