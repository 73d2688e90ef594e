"""Auto-GPR for a start (core/auto_gpr.py decides): the one use case a spawner's start (PUT servers/...)
and the pod webhook call. It reads the slice's active GPRs from the planning state, its held GPUs on the
cluster from the store, and files through commands.submit, so the filed GPR is checked, approved or
rejected by the slice's policy like any other.

A start is never refused for what happens here: a GPR that cannot be filed (the template is gone, the
policy refuses the size) or is rejected comes back as ``problem``, said to the user or on the pod's
namespace, and the server or pod goes on without GPUs.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ..backends.kubernetes.events import Notice
from ..backends.kubernetes.gpr_resources import namespace_requester
from ..core import model as core
from ..core.auto_gpr import File, Nothing, auto_spec, decide
from ..core.errors import InvalidRequest, PolicyViolation
from ..core.snapshot import Estimate
from ..core.units import format_time
from ..store import queries
from .commands import template_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """The GPR a start waits for (``filed``: filed for it now) with its estimate when queued; or no GPR
    and the ``problem`` that kept one from being filed."""

    gpr: core.GPR | None
    filed: bool = False
    estimate: Estimate | None = None
    problem: str | None = None


class AutoGPRs:
    """Files auto-GPRs for the service ``egs`` (app.EGSService: its store, planning and commands), one start
    of a slice at a time: two starts at once (a pod made again, two members' servers) do not file two."""

    def __init__(self, egs):
        self.egs = egs
        self._locks: dict[str, asyncio.Lock] = {}

    async def for_start(
        self, slice_name: str, wanted: int, cluster: str | None, requested_by: str, name: str
    ) -> Outcome | None:
        """What a start of slice ``slice_name`` asking ``wanted`` GPUs on ``cluster`` gets: None when nothing
        is filed or waited for (no policy, no GPUs asked, GPUs held)."""
        async with self._locks.setdefault(slice_name, asyncio.Lock()):
            return await self._for_start(slice_name, wanted, cluster, requested_by, name)

    async def _for_start(
        self, slice_name: str, wanted: int, cluster: str | None, requested_by: str, name: str
    ) -> Outcome | None:
        egs = self.egs
        now = egs.clock()
        with egs.sessions() as session:
            state = egs.planning.state.current(session, now)
            policy = state.policies.get(slice_name)
            if policy is None or policy.auto_gpr is None or wanted <= 0:
                return None
            holds = bool(queries.slice_usable_gpus(session, slice_name, cluster=cluster))
            gprs = [g for g in state.gprs.values() if g.spec.slice == slice_name]
        plan = (await egs.planning.current(egs.sessions, now)).plan
        starts = {gpr_id: estimate.start for gpr_id, estimate in plan.estimates.items()}
        decision = decide(policy.auto_gpr, wanted, cluster, holds, gprs, starts)
        if isinstance(decision, Nothing):
            return None
        if not isinstance(decision, File):
            waited = next(g for g in gprs if g.id == decision.gpr_id)
            return Outcome(waited, estimate=plan.estimates.get(waited.id))
        try:
            with egs.sessions() as session:
                template = template_for(session, decision.template, slice_name)
            spec = auto_spec(template, slice_name, wanted, cluster, name)
            submitted = await egs.commands.submit(spec, requested_by, admin=False)
        except (InvalidRequest, PolicyViolation) as e:
            problem = f"no GPR could be filed from template {decision.template!r} (the slice's auto_gpr): {e}"
            log.info("slice %s: %s", slice_name, problem)
            return Outcome(None, problem=problem)
        gpr = submitted.gpr
        if gpr.status is core.Status.REJECTED:
            problem = f"GPR {gpr.id} filed from template {template.name!r} was rejected: {gpr.status_reason}"
            return Outcome(gpr, filed=True, problem=problem)
        return Outcome(gpr, filed=True, estimate=submitted.estimate)

    async def for_pod(self, cluster: str, slice_name: str, namespace: str, pod: str, wanted: int) -> None:
        """A GPU pod admitted in ``namespace`` on ``cluster`` (the pod webhook): for_start, then an Event on
        the namespace saying what came of it. A failure is logged: the pod is admitted already."""
        try:
            requester = namespace_requester(cluster, namespace)
            outcome = await self.for_start(slice_name, wanted, cluster, requester, f"auto: pod {namespace}/{pod}")
            if outcome is None:
                return
            notice = pod_notice(outcome, f"pod {namespace}/{pod}", wanted)
            backend = self.egs.registry.states[cluster].backend
            await backend.record_slice_event([namespace], notice, self.egs.clock())
        except Exception:
            log.exception("slice %s: auto-GPR for pod %s/%s on %s failed", slice_name, namespace, pod, cluster)


def pod_notice(outcome: Outcome, pod: str, wanted: int) -> Notice:
    """The Event a pod's auto-GPR outcome is told by."""
    if outcome.gpr is None or outcome.problem is not None:
        return Notice("Warning", "GPRNotFiled", f"egs-hub: {pod} asks {wanted} GPU(s); {outcome.problem}")
    gpr, estimate = outcome.gpr, outcome.estimate
    if gpr.status is core.Status.PENDING_APPROVAL:
        when = "it waits for an admin's approval"
    elif estimate is not None and estimate.start is not None:
        when = f"position {estimate.position} in the queue, estimated to start at {format_time(estimate.start)}"
    else:
        when = f"it is {gpr.status.value}"
    if outcome.filed:
        return Notice("Normal", "GPRFiled", f"egs-hub filed GPR {gpr.id} for {pod} ({wanted} GPU(s)): {when}")
    return Notice("Normal", "GPRWaiting", f"egs-hub: {pod} waits for GPR {gpr.id} of slice {gpr.spec.slice}: {when}")
