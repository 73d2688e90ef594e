"""Auto-GPR: a GPR filed for a server or a pod that asks for GPUs its slice does not hold.

Vocabulary: a slice policy's ``auto_gpr`` names a template (core/templates.py). A *start*
is a server starting with GPUs asked (the slice spawners' form) or a GPU pod made in one
of the slice's namespaces (the pod webhook), on a cluster (None: any the template allows).
What a start gets, over the slice's active GPRs:

| the slice                                                    | decision                        |
|--------------------------------------------------------------|---------------------------------|
| no ``auto_gpr`` in its policy, or no GPUs asked              | Nothing                         |
| holds GPUs on the cluster (a GPR provisioning or provisioned) | Nothing: the start uses them    |
| has a GPR waiting that could serve the cluster (queued, or   | Wait for it (the soonest        |
| pending approval; one for any cluster counts)                | estimated start, then lowest id)|
| else                                                         | File one from the template      |

A waiting GPR is waited for rather than another filed: the slice's GPUs serve all its
members' servers, and a pod that is made again (a Deployment's, a Job's) must not file a
GPR each time. The filed GPR is the template's, sized to the GPUs asked when the template
gives a GPU count (one giving whole nodes keeps them), on the start's cluster; it is then
checked against the slice's policy like any GPR (it may need approval).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from .model import GPR, GPRSpec, Status
from .templates import GPRTemplate, fill

WAITING = (Status.QUEUED, Status.PENDING_APPROVAL)


@dataclass(frozen=True)
class Nothing:
    """Nothing is filed: the start has its GPUs, or no policy or GPUs asked."""


@dataclass(frozen=True)
class Wait:
    gpr_id: int


@dataclass(frozen=True)
class File:
    template: str


Decision = Nothing | Wait | File


def decide(
    template: str | None,
    wanted: int,
    cluster: str | None,
    holds_gpus: bool,
    gprs: Iterable[GPR],
    starts: Mapping[int, datetime | None],
) -> Decision:
    """The table above. ``holds_gpus``: the slice holds GPUs on ``cluster``; ``gprs``: the slice's
    active GPRs; ``starts``: estimated starts of its queued ones (missing or None: not known)."""
    if template is None or wanted <= 0 or holds_gpus:
        return Nothing()
    waiting = [g for g in gprs if g.status in WAITING and (cluster is None or g.spec.cluster in (None, cluster))]
    if not waiting:
        return File(template)

    def soonest(gpr: GPR) -> tuple[bool, float, int]:
        start = starts.get(gpr.id)
        return (start is None, start.timestamp() if start is not None else 0.0, gpr.id)

    return Wait(min(waiting, key=soonest).id)


def auto_spec(template: GPRTemplate, slice_name: str, wanted: int, cluster: str | None, name: str) -> GPRSpec:
    """The GPR filed for a start: the template's, for ``slice_name``, its GPU count ``wanted`` when the
    template counts GPUs, on ``cluster`` when the start has one, named ``name``."""
    given: dict = {"slice": slice_name, "name": name, "template": template.name}
    if template.gpus is not None:
        given["gpus"] = wanted
    if cluster is not None:
        given["cluster"] = cluster
    return GPRSpec(**fill(template, given))
