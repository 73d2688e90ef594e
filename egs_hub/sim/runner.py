"""Run one scenario under several policies, side by side, and summarize each replay."""

from __future__ import annotations

from collections.abc import Iterable

from .cluster import Inventory
from .engine import POLICIES, Replay, replay
from .metrics import summarize
from .trace import SimInputError, Trace

POLICY_CHOICES = (*POLICIES, "all")


def policies_for(choice: str) -> list[str]:
    """``all`` is every policy, ours first; otherwise the one named."""
    if choice == "all":
        return list(POLICIES)
    if choice not in POLICIES:
        raise SimInputError(f"--policy must be one of {', '.join(POLICY_CHOICES)}, got {choice!r}")
    return [choice]


def run_policies(
    trace: Trace, inventory: Inventory, policies: Iterable[str], *, progress: bool = False
) -> tuple[dict[str, dict], list[Replay]]:
    """Each policy's figures (in the order given) and its replay."""
    runs = [replay(trace, inventory, policy, progress=progress) for policy in policies]
    return {run.policy: summarize(run) for run in runs}, runs
