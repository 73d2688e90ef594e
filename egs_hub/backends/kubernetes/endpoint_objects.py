"""An inference endpoint on a cluster as Kubernetes objects; pure functions over plain data.

Vocabulary (DESIGN.md): each replica GPR of an endpoint runs as one *workload* in the slice's home
namespace: a Deployment ``ep-<name>-<gpr>`` (runtimes ``vllm`` and ``command``) or a KServe
InferenceService of that name (``kserve``, RawDeployment mode). Its pods are *placed* on the GPR's
GPUs: whole GPUs by the GPR's node label ``egs.io/gpr=<id>`` and the slice taint's toleration, one
pod per node (required anti-affinity on the hostname) with that node's GPUs as its limit; MIG
instances and time-sliced shares by the share nodes' label ``share.egs.io/<slice>=true`` and the
free pool's toleration, as the admission webhook places them (webhook.py). A Deployment's pods sit
behind the endpoint's Service ``ep-<name>`` (port 80 to the runtime's PORT); an InferenceService's
behind the ``<workload>-predictor`` Service KServe makes.

A workload's pods run the member's code in the slice's namespace with nothing of the service's: no
ServiceAccount token (the namespace's ``default`` ServiceAccount's would be mounted otherwise,
issue 45), no Secret volume or variable; only the endpoint's own ``env`` and the EGS variables.

What egs-hub makes carries ``app.kubernetes.io/managed-by=egs-hub``,
``app.kubernetes.io/component=egs-endpoint``, ``egs.io/slice``, ``egs.io/endpoint`` and (workloads)
``egs.io/gpr``, by which a pass lists them all at once and prunes what no replica keeps. A wanted
object carries the hash of itself in SPEC_HASH, so a pass rewrites it only when it changed (never for
what the API server defaulted).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...core.endpoints import PORT_PLACEHOLDER, EndpointSpec
from .nodes import FREE, GPR_LABEL, SLICE_LABEL
from .objects import TAINT_EFFECT
from .shares import is_unit_resource, resource_of, share_label

PORT = 8000  # where a workload's server listens
SERVICE_PORT = 80
ENDPOINT_LABEL = "egs.io/endpoint"
MANAGED_BY = "app.kubernetes.io/managed-by"
COMPONENT = "app.kubernetes.io/component"
EGS_HUB = "egs-hub"
ENDPOINT_COMPONENT = "egs-endpoint"
SELECTOR = f"{MANAGED_BY}={EGS_HUB},{COMPONENT}={ENDPOINT_COMPONENT}"
SPEC_HASH = "egs.io/spec-hash"
KSERVE_GROUP = "serving.kserve.io"
KSERVE_VERSION = "v1beta1"
KSERVE_PLURAL = "inferenceservices"
KSERVE_MODE = "serving.kserve.io/deploymentMode"
FAILED_RESTARTS = 3  # a container crash-looping this many times fails its replica
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")
_NAME_MAX = 63


class Unplaceable(ValueError):
    """A replica's GPUs cannot be asked for by one pod template; the message says why."""


@dataclass(frozen=True)
class Placement:
    """Where a replica's pods go: ``pods`` of them, each limited to ``limits`` (resource -> count)."""

    pods: int
    limits: Mapping[str, int]
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class Seen:
    """A replica's workload as a pass found it: ``state`` (starting, ready, failed), why when not
    ready (``message``), its containers' restarts, and its ready pods (to read their queues)."""

    state: str
    message: str = ""
    restarts: int = 0
    ready_pods: tuple[str, ...] = ()


def _toleration(value: str) -> dict[str, str]:
    return {"key": SLICE_LABEL, "operator": "Equal", "value": value, "effect": TAINT_EFFECT}


def placement(slice_name: str, gpr_id: int, gpus: Sequence[str]) -> Placement:
    """The pods of a replica on the GPUs its GPR holds (``cluster/node/gpuN`` ids, or MIG instances
    and shares: shares.py): one per node, alike; Unplaceable when one template cannot ask for them."""
    if not gpus:
        raise Unplaceable(f"GPR {gpr_id} holds no GPUs")
    per_node: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for gpu in gpus:
        _, node, _ = gpu.split("/", 2)
        per_node[node][resource_of(gpu)] += 1
    shapes = {tuple(sorted(counts.items())) for counts in per_node.values()}
    if len(shapes) > 1:
        found = "; ".join(f"{node}: {dict(counts)}" for node, counts in sorted(per_node.items()))
        raise Unplaceable(f"GPR {gpr_id}'s nodes hold different GPUs ({found}): one pod template cannot ask for them")
    limits = dict(shapes.pop())
    if len(limits) > 1:
        raise Unplaceable(f"GPR {gpr_id} holds {sorted(limits)} on one node: a pod asks for one kind of GPU")
    if is_unit_resource(next(iter(limits))):
        selector, toleration = {share_label(slice_name): "true"}, _toleration(FREE)
    else:
        selector, toleration = {GPR_LABEL: str(gpr_id)}, _toleration(slice_name)
    return Placement(len(per_node), limits, selector, (toleration,))


def _short(stem: str, suffix: str = "") -> str:
    """``stem + suffix`` as a DNS label of at most 63 characters; a long stem is cut and a hash of it
    keeps names apart."""
    name = stem + suffix
    if len(name) <= _NAME_MAX:
        return name
    digest = hashlib.sha256(stem.encode()).hexdigest()[:8]
    return f"{stem[: _NAME_MAX - len(suffix) - 9].rstrip('-')}-{digest}{suffix}"


def service_name(endpoint: str) -> str:
    return _short(f"ep-{endpoint}")


def workload_name(endpoint: str, gpr_id: int) -> str:
    return _short(f"ep-{endpoint}", f"-{gpr_id}")


def predictor_service(workload: str) -> str:
    """The Service KServe makes for an InferenceService's predictor (RawDeployment)."""
    return f"{workload}-predictor"


def endpoint_labels(spec: EndpointSpec) -> dict[str, str]:
    return {MANAGED_BY: EGS_HUB, COMPONENT: ENDPOINT_COMPONENT, SLICE_LABEL: spec.slice, ENDPOINT_LABEL: spec.name}


def _metadata(name: str, namespace: str, labels: Mapping[str, str], **extra) -> dict:
    return {"name": name, "namespace": namespace, "labels": dict(labels), **extra}


def _hashed(obj: dict) -> dict:
    """``obj`` with SPEC_HASH, the hash of everything else in it, among its annotations."""
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]
    obj["metadata"].setdefault("annotations", {})[SPEC_HASH] = digest
    return obj


def spec_hash(obj: Mapping) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH)


def _env(spec: EndpointSpec, gpr_id: int) -> list[dict[str, str]]:
    egs = {"EGS_SLICE": spec.slice, "EGS_ENDPOINT": spec.name, "EGS_GPRS": str(gpr_id), "PORT": str(PORT)}
    return [{"name": k, "value": v} for k, v in {**spec.env, **egs}.items()]


def _probe(path: str) -> dict:
    return {"httpGet": {"path": path, "port": PORT}, "periodSeconds": 5, "failureThreshold": 3}


def _limits(place: Placement) -> dict:
    return {"limits": {resource: str(count) for resource, count in sorted(place.limits.items())}}


def server_command(spec: EndpointSpec) -> list[str]:
    """What the workload's container runs (its image's entrypoint is replaced)."""
    if spec.runtime == "vllm":
        return ["vllm", "serve", spec.model, "--host", "0.0.0.0", "--port", str(PORT), *spec.args]
    if spec.runtime == "command":
        return [arg.replace(PORT_PLACEHOLDER, str(PORT)) for arg in (*spec.command, *spec.args)]
    raise ValueError(f"runtime {spec.runtime!r} runs no Deployment")


def _pod_spec(spec: EndpointSpec, gpr_id: int, place: Placement, image: str, labels: Mapping[str, str]) -> dict:
    container = {
        "name": "server",
        "image": image,
        "command": server_command(spec),
        "ports": [{"name": "http", "containerPort": PORT}],
        "env": _env(spec, gpr_id),
        "resources": _limits(place),
        "readinessProbe": _probe(spec.health_path),
    }
    pod = {
        "automountServiceAccountToken": False,  # the member's code gets no API credentials (issue 45)
        "containers": [container],
        "nodeSelector": dict(place.node_selector),
        "tolerations": [dict(t) for t in place.tolerations],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    }
    if spec.runtime == "vllm":  # tensor parallelism shares memory between workers through /dev/shm
        container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    return pod


def deployment(spec: EndpointSpec, gpr_id: int, namespace: str, place: Placement, image: str) -> dict:
    """The Deployment of a ``vllm`` or ``command`` replica, in ``image``."""
    labels = {**endpoint_labels(spec), GPR_LABEL: str(gpr_id)}
    name = workload_name(spec.name, gpr_id)
    return _hashed(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(name, namespace, labels),
            "spec": {
                "replicas": place.pods,
                "strategy": {"type": "Recreate"},  # the GPUs are the GPR's: a new pod waits for the old to go
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": _pod_spec(spec, gpr_id, place, image, labels),
                },
            },
        }
    )


def service(spec: EndpointSpec, namespace: str) -> dict:
    """The endpoint's Service, in front of every pod of its Deployments."""
    labels = endpoint_labels(spec)
    return _hashed(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(service_name(spec.name), namespace, labels),
            "spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": PORT, "protocol": "TCP"}],
            },
        }
    )


def storage_uri(model: str) -> str:
    """Where KServe's storage initializer fetches the model: a URI as given, a Hugging Face id as hf://."""
    return model if "://" in model else f"hf://{model}"


def inference_service(spec: EndpointSpec, gpr_id: int, namespace: str, place: Placement) -> dict:
    """The KServe InferenceService of a ``kserve`` replica: the Hugging Face runtime serving ``model``
    (or the endpoint's image as the predictor's container), placed on the GPR's GPUs."""
    labels = {**endpoint_labels(spec), GPR_LABEL: str(gpr_id)}
    predictor: dict = {
        "automountServiceAccountToken": False,  # the predictor is a pod spec: no API credentials either
        "minReplicas": place.pods,
        "maxReplicas": place.pods,
        "nodeSelector": dict(place.node_selector),
        "tolerations": [dict(t) for t in place.tolerations],
        "labels": labels,  # on the predictor's pods, by which a pass finds them
    }
    if spec.image is not None:
        predictor["containers"] = [
            {
                "name": "kserve-container",
                "image": spec.image,
                "args": list(spec.args),
                "ports": [{"containerPort": PORT, "protocol": "TCP"}],
                "env": _env(spec, gpr_id),
                "resources": _limits(place),
            }
        ]
    else:
        predictor["model"] = {
            "modelFormat": {"name": "huggingface"},
            "storageUri": storage_uri(spec.model),
            "args": [f"--model_name={spec.name}", *spec.args],
            "env": _env(spec, gpr_id),
            "resources": _limits(place),
        }
    metadata = _metadata(
        workload_name(spec.name, gpr_id), namespace, labels, annotations={KSERVE_MODE: "RawDeployment"}
    )
    return _hashed(
        {
            "apiVersion": f"{KSERVE_GROUP}/{KSERVE_VERSION}",
            "kind": "InferenceService",
            "metadata": metadata,
            "spec": {"predictor": predictor},
        }
    )


def replaced(wanted: Mapping, found: Mapping) -> dict:
    """``wanted`` as a replace of ``found``: with its resourceVersion, and a Service's clusterIP kept
    (a replace may not change it)."""
    new = json.loads(json.dumps(wanted))
    new["metadata"]["resourceVersion"] = (found.get("metadata") or {}).get("resourceVersion")
    if wanted["kind"] == "Service":
        for key in ("clusterIP", "clusterIPs"):
            if key in (found.get("spec") or {}):
                new["spec"][key] = found["spec"][key]
    return new


def _pod_problem(pod: Mapping) -> tuple[str, str, int]:
    """(state, message, restarts) of one pod: ``failed`` for an image it cannot pull or a crash loop of
    FAILED_RESTARTS, ``starting`` with why when not scheduled, else ``ready`` or ``starting``."""
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    restarts = 0
    for container in status.get("containerStatuses") or []:
        restarts += container.get("restartCount", 0)
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason", "")
        if reason in PULL_FAILURES:
            return "failed", f"pod {name}: {reason}: {waiting.get('message', '')}".rstrip(": "), restarts
        if reason == "CrashLoopBackOff" and container.get("restartCount", 0) >= FAILED_RESTARTS:
            last = ((container.get("lastState") or {}).get("terminated") or {}).get("exitCode")
            message = f"pod {name}: CrashLoopBackOff (last exit code {last}): {waiting.get('message', '')}"
            return "failed", message, restarts
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return "starting", f"pod {name} is not scheduled: {condition.get('message', '')}", restarts
    return ("ready" if pod_ready(pod) else "starting"), "", restarts


def pod_ready(pod: Mapping) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def seen(workload: Mapping | None, pods: Sequence[Mapping]) -> Seen:
    """A replica's state from its workload (a Deployment or InferenceService; None: not made yet) and
    its pods: ``ready`` once one pod is (a Deployment's ready replicas, an InferenceService's Ready
    condition), else ``failed`` when a pod cannot start, else ``starting``, saying why."""
    if workload is None:
        return Seen("starting", "its workload is being made")
    problems = [_pod_problem(p) for p in sorted(pods, key=lambda p: p["metadata"]["name"])]
    restarts = sum(r for _, _, r in problems)
    ready_pods = tuple(p["metadata"]["name"] for p in pods if pod_ready(p))
    status = workload.get("status") or {}
    if workload.get("kind") == "InferenceService":
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        ready = (conditions.get("Ready") or {}).get("status") == "True"
        why = (conditions.get("Ready") or {}).get("message", "")
    else:
        ready, why = (status.get("readyReplicas") or 0) >= 1, ""
    if ready:
        return Seen("ready", "", restarts, ready_pods)
    failed = [message for state, message, _ in problems if state == "failed"]
    if failed:
        return Seen("failed", failed[0], restarts)
    waiting = [message for _, message, _ in problems if message]
    return Seen("starting", (waiting or [why])[0], restarts)
