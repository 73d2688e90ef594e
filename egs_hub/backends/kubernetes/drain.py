"""Exit of one node from a GPR's slice: cordon, evict the slice's pods, delete the rest after the grace period;
and exit of a GPR's units from a share node (shares.py): the same for the slice's pods that use units there,
without a cordon (other slices use the node).

Vocabulary: the *slice's pods* on a node are those in the namespaces labelled
``egs.io/slice=<slice>``, except DaemonSet and mirror (static) pods, which
``kubectl drain`` leaves too: a DaemonSet would put its pod straight back on the
cordoned node. *Eviction* goes through the Eviction API, so PodDisruptionBudgets
hold a pod back (HTTP 429) until the *deadline*, ``exit_grace`` after exit began,
when what remains is deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ...core.model import GPR, Event
from .. import UnbindError
from . import node_writes, objects, shares
from .api import json_of
from .nodes import FREE, GPR_LABEL, SLICE_LABEL
from .webhook import wants_units

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_slice_pod(pod: dict, namespaces: set[str]) -> bool:
    meta = pod.get("metadata") or {}
    if meta.get("namespace") not in namespaces or MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    return not any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or [])


async def slice_pods(core: client.CoreV1Api, node: str, slice_name: str) -> list[dict]:
    """The slice's pods on the node, by namespace and name."""
    selector = f"{SLICE_LABEL}={slice_name}"
    listed = await json_of(await core.list_namespace(label_selector=selector, _preload_content=False))
    namespaces = {n["metadata"]["name"] for n in listed.get("items") or []}
    if not namespaces:
        return []
    pods = await json_of(
        await core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
    )
    found = [p for p in pods.get("items") or [] if is_slice_pod(p, namespaces)]
    return sorted(found, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))


def _pod_name(pod: dict) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


async def drain_node(
    core: client.CoreV1Api,
    obj: dict,
    gpr: GPR,
    now: datetime,
    grace: timedelta,
    event: Callable[..., Event],
) -> list[Event]:
    """Take one node of ``gpr`` back to the free pool; UnbindError while the slice's pods remain on it."""
    name = obj["metadata"]["name"]
    labels = obj["metadata"].get("labels") or {}
    annotations = obj["metadata"].get("annotations") or {}
    if labels.get(GPR_LABEL) not in (None, str(gpr.id)):
        return []  # entered for another GPR since: nothing of this one is left here
    if labels.get(SLICE_LABEL) == FREE and objects.EXIT_STARTED not in annotations:
        return []  # returned already
    events = []
    started = annotations.get(objects.EXIT_STARTED)
    if started is None:
        started = now.isoformat()
        was_cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
        obj = await node_writes.patch_node(core, obj, lambda o: objects.cordon_patch(o, started))
        if not was_cordoned:
            events.append(event(gpr, "node-cordoned", name, "cordoned for exit", now))
    deadline = datetime.fromisoformat(started) + grace
    await _evict(core, name, gpr, now, deadline, event, events, lambda pod: True)
    await node_writes.patch_node(core, obj, objects.return_patch)
    events.append(event(gpr, "node-returned", name, f"back in the free pool ({SLICE_LABEL}={FREE})", now))
    return events


async def release_units(
    core: client.CoreV1Api,
    obj: dict,
    gpr: GPR,
    now: datetime,
    grace: timedelta,
    event: Callable[..., Event],
) -> list[Event]:
    """Take ``gpr``'s units on one share node back; UnbindError while the slice's pods that use units remain
    there after its last GPR on the node left."""
    name, slice_name = obj["metadata"]["name"], gpr.spec.slice
    ids = shares.holders(obj, slice_name)
    if str(gpr.id) in ids and len(ids) > 1:
        await node_writes.patch_node(core, obj, lambda o: shares.keep_patch(o, slice_name, gpr.id))
        return [
            event(gpr, "units-returned", name, f"its units go back; other GPRs of {slice_name} hold units here", now)
        ]
    started = shares.exit_started(obj, slice_name)
    if str(gpr.id) not in ids and started is None:
        return []  # returned already
    events = []
    if started is None:
        started = now.isoformat()
        await core.patch_node(name, shares.exit_patch(slice_name, started))
        reason = f"label {shares.share_label(slice_name)} removed: no new pod of the slice lands here"
        events.append(event(gpr, "units-exit", name, reason, now))
    deadline = datetime.fromisoformat(started) + grace
    await _evict(core, name, gpr, now, deadline, event, events, _uses_units)
    await core.patch_node(name, shares.done_patch(slice_name))
    events.append(event(gpr, "units-returned", name, "the slice's pods using units here are gone", now))
    return events


def _uses_units(pod: dict) -> bool:
    try:
        return wants_units(pod)
    except ValueError:  # unreadable: not one egs-hub put here
        return False


async def _evict(
    core: client.CoreV1Api,
    name: str,
    gpr: GPR,
    now: datetime,
    deadline: datetime,
    event: Callable[..., Event],
    events: list[Event],
    chosen: Callable[[dict], bool],
) -> None:
    """Evict the slice's ``chosen`` pods on node ``name`` (delete them from ``deadline``), adding to
    ``events``; UnbindError while some remain."""
    held_back = []
    for pod in [p for p in await slice_pods(core, name, gpr.spec.slice) if chosen(p)]:
        pod_name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        if pod["metadata"].get("deletionTimestamp"):
            continue
        try:
            if now >= deadline:
                await core.delete_namespaced_pod(pod_name, namespace)
                reason = f"deleted pod {_pod_name(pod)}: still there after the grace period"
                events.append(event(gpr, "pod-deleted", name, reason, now))
            else:
                await core.create_namespaced_pod_eviction(pod_name, namespace, objects.eviction(pod_name, namespace))
                events.append(event(gpr, "pod-evicted", name, f"evicted pod {_pod_name(pod)}", now))
        except ApiException as e:
            if e.status == 429:
                held_back.append(_pod_name(pod))
            elif e.status != 404:
                raise
    remaining = [p for p in await slice_pods(core, name, gpr.spec.slice) if chosen(p)]
    if remaining:
        why = f" ({', '.join(held_back)} held back by a disruption budget)" if held_back else ""
        raise UnbindError(
            f"node {name}: waiting for pod(s) {', '.join(_pod_name(p) for p in remaining)} to go{why}; "
            f"what remains is deleted at {deadline.isoformat()}",
            events,
        )
