"""A slice's policy applied to a GPR: what is refused, what needs an admin."""

from __future__ import annotations

from .errors import PolicyViolation
from .model import GPRSpec, SlicePolicy
from .units import format_duration


def check_request(spec: GPRSpec, policy: SlicePolicy) -> None:
    """Refuse what no approval can allow members to ask for."""
    if spec.priority > policy.max_priority:
        raise PolicyViolation(
            "priority",
            f"priority {spec.priority} is above this slice's max_priority {policy.max_priority}; "
            "ask an admin to raise it",
        )


def approval_reasons(spec: GPRSpec, gpu_count: int, policy: SlicePolicy) -> list[str]:
    """Why this GPR needs an admin's approval; empty when policy approves it.

    ``gpu_count`` is the GPUs the GPR would hold (``nodes`` times GPUs per node).
    """
    reasons = []
    if policy.max_duration is not None and spec.duration > policy.max_duration:
        reasons.append(
            f"duration {format_duration(spec.duration)} is over the slice's max_duration "
            f"{format_duration(policy.max_duration)}"
        )
    if policy.max_gpus is not None and gpu_count > policy.max_gpus:
        reasons.append(f"{gpu_count} GPUs is over the slice's quota of {policy.max_gpus} GPUs")
    if policy.auto_approve_max_gpus is not None and gpu_count > policy.auto_approve_max_gpus:
        reasons.append(f"{gpu_count} GPUs is over the auto-approval limit of {policy.auto_approve_max_gpus}")
    return reasons
