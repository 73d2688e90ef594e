"""The GPR custom resource (``gpuprovisionrequests.egs.io/v1``) as plain dicts: spec in, status out.

Vocabulary: a *GPR resource* is a GpuProvisionRequest object applied with
kubectl in a slice's namespace; its *link* is the GPR egs-hub made from it (the
store's ``gpr_resources`` table, by the resource's uid). Accepting a resource
reads its spec as the body of ``POST /gprs``:

| resource                  | POST /gprs field |
|---------------------------|------------------|
| ``metadata.name``         | ``name``         |
| the namespace's slice     | ``slice``        |
| ``spec.startAfter``       | ``start_after``  |
| ``spec.idleTimeout``      | ``idle_timeout`` |
| ``spec.gpuShare``         | ``gpu_share``    |
| ``spec.cluster``, or the  | ``cluster``      |
| cluster it was applied on |                  |
| other ``spec`` fields     | the same name    |

Its ``status`` follows the GPR (``phase`` is the GPR's status) with the
conditions ``Accepted`` (True: a GPR was made; False: why not, naming the
resource's field) and ``Provisioned``. An edit of a linked resource's spec (a
new ``metadata.generation``) is read once, as ``PATCH /gprs/{id}`` by the GPR's
owner: ``observedGeneration`` is the generation the GPR follows, and the
condition ``SpecApplied`` (once the spec was edited; its own ``observedGeneration``
is the edit's) says whether the latest edit reached the GPR or why not. A condition keeps its
``lastTransitionTime`` while its status stays the same, as
``meta.SetStatusCondition`` does, so recomputing an unchanged status changes
nothing. The finalizer ``egs.io/gpr`` keeps a deleted resource until its GPR
is cancelled or its GPUs are back.

No I/O here: gpr_api.py talks to the API server, service/gpr_sync.py decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from ...core.errors import Conflict, IllegalTransition, InvalidRequest, PolicyViolation
from ...core.model import GPR, GPRSpec, Status
from ...core.requests import GPRCreate, parse_body
from ...core.snapshot import Estimate
from ...core.templates import GPRTemplate
from ...core.units import format_time

GROUP = "egs.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "gpuprovisionrequests"
KIND = "GpuProvisionRequest"
FINALIZER = "egs.io/gpr"
INVALID_PHASE = "invalid"
SPEC_APPLIED = "SpecApplied"
# What refuses an edit of a resource's spec (handlers/gprs.edit_gpr, edited_spec)
EDIT_REFUSALS = (InvalidRequest, PolicyViolation, IllegalTransition, Conflict)

# spec field -> POST /gprs field (see the module's table)
SPEC_FIELDS = {
    "template": "template",
    "duration": "duration",
    "gpus": "gpus",
    "nodes": "nodes",
    "priority": "priority",
    "shape": "shape",
    "cluster": "cluster",
    "startAfter": "start_after",
    "idleTimeout": "idle_timeout",
    "preemptible": "preemptible",
    "gpuShare": "gpu_share",
}
RESOURCE_FIELDS = {
    **{api: f"spec.{name}" for name, api in SPEC_FIELDS.items()},
    "slice": "metadata.namespace",
    "name": "metadata.name",
    "body": "spec",
}


@dataclass(frozen=True)
class ResourceRef:
    """Where a GPR resource is: its cluster, namespace, name and uid."""

    cluster: str
    namespace: str
    name: str
    uid: str

    def involved_object(self) -> dict:
        """The resource as an Event's involvedObject."""
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


def ref_of(obj: Mapping, cluster: str) -> ResourceRef:
    meta = obj["metadata"]
    return ResourceRef(cluster, meta["namespace"], meta["name"], meta["uid"])


def requested_by(ref: ResourceRef) -> str:
    """Who asked, for a GPR made from a resource: the API server does not say who created an object,
    so the namespace on its cluster (namespace_requester)."""
    return namespace_requester(ref.cluster, ref.namespace)


def namespace_requester(cluster: str, namespace: str) -> str:
    """Who asked, for a GPR filed for an object of a namespace (a resource, a pod). The '/' makes it a name
    no hub user can have (hub names have no '/'), so no one can act on these GPRs as their owner through
    the API; the slice's members and admins can."""
    return f"kubernetes:{cluster}/{namespace}"


def api_body(obj: Mapping, slice_name: str, cluster: str) -> dict:
    """The POST /gprs body the resource asks for (see the module's table); InvalidRequest naming the
    resource's field for a spec that is not an object or has a field the API does not know."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidRequest("spec", "spec must be an object with duration and gpus or nodes")
    for key in spec:
        if key not in SPEC_FIELDS:
            raise InvalidRequest(
                f"spec.{key}", f"unknown field spec.{key}; known fields: {', '.join(sorted(SPEC_FIELDS))}"
            )
    body = {"slice": slice_name, "name": obj["metadata"]["name"]}
    body.update({SPEC_FIELDS[key]: value for key, value in spec.items()})
    body.setdefault("cluster", cluster)
    return body


TemplateOf = Callable[[str, str], GPRTemplate]  # (template, slice) -> the template; raises when it may not use it


def requested_spec(obj: Mapping, slice_name: str, cluster: str, template_of: TemplateOf) -> GPRSpec:
    """The spec the resource asks for, read and checked as a POST /gprs body (the fields it leaves out from
    the template it names, ``template_of``); InvalidRequest or PolicyViolation naming the field."""
    body = parse_body(GPRCreate, api_body(obj, slice_name, cluster))
    return body.to_spec(None if body.template is None else template_of(body.template, slice_name))


def edited_spec(obj: Mapping, current: GPRSpec, cluster: str, template_of: TemplateOf) -> GPRSpec:
    """The spec an edited resource now asks of its GPR (``current``): read as at creation, so a field left out
    takes its default, in the GPR's slice. The namespace fixed the slice, and the cluster stays: a
    ``spec.cluster`` that moves the GPR is an InvalidRequest."""
    spec = requested_spec(obj, current.slice, cluster, template_of)
    if spec.cluster != current.cluster:
        raise InvalidRequest(
            "cluster",
            f"cluster cannot change from {current.cluster} to {spec.cluster}; "
            "delete this resource and apply a new one to ask on another cluster",
        )
    return spec


def resource_field(field: str) -> str:
    """The resource's path of a POST /gprs field the API names in an error ("start_after" -> "spec.startAfter")."""
    return RESOURCE_FIELDS.get(field, field)


def resource_message(field: str, message: str) -> str:
    """An API error message about ``field`` in the resource's words: "spec.startAfter: startAfter must be ..."."""
    where = resource_field(field)
    for name, api in SPEC_FIELDS.items():
        if api != name:
            message = message.replace(api, name)
    return f"{where}: {message}"


# Status


def is_deleting(obj: Mapping) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def has_finalizer(obj: Mapping) -> bool:
    return FINALIZER in (obj["metadata"].get("finalizers") or ())


def finalizer_patch(obj: Mapping, present: bool) -> dict | None:
    """A merge patch that adds (``present``) or removes egs-hub's finalizer; None when nothing changes.
    It carries the object's resourceVersion, so a concurrent change of the list is a 409, not lost."""
    finalizers = list(obj["metadata"].get("finalizers") or ())
    if (FINALIZER in finalizers) == present:
        return None
    wanted = [*finalizers, FINALIZER] if present else [f for f in finalizers if f != FINALIZER]
    return {"metadata": {"finalizers": wanted, "resourceVersion": obj["metadata"]["resourceVersion"]}}


def _time(value: datetime | None) -> str | None:
    """RFC 3339 in whole seconds, as Kubernetes writes times (a status does not move by microseconds)."""
    return format_time(value.replace(microsecond=0)) if value is not None else None


def _find_condition(status: Mapping, kind: str) -> Mapping | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == kind), None)


def _condition(
    kind: str,
    status: bool,
    reason: str,
    message: str,
    when: datetime,
    previous: Mapping,
    generation: int | None = None,
) -> dict:
    old = _find_condition(previous, kind)
    value = "True" if status else "False"
    since = old["lastTransitionTime"] if old is not None and old.get("status") == value else _time(when)
    condition = {"type": kind, "status": value, "lastTransitionTime": since, "reason": reason, "message": message}
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def _camel(status: Status) -> str:
    return "".join(part.capitalize() for part in status.value.split("-"))


def gpr_status(
    gpr: GPR,
    estimate: Estimate | None,
    generation: int | None,
    previous: Mapping,
    now: datetime,
    edit: Mapping | None = None,
) -> dict:
    """The status of a resource whose GPR is ``gpr``; ``estimate`` is its plan while queued, ``generation``
    the resource's generation the GPR follows, ``previous`` the status now (for transition times).
    ``edit`` is the SpecApplied condition of an edit just read (without one, ``_spec_applied_kept``)."""
    provisioned = gpr.status is Status.PROVISIONED
    edit = edit or _spec_applied_kept(generation, previous, now)
    status = {
        "gprId": gpr.id,
        "phase": gpr.status.value,
        "reason": gpr.status_reason or None,
        "endReason": gpr.end_reason.value if gpr.end_reason else None,
        "estimatedStart": _time(estimate.start) if estimate is not None else None,
        "queuePosition": estimate.position if estimate is not None else None,
        "windowStart": _time(gpr.window_start),
        "windowEnd": _time(gpr.window_end),
        "boundNodes": list(gpr.bound_nodes) or None,
        "observedGeneration": generation,
        "conditions": [
            _condition("Accepted", True, "Submitted", f"GPR {gpr.id}", gpr.created_at, previous),
            _condition(
                "Provisioned",
                provisioned,
                _camel(gpr.status),
                f"node(s) {', '.join(gpr.bound_nodes)} until {_time(gpr.window_end)}"
                if provisioned
                else gpr.status_reason or gpr.status.value,
                gpr.window_start if provisioned and gpr.window_start else now,
                previous,
            ),
            *([dict(edit)] if edit else []),
        ],
    }
    return {key: value for key, value in status.items() if value is not None}


def _spec_applied_kept(generation: int | None, previous: Mapping, now: datetime) -> dict | None:
    """SpecApplied between edits, from the generation the GPR follows and the status now: a refusal of a
    later generation stays (it is not read again); else True at ``generation`` once the spec was edited
    (generation past 1, the API server's first). Only these two, so a status recomputed from a copy the
    watch has not brought up to date yet is the same, not one that undoes the latest edit's condition."""
    old = _find_condition(previous, SPEC_APPLIED)
    if generation is None or (old is not None and (old.get("observedGeneration") or 0) > generation):
        return old
    return spec_applied(generation, None, previous, now) if generation > 1 or old is not None else None


def spec_edited(obj: Mapping, generation: int | None) -> bool:
    """Whether a linked resource's spec is to be read: its generation is past ``generation``, the one its GPR
    follows, and an edit refused at that generation (SpecApplied False) is not read again."""
    seen = obj["metadata"].get("generation")
    if seen is None or generation is None or seen <= generation:
        return False
    applied = _find_condition(obj.get("status") or {}, SPEC_APPLIED)
    return not (applied and applied.get("status") == "False" and applied.get("observedGeneration") == seen)


def spec_applied(
    generation: int,
    error: InvalidRequest | PolicyViolation | IllegalTransition | Conflict | None,
    previous: Mapping,
    now: datetime,
) -> dict:
    """The SpecApplied condition of an edit read at ``generation``: True when the GPR follows it, else False
    with why, naming the resource's field (the whole ``spec`` when the change as such is refused)."""
    if error is None:
        return _condition(
            SPEC_APPLIED, True, "Applied", f"the GPR follows generation {generation}", now, previous, generation
        )
    if isinstance(error, InvalidRequest | PolicyViolation):
        reason, said = "Invalid", resource_message(error.field, str(error))
    else:
        reason = "NotEditable" if isinstance(error, IllegalTransition) else "OverLimits"
        said = resource_message("body", str(error))
    return _condition(SPEC_APPLIED, False, reason, said, now, previous, generation)


def invalid_status(field: str, message: str, generation: int | None, previous: Mapping, now: datetime) -> dict:
    """The status of a resource that made no GPR: phase ``invalid`` and Accepted False naming the field."""
    said = resource_message(field, message)
    status = {
        "phase": INVALID_PHASE,
        "reason": said,
        "observedGeneration": generation,
        "conditions": [_condition("Accepted", False, "Invalid", said, now, previous)],
    }
    return {key: value for key, value in status.items() if value is not None}


def needs_review(obj: Mapping) -> bool:
    """Whether a resource with no GPR should be checked: not while it is already marked invalid at its
    generation (an edit of its spec bumps the generation, and it is checked again)."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    return not (status.get("phase") == INVALID_PHASE and status.get("observedGeneration") == generation)


def status_patch(current: Mapping | None, desired: Mapping) -> dict | None:
    """A merge patch of ``.status`` from ``current`` to ``desired`` (null for what goes); None when equal."""
    current = dict(current or {})
    if current == dict(desired):
        return None
    return {"status": {**{key: None for key in current if key not in desired}, **desired}}
