"""What becomes of a GPR whose nodes failed their pre-checks: fail or move, by its slice's policy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from egs_hub.core import lifecycle
from egs_hub.core.bind_failures import settle
from egs_hub.core.model import SlicePolicy, Status

from .builders import NOW, at, gpr, node

NODES = (node("n1", 4), node("n2", 4), node("big", 8, cluster="c2"))
WHY = "node n1 is not Ready"


@dataclass(frozen=True)
class Case:
    policy: str
    failed: tuple[str, ...]
    want_status: Status
    want_reason: str
    gpus: int = 4
    avoided: tuple[tuple[str, str], ...] = ()  # what the GPR avoided before
    unhealthy: frozenset[str] = frozenset()


CASES = {
    "fail": Case("fail", ("n1",), Status.FAILED, WHY),
    "move": Case("move", ("n1",), Status.QUEUED, f"{WHY}; queued again for other nodes"),
    "move, the backend named no node": Case("move", (), Status.FAILED, WHY),
    "move, the only other node has an unhealthy GPU": Case(
        "move",
        ("n1",),
        Status.FAILED,
        f"{WHY}; no other node can serve it: 8 GPUs of any shape cannot be placed: the inventory has 1 such "
        "node(s) with up to 8 GPUs each, and 1 of their GPUs are unhealthy or on quarantined nodes",
        gpus=8,
        avoided=(("c1", "n2"),),
        unhealthy=frozenset({"big-g0"}),
    ),
    "move, every node failed once": Case(
        "move",
        ("n1",),
        Status.FAILED,
        f"{WHY}; no other node can serve it: no schedulable node offers any shape",
        avoided=(("c1", "n2"), ("c2", "big")),
    ),
    "move, a node on another cluster still serves": Case(
        "move", ("n1",), Status.QUEUED, f"{WHY}; queued again for other nodes", avoided=(("c1", "n2"),)
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_settle(case: Case):
    provisioning = lifecycle.admit(gpr(Status.QUEUED, gpus=case.gpus), ("n1-g0",), ("n1",), at(0))[0]
    provisioning = dataclasses.replace(provisioning, avoid_nodes=case.avoided)
    policy = SlicePolicy(bind_failure=case.policy)
    settled, event = settle(provisioning, policy, "c1", case.failed, WHY, NODES, case.unhealthy, "kubernetes", NOW)
    assert (settled.status, settled.status_reason) == (case.want_status, case.want_reason)
    assert (event.actor, event.time) == ("kubernetes", NOW)
    if settled.status is Status.QUEUED:
        assert settled.avoid_nodes == (*case.avoided, ("c1", "n1"))
