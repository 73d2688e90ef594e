"""What becomes of a GPR whose nodes failed their pre-checks when it was being bound.

Nothing was bound (a backend checks every node before it changes any), so the GPR can
wait again. Its slice's ``bind_failure`` policy says whether it does: "fail" ends it,
"move" queues it again, never to be placed on the nodes that failed. A GPR that no
other node could ever serve fails all the same, saying why.
"""

from __future__ import annotations

from datetime import datetime

from . import lifecycle
from .model import GPR, Event, Node, SlicePolicy
from .planner import unservable_reason


def settle(
    gpr: GPR,
    policy: SlicePolicy,
    cluster: str,
    failed: tuple[str, ...],
    reason: str,
    nodes: tuple[Node, ...],
    unhealthy: frozenset[str],
    actor: str,
    now: datetime,
) -> tuple[GPR, Event]:
    """Fail or move ``gpr``, whose ``failed`` nodes of ``cluster`` did not pass (``reason``);
    ``nodes`` and ``unhealthy`` are the inventory the planner would place it in."""
    if policy.bind_failure == "move" and failed:
        avoid = {*gpr.avoid_nodes, *((cluster, name) for name in failed)}
        others = tuple(n for n in nodes if n.key not in avoid)
        unservable = unservable_reason(gpr.spec, others, unhealthy)
        if unservable is None:
            return lifecycle.move_off(gpr, cluster, failed, actor=actor, reason=reason, now=now)
        reason = f"{reason}; no other node can serve it: {unservable}"
    return lifecycle.fail(gpr, actor=actor, reason=reason, now=now)
