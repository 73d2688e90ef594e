"""Failing GPUs in provisioned GPRs (issue 22, item 3): which GPUs failed, and the GPR with those of one
node replaced. No I/O, no clock.

Vocabulary: a GPU has *failed* when it is lost (stopped reporting), has uncorrected ECC errors
alerting, or a fatal XID (core/checks.py FATAL_XIDS) alerting. Its node is then quarantined, whatever
the slice's policy (no new work goes there); the slice's ``remediation`` policy says what becomes of
the GPR holding it: ``replace`` moves the GPR's GPUs on that node to as many GPUs of one healthy node
of the same cluster and shape, free now and planned for nobody until the window ends
(planner.replacement), for the rest of the window; ``notify`` tells its holders only; ``off`` leaves
the alert alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from .checks import FATAL_XIDS
from .model import GPR, Event, NodeReplacement, Status
from .samples import GpuSample
from .units import format_time

ACTOR = "remediation"


def failure(sample: GpuSample | None, alerts: frozenset[str]) -> str | None:
    """Why a GPU with this latest ``sample`` and these active alert kinds has failed; None: it has not."""
    if "gpu-lost" in alerts:
        return "it stopped reporting (fallen off the bus or lost)"
    if "ecc" in alerts:
        count = sample.ecc_errors if sample is not None else None
        return "uncorrected ECC errors" + (f" ({count})" if count is not None else "")
    if "xid" in alerts and sample is not None and sample.xid is not None and sample.xid in FATAL_XIDS:
        return f"XID {sample.xid} ({FATAL_XIDS[sample.xid]})"
    return None


def failed_gpus(
    gpus: Sequence[str], samples: Mapping[str, GpuSample], alerts: Mapping[str, frozenset[str]]
) -> dict[str, str]:
    """Of ``gpus`` (by inventory UUID, with their samples matched), those that failed, with why.
    ``alerts`` are keyed by the sample's UUID when the GPU has one, else by its own."""
    found = {}
    for uuid in gpus:
        sample = samples.get(uuid)
        why = failure(sample, alerts.get(sample.uuid if sample is not None else uuid, frozenset()))
        if why is not None:
            found[uuid] = why
    return found


def replaced(
    gpr: GPR, old: Sequence[str], new: Sequence[str], failed_node: str, node: str, why: str, now: datetime
) -> tuple[GPR, Event]:
    """The provisioned GPR holding ``new`` in place of ``old`` (the GPUs of ``failed_node``, in place),
    with the event its holders read."""
    if gpr.status is not Status.PROVISIONED or len(old) != len(new) or not set(old) <= set(gpr.bound_gpus):
        raise ValueError(f"GPR {gpr.id} cannot swap {list(old)} for {list(new)}")
    swap = dict(zip(old, new, strict=True))
    gpus = tuple(swap.get(g, g) for g in gpr.bound_gpus)
    nodes = tuple(dict.fromkeys(node if n == failed_node else n for n in gpr.bound_nodes))
    event = Event(
        kind="node-replaced",
        actor=ACTOR,
        reason=f"node {failed_node} was replaced by {node} at {format_time(now)} ({why}); restart from your checkpoint",
        time=now,
        gpr_id=gpr.id,
        slice=gpr.spec.slice,
        data={"failed_node": failed_node, "node": node, "old_gpus": list(old), "new_gpus": list(new)},
    )
    replaced = (*gpr.replaced, NodeReplacement(failed_node, node, now))
    return replace(gpr, bound_gpus=gpus, bound_nodes=nodes, replaced=replaced, updated_at=now), event
