"""The mutating admission webhook for pods: a GPU pod in a slice's namespace lands on the slice's nodes.

Vocabulary: a *review* is an AdmissionReview v1 request the API server posts;
the *answer* is the AdmissionReview v1 with ``response``. A *GPU pod* asks for
a GPU resource (``nvidia.com/gpu``, a MIG instance ``nvidia.com/mig-<profile>`` or a
renamed share ``nvidia.com/gpu.shared``; limits or requests, any container or init
container, any amount but 0). A GPU pod in a namespace of a slice (``slice_of``: namespace ->
slice, from the namespace's ``egs.io/slice`` label) gets, by a JSONPatch:

- ``spec.nodeSelector["egs.io/slice"] = <slice>``, which replaces a value the
  pod set itself (a pod cannot pick another slice's nodes);
- the toleration ``egs.io/slice=<slice>:NoSchedule`` of the nodes' slice taint.

A GPU pod asking for MIG instances or shares (a unit resource, shares.py) gets
instead ``spec.nodeSelector["share.egs.io/<slice>"] = "true"`` (the share nodes
where the slice holds units) and the toleration of the free pool's taint,
``egs.io/slice=free:NoSchedule``; the slice's quota caps how many it may use.

Every other pod is allowed unchanged. Without a provisioned GPR no node carries
the slice's label, so the pod stays Pending until one does.

A pod the webhook cannot read is allowed unchanged, with a warning. The webhook is
registered for slices' namespaces only, with failurePolicy Fail: while egs-hub does
not answer, their pods are refused, not admitted without the slice's placement.

| review                                          | answer                                      |
|-------------------------------------------------|---------------------------------------------|
| not an AdmissionReview v1 with ``request.uid``  | InvalidReview: the HTTP layer answers 400   |
| not a Pod CREATE, or the pod is unreadable      | allowed, unchanged, with a warning why      |
| a GPU pod in a slice's namespace                | allowed, with the patch (none if it has it) |
| any other pod                                   | allowed, unchanged                          |
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping

from .nodes import FREE, GPU_RESOURCE, SLICE_LABEL, is_gpu_resource
from .objects import TAINT_EFFECT
from .shares import is_unit_resource, share_label

API_VERSION = "admission.k8s.io/v1"
CONTAINER_LISTS = ("initContainers", "containers")


class InvalidReview(ValueError):
    """The body is not an AdmissionReview v1 request; the message says what is wrong (answer HTTP 400)."""


def slice_toleration(slice_name: str) -> dict:
    return {"key": SLICE_LABEL, "operator": "Equal", "value": slice_name, "effect": TAINT_EFFECT}


def _pointer(key: str) -> str:
    """A JSON Pointer token (RFC 6901): '~' and '/' escaped."""
    return key.replace("~", "~0").replace("/", "~1")


def wants_gpus(pod: Mapping) -> bool:
    """Whether any container or init container limits or requests a GPU resource (other than 0)."""
    return bool(gpu_resources(pod))


def wants_units(pod: Mapping) -> bool:
    """Whether the pod asks for MIG instances or time-sliced shares (a unit resource, shares.py)."""
    return any(is_unit_resource(r) for r in gpu_resources(pod))


def gpu_resources(pod: Mapping) -> set[str]:
    """The GPU resources any container or init container limits or requests (other than 0); ValueError
    when the pod cannot be read."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError("the pod has no spec")
    found: set[str] = set()
    for field in CONTAINER_LISTS:
        containers = spec.get(field)
        if containers is None:
            continue
        if not isinstance(containers, list):
            raise ValueError(f"spec.{field} is not a list")
        for container in containers:
            if not isinstance(container, Mapping):
                raise ValueError(f"an entry of spec.{field} is not an object")
            for kind in ("limits", "requests"):
                for resource, amount in _amounts(container, kind).items():
                    if is_gpu_resource(resource) and str(amount).strip() not in ("0", ""):
                        found.add(resource)
    return found


def _amounts(container: Mapping, kind: str) -> Mapping:
    """The container's ``resources.<kind>`` (empty when not set); ValueError when unreadable."""
    name = container.get("name")
    resources = container.get("resources")
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise ValueError(f"resources of container {name!r} is not an object")
    amounts = resources.get(kind)
    if amounts is None:
        return {}
    if not isinstance(amounts, Mapping):
        raise ValueError(f"resources.{kind} of container {name!r} is not an object")
    return amounts


def _gpu_amount(container: Mapping, kind: str) -> object:
    """The container's ``resources.<kind>["nvidia.com/gpu"]``, None when not set; ValueError when unreadable."""
    return _amounts(container, kind).get(GPU_RESOURCE)


def gpu_count(pod: Mapping) -> int:
    """The GPUs the pod asks for, as the scheduler counts them: the sum over its containers, or the most
    one init container asks when that is more; each container's limit, else its request. A pod that
    wants_gpus reads; an amount that is not a whole number counts 0."""
    spec = pod["spec"]

    def amount(container: Mapping) -> int:
        value = _gpu_amount(container, "limits")
        if value is None:
            value = _gpu_amount(container, "requests")
        text = str(value).strip() if value is not None else ""
        return int(text) if text.isdigit() else 0

    running = sum(amount(c) for c in spec.get("containers") or [])
    return max([running, *(amount(c) for c in spec.get("initContainers") or [])])


def pod_name(pod: Mapping) -> str:
    """The pod's name, or its generateName and a '*' when the API server has yet to name it."""
    metadata = pod.get("metadata") or {}
    return metadata.get("name") or f"{metadata.get('generateName') or ''}*"


def slice_patch(pod: Mapping, slice_name: str) -> list[dict]:
    """The JSONPatch operations that put the pod on the slice's nodes; [] when it is there already."""
    return _placement(pod, SLICE_LABEL, slice_name, slice_toleration(slice_name))


def units_patch(pod: Mapping, slice_name: str) -> list[dict]:
    """The JSONPatch operations that put a pod asking for units on the share nodes where the slice holds
    units (``share.egs.io/<slice>=true``, in the free pool); [] when it is there already."""
    return _placement(pod, share_label(slice_name), "true", slice_toleration(FREE))


def _placement(pod: Mapping, label: str, value: str, toleration: dict) -> list[dict]:
    """The JSONPatch operations that select nodes labelled ``label=value`` and tolerate ``toleration``."""
    spec = pod["spec"]
    ops = []
    selector = spec.get("nodeSelector")
    if not isinstance(selector, Mapping):
        ops.append({"op": "add", "path": "/spec/nodeSelector", "value": {label: value}})
    elif selector.get(label) != value:
        ops.append({"op": "add", "path": f"/spec/nodeSelector/{_pointer(label)}", "value": value})
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list) or not tolerations:
        ops.append({"op": "add", "path": "/spec/tolerations", "value": [toleration]})
    elif toleration not in tolerations:
        ops.append({"op": "add", "path": "/spec/tolerations/-", "value": toleration})
    return ops


def _answer(uid: str, *, ops: list[dict] | None = None, warning: str | None = None) -> dict:
    response: dict = {"uid": uid, "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops, separators=(",", ":")).encode()).decode()
    if warning:
        response["warnings"] = [f"egs-hub pod webhook: {warning}"]
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def review_pod(review: object, slice_of: Callable[[str], str | None]) -> dict:
    """The answer to one review (see the table above); InvalidReview when it cannot be answered at all."""
    if not isinstance(review, Mapping) or review.get("kind") != "AdmissionReview":
        raise InvalidReview("the body is not an AdmissionReview")
    if review.get("apiVersion") != API_VERSION:
        raise InvalidReview(f"apiVersion {review.get('apiVersion')!r} is not supported; register {API_VERSION} only")
    request = review.get("request")
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise InvalidReview("the AdmissionReview has no request.uid")
    uid = request["uid"]
    kind = request.get("kind") or {}
    if (kind.get("group"), kind.get("kind"), request.get("operation")) != ("", "Pod", "CREATE"):
        what = f"{kind.get('kind')} {request.get('operation')}"
        return _answer(uid, warning=f"only Pod CREATE is reviewed, not {what}; check the webhook's rules")
    pod = request.get("object")
    namespace = request.get("namespace") or ((pod or {}).get("metadata") or {}).get("namespace")
    if not isinstance(pod, Mapping) or not isinstance(namespace, str):
        return _answer(uid, warning="the review has no pod object or namespace; the pod is left unchanged")
    slice_name = slice_of(namespace)
    if slice_name is None:
        return _answer(uid)
    try:
        resources = gpu_resources(pod)
    except ValueError as e:
        return _answer(uid, warning=f"cannot read the pod ({e}); it is left unchanged")
    if not resources:
        return _answer(uid)
    units = any(is_unit_resource(r) for r in resources)
    return _answer(uid, ops=units_patch(pod, slice_name) if units else slice_patch(pod, slice_name))
