"""Run one scenario under several policies, side by side, and summarize each replay.

A trace asking for parts of GPUs on an inventory with MIG layouts is replayed once more per
policy with the GPUs whole (``Inventory.without_mig``): its figures under ``without_mig`` show
what sharing the GPUs changed (issue 23)."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.model import FAIR_SHARE_FIRST, Order
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
    trace: Trace,
    inventory: Inventory,
    policies: Iterable[str],
    *,
    progress: bool = False,
    order: Order = FAIR_SHARE_FIRST,
) -> tuple[dict[str, dict], list[Replay]]:
    """Each policy's figures (in the order given) and its replay; every policy orders each band's
    requests in ``order`` (core/queue.py)."""
    runs = [replay(trace, inventory, policy, progress=progress, order=order) for policy in policies]
    report = {run.policy: summarize(run) for run in runs}
    if inventory.instance_shapes() and any(job.share is not None for job in trace.jobs):
        whole = inventory.without_mig()
        for run in runs:
            alone = summarize(replay(trace, whole, run.policy, progress=progress, order=order))
            report[run.policy]["without_mig"] = {key: alone[key] for key in WITHOUT_MIG_KEYS}
    return report, runs


WITHOUT_MIG_KEYS = ("started", "wait_mean_s", "wait_p50_s", "wait_p95_s", "util_bound", "util_used")
