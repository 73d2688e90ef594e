"""Slice policy: what check_request refuses and why approval_reasons asks for an admin."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from egs_hub.core.errors import PolicyViolation
from egs_hub.core.model import GPRSpec, Project, SlicePolicy
from egs_hub.core.planner import gpu_count
from egs_hub.core.policy import approval_reasons, check_request, project_approval_reasons

from .builders import node, spec


@pytest.mark.parametrize(
    ("priority", "max_priority", "want_refused"),
    [
        (100, 200, False),
        (200, 200, False),  # at the limit is allowed
        (201, 200, True),
        (300, 300, False),  # the default policy allows every priority
    ],
)
def test_check_request(priority: int, max_priority: int, want_refused: bool):
    policy = SlicePolicy(max_priority=max_priority)
    if not want_refused:
        check_request(spec(priority=priority), policy)
        return
    with pytest.raises(PolicyViolation) as raised:
        check_request(spec(priority=priority), policy)
    assert raised.value.field == "priority"
    assert f"max_priority {max_priority}" in str(raised.value)


@dataclass(frozen=True)
class ApprovalCase:
    spec: GPRSpec
    gpu_count: int
    policy: SlicePolicy
    want: list[str]  # the reasons, in order; empty when policy approves
    week_gpu_hours: float = 0.0  # what the slice used in the rolling week
    month_cost: float = 0.0  # what its GPRs reserved this month
    cost: float | None = None  # this GPR's estimated cost


APPROVALS = {
    "default policy approves anything": ApprovalCase(spec(gpus=64, hours=1000), 64, SlicePolicy(), want=[]),
    "duration at max": ApprovalCase(spec(hours=24), 1, SlicePolicy(max_duration=timedelta(days=1)), want=[]),
    "duration over max": ApprovalCase(
        spec(hours=26),
        1,
        SlicePolicy(max_duration=timedelta(days=1)),
        want=["duration 1d2h is over the slice's max_duration 1d"],
    ),
    "gpus at quota": ApprovalCase(spec(gpus=8), 8, SlicePolicy(max_gpus=8), want=[]),
    "gpus over quota": ApprovalCase(
        spec(gpus=9), 9, SlicePolicy(max_gpus=8), want=["9 GPUs is over the slice's quota of 8 GPUs"]
    ),
    "gpus at auto-approval": ApprovalCase(spec(gpus=4), 4, SlicePolicy(auto_approve_max_gpus=4), want=[]),
    "gpus over auto-approval": ApprovalCase(
        spec(gpus=5),
        5,
        SlicePolicy(auto_approve_max_gpus=4),
        want=["5 GPUs is over the auto-approval limit of 4"],
    ),
    "nodes counted as their GPUs": ApprovalCase(
        spec(nodes=2), 16, SlicePolicy(max_gpus=8), want=["16 GPUs is over the slice's quota of 8 GPUs"]
    ),
    "every reason at once": ApprovalCase(
        spec(gpus=16, hours=48),
        16,
        SlicePolicy(max_duration=timedelta(hours=8), max_gpus=8, auto_approve_max_gpus=2),
        want=[
            "duration 2d is over the slice's max_duration 8h",
            "16 GPUs is over the slice's quota of 8 GPUs",
            "16 GPUs is over the auto-approval limit of 2",
        ],
    ),
    "gpu-hours up to the weekly limit": ApprovalCase(
        spec(gpus=2, hours=8), 2, SlicePolicy(max_gpu_hours=120), want=[], week_gpu_hours=104
    ),
    "gpu-hours over the weekly limit": ApprovalCase(
        spec(gpus=2, hours=8),
        2,
        SlicePolicy(max_gpu_hours=120),
        want=["this GPR's 16 GPU-hours would bring the slice to 130 of its 120 GPU-hours per rolling week"],
        week_gpu_hours=114,
    ),
    "gpu-hours alone over the weekly limit": ApprovalCase(
        spec(nodes=2, hours=10),
        16,
        SlicePolicy(max_gpu_hours=100),
        want=["this GPR's 160 GPU-hours would bring the slice to 160 of its 100 GPU-hours per rolling week"],
    ),
    "gpu-hours written with at most two decimals": ApprovalCase(
        spec(gpus=3, hours=20 / 60),
        3,
        SlicePolicy(max_gpu_hours=12.5),
        want=["this GPR's 1 GPU-hours would bring the slice to 12.67 of its 12.5 GPU-hours per rolling week"],
        week_gpu_hours=35 / 3,
    ),
    "no weekly limit: usage does not matter": ApprovalCase(spec(gpus=8), 8, SlicePolicy(), want=[], week_gpu_hours=1e6),
    "over the month's budget": ApprovalCase(
        spec(gpus=2),
        2,
        SlicePolicy(max_cost_month=100),
        want=["this GPR's estimated cost 30.00 would bring the slice's month to 105.50 of its budget of 100.00"],
        month_cost=75.5,
        cost=30.0,
    ),
    "within the month's budget, to the cent": ApprovalCase(
        spec(gpus=2), 2, SlicePolicy(max_cost_month=100), want=[], month_cost=70.0, cost=30.0
    ),
    "no price: a budget cannot be passed": ApprovalCase(
        spec(gpus=2), 2, SlicePolicy(max_cost_month=1), want=[], month_cost=99.0, cost=None
    ),
}


@pytest.mark.parametrize("case", APPROVALS.values(), ids=APPROVALS.keys())
def test_approval_reasons(case: ApprovalCase):
    reasons = approval_reasons(case.spec, case.gpu_count, case.policy, case.week_gpu_hours, case.month_cost, case.cost)
    assert reasons == case.want


@pytest.mark.parametrize(
    ("wanted", "want_count"),
    [
        (spec(gpus=3), 3),
        (spec(nodes=2), 16),  # the largest node it may get: 8 GPUs
        (spec(nodes=2, shape="A100"), 8),  # A100 nodes have 4
        (spec(nodes=1, cluster="c2"), 2),  # the 8-GPU node in c2 is unschedulable
        (spec(nodes=1, shape="B200"), 0),  # nothing offers B200
    ],
)
def test_gpu_count(wanted: GPRSpec, want_count: int):
    nodes = (
        node("h1", 8, "H100"),
        node("a1", 4, "A100"),
        node("l1", 2, "L4", cluster="c2"),
        node("h2", 8, "H100", cluster="c2", schedulable=False),
    )
    assert gpu_count(wanted, nodes) == want_count


@pytest.mark.parametrize(
    ("project", "args", "want"),
    [
        (Project("x"), (8, 10.0, 100.0, 100, 1e6, 1e6), []),  # no quota: nothing to pass
        (
            Project("x", max_gpus=8),
            (2, 1.0, None, 7, 0.0, 0.0),
            ["2 more GPUs would bring project x to 9 GPUs at once, over its quota of 8"],
        ),
        (Project("x", max_gpus=8), (2, 1.0, None, 6, 0.0, 0.0), []),
        (
            Project("x", max_gpu_hours=100),
            (4, 2.5, None, 0, 95.0, 0.0),
            ["this GPR's 10 GPU-hours would bring project x to 105 of its 100 GPU-hours per rolling week"],
        ),
        (
            Project("x", max_cost_month=50),
            (1, 1.0, 12.5, 0, 0.0, 40.0),
            ["this GPR's estimated cost 12.50 would bring project x's month to 52.50 of its budget of 50.00"],
        ),
        (Project("x", max_cost_month=50), (1, 1.0, None, 0, 0.0, 49.0), []),  # no price
    ],
    ids=["none", "gpus-over", "gpus-within", "gpu-hours", "budget", "unpriced"],
)
def test_project_approval_reasons(project, args, want):
    assert project_approval_reasons(project, *args) == want
