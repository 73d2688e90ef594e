"""A slice's policy applied to a GPR: what is refused, what needs an admin."""

from __future__ import annotations

from datetime import timedelta

from .errors import InvalidRequest, PolicyViolation
from .model import GPRSpec, Project, SlicePolicy
from .units import format_duration


def check_request(spec: GPRSpec, policy: SlicePolicy) -> None:
    """Refuse what no approval can allow members to ask for."""
    if spec.priority > policy.max_priority:
        raise PolicyViolation(
            "priority",
            f"priority {spec.priority} is above this slice's max_priority {policy.max_priority}; "
            "ask an admin to raise it",
        )
    longest = policy.max_idle_timeout
    if longest is not None and spec.idle_timeout is not None and spec.idle_timeout > longest:
        raise PolicyViolation(
            "idle_timeout",
            f"idle_timeout {format_duration(spec.idle_timeout)} is above this slice's max_idle_timeout "
            f"{format_duration(longest)}; ask for at most that",
        )


def check_sharing(spec: GPRSpec, policy: SlicePolicy) -> None:
    """Refuse a share of a GPU to a slice whose policy keeps its GPUs to itself (admins too: the
    slices a shared GPU is shared with all allow it)."""
    if spec.gpu_share is not None and not policy.gpu_sharing:
        raise PolicyViolation(
            "gpu_share",
            f"slice {spec.slice}'s policy does not allow shared GPUs (gpu_sharing); ask for whole GPUs or "
            "MIG instances, or ask an admin to allow sharing",
        )


def check_policy(policy: SlicePolicy) -> None:
    """Refuse a policy whose fields contradict each other."""
    default, longest = policy.idle_timeout, policy.max_idle_timeout
    if default is not None and longest is not None and default > longest:
        raise InvalidRequest(
            "policy.idle_timeout",
            f"policy.idle_timeout {format_duration(default)} is above policy.max_idle_timeout "
            f"{format_duration(longest)}; lower it or raise the maximum",
        )


def approval_reasons(
    spec: GPRSpec,
    gpu_count: float,
    policy: SlicePolicy,
    week_gpu_hours: float = 0.0,
    month_cost: float = 0.0,
    cost: float | None = None,
) -> list[str]:
    """Why this GPR needs an admin's approval; empty when policy approves it.

    ``gpu_count`` is the GPUs the GPR would hold (``nodes`` times GPUs per node), in
    GPU-equivalents (a MIG instance is its share of a GPU, core/sharing.py);
    ``week_gpu_hours`` is what the slice used in the rolling week (quota.week_gpu_hours);
    ``month_cost`` what the slice's GPRs reserved this month, and ``cost`` this GPR's
    estimated cost (core/cost.py; None: it has no price).
    """
    reasons = []
    if policy.max_duration is not None and spec.duration > policy.max_duration:
        reasons.append(
            f"duration {format_duration(spec.duration)} is over the slice's max_duration "
            f"{format_duration(policy.max_duration)}"
        )
    if policy.max_gpus is not None and gpu_count > policy.max_gpus:
        reasons.append(f"{_format_number(gpu_count)} GPUs is over the slice's quota of {policy.max_gpus} GPUs")
    if policy.auto_approve_max_gpus is not None and gpu_count > policy.auto_approve_max_gpus:
        reasons.append(
            f"{_format_number(gpu_count)} GPUs is over the auto-approval limit of {policy.auto_approve_max_gpus}"
        )
    asked = gpu_count * (spec.duration / timedelta(hours=1))
    if policy.max_gpu_hours is not None and week_gpu_hours + asked > policy.max_gpu_hours:
        reasons.append(
            f"this GPR's {_format_number(asked)} GPU-hours would bring the slice to "
            f"{_format_number(week_gpu_hours + asked)} of its {_format_number(policy.max_gpu_hours)} "
            "GPU-hours per rolling week"
        )
    if policy.max_cost_month is not None and cost is not None and month_cost + cost > policy.max_cost_month:
        reasons.append(
            f"this GPR's estimated cost {cost:.2f} would bring the slice's month to {month_cost + cost:.2f} "
            f"of its budget of {policy.max_cost_month:.2f}"
        )
    return reasons


def project_approval_reasons(
    project: Project,
    gpu_count: float,
    hours: float,
    cost: float | None,
    held_gpus: float,
    week_gpu_hours: float,
    month_cost: float,
) -> list[str]:
    """Why a GPR needs an admin's approval for its project's quota, which caps the sum of the
    project's slices: ``held_gpus`` they hold now, ``week_gpu_hours`` they used in the rolling
    week, ``month_cost`` their GPRs reserved this month; the GPR holds ``gpu_count`` GPUs for
    ``hours`` hours at an estimated ``cost`` (None: no price)."""
    reasons = []
    name = f"project {project.name}"
    if project.max_gpus is not None and held_gpus + gpu_count > project.max_gpus:
        reasons.append(
            f"{_format_number(gpu_count)} more GPUs would bring {name} to {_format_number(held_gpus + gpu_count)} "
            f"GPUs at once, over its quota of "
            f"{project.max_gpus}"
        )
    asked = gpu_count * hours
    if project.max_gpu_hours is not None and week_gpu_hours + asked > project.max_gpu_hours:
        reasons.append(
            f"this GPR's {_format_number(asked)} GPU-hours would bring {name} to "
            f"{_format_number(week_gpu_hours + asked)} of its {_format_number(project.max_gpu_hours)} "
            "GPU-hours per rolling week"
        )
    if project.max_cost_month is not None and cost is not None and month_cost + cost > project.max_cost_month:
        reasons.append(
            f"this GPR's estimated cost {cost:.2f} would bring {name}'s month to {month_cost + cost:.2f} "
            f"of its budget of {project.max_cost_month:.2f}"
        )
    return reasons


def _format_number(hours: float) -> str:
    """At most two decimals, none when whole: 16.0 is "16", 2/3 is "0.67"."""
    return f"{hours:.2f}".rstrip("0").rstrip(".")
