"""Auto-GPR (core/auto_gpr.py): what a start gets, as the module's table says, and the GPR filed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core.auto_gpr import File, Nothing, Wait, auto_spec, decide
from egs_hub.core.model import GPRSpec, Status
from egs_hub.core.templates import GPRTemplate

from .builders import at, gpr

QUEUED_ANY = gpr(Status.QUEUED, gpr_id=4, gpus=1)
QUEUED_EAST = gpr(Status.QUEUED, gpr_id=5, gpus=1, cluster="east")
QUEUED_WEST = gpr(Status.QUEUED, gpr_id=3, gpus=1, cluster="west")
PENDING = gpr(Status.PENDING_APPROVAL, gpr_id=6, gpus=9)
HELD = gpr(Status.PROVISIONED, gpr_id=2, gpus=1)

DECISIONS = {
    # name: (template, wanted, cluster, holds GPUs there, the slice's active GPRs, estimated starts, decision)
    "no policy": (None, 2, "east", False, [], {}, Nothing()),
    "no GPUs asked": ("one", 0, "east", False, [], {}, Nothing()),
    "GPUs held on the cluster": ("one", 2, "east", True, [HELD], {}, Nothing()),
    "nothing waiting: file": ("one", 2, "east", False, [], {}, File("one")),
    "held elsewhere only: file": ("one", 1, "east", False, [HELD], {}, File("one")),
    "waiting for another cluster only: file": ("one", 1, "east", False, [QUEUED_WEST], {}, File("one")),
    "waiting for any cluster: wait": ("one", 1, "east", False, [QUEUED_WEST, QUEUED_ANY], {}, Wait(4)),
    "the soonest estimate is waited for": (
        "one",
        1,
        "east",
        False,
        [QUEUED_ANY, QUEUED_EAST],
        {4: at(3), 5: at(1)},
        Wait(5),
    ),
    "an estimate beats none, then the lowest id": (
        "one",
        1,
        "east",
        False,
        [PENDING, QUEUED_ANY, QUEUED_EAST],
        {5: at(2)},
        Wait(5),
    ),
    "pending approval is waited for": ("one", 1, None, False, [PENDING], {}, Wait(6)),
    "a local start waits for any cluster's": ("one", 1, None, False, [QUEUED_WEST], {}, Wait(3)),
}


@pytest.mark.parametrize(
    ("template", "wanted", "cluster", "holds", "gprs", "starts", "want"), DECISIONS.values(), ids=DECISIONS.keys()
)
def test_decide(template, wanted, cluster, holds, gprs, starts, want):
    assert decide(template, wanted, cluster, holds, gprs, starts) == want


@given(
    statuses=st.lists(st.sampled_from(list(Status)), max_size=6),
    wanted=st.integers(0, 8),
    holds=st.booleans(),
)
def test_never_files_beside_a_waiting_gpr_of_the_cluster(statuses, wanted, holds):
    """Whatever the slice has, a second GPR is never filed while one it could use waits, and nothing is
    filed without GPUs asked or with GPUs held."""
    gprs = [gpr(status, gpr_id=i + 1, gpus=1) for i, status in enumerate(statuses)]
    decision = decide("one", wanted, "east", holds, gprs, {})
    waiting = [g.id for g in gprs if g.status in (Status.QUEUED, Status.PENDING_APPROVAL)]
    if wanted == 0 or holds:
        assert decision == Nothing()
    elif waiting:
        assert decision == Wait(min(waiting))
    else:
        assert decision == File("one")


SPECS = {
    # name: (template, wanted, cluster, the GPR filed)
    "GPU count: the GPUs asked, on the start's cluster": (
        GPRTemplate("small", timedelta(hours=2), gpus=1, cluster="west", priority=150, preemptible=False),
        3,
        "east",
        GPRSpec(
            slice="team",
            duration=timedelta(hours=2),
            gpus=3,
            cluster="east",
            priority=150,
            preemptible=False,
            name="auto: a",
            template="small",
        ),
    ),
    "whole nodes are kept; no cluster: the template's": (
        GPRTemplate("node", timedelta(hours=8), nodes=1, shape="H100-80GB", cluster="west"),
        2,
        None,
        GPRSpec(
            slice="team",
            duration=timedelta(hours=8),
            nodes=1,
            shape="H100-80GB",
            cluster="west",
            name="auto: a",
            template="node",
        ),
    ),
}


@pytest.mark.parametrize(("template", "wanted", "cluster", "want"), SPECS.values(), ids=SPECS.keys())
def test_auto_spec(template, wanted, cluster, want):
    assert auto_spec(template, "team", wanted, cluster, "auto: a") == want
