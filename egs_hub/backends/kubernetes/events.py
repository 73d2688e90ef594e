"""Kubernetes Events that egs-hub records: core/v1 Events about a slice's namespaces and about GPU nodes.

Vocabulary: a *notice* is what to say (``type`` Normal or Warning, a CamelCase
``reason``, a ``message``); an *Event* is the core/v1 object that says it about
one *involved object*, from the source component ``egs-hub``.

| about                          | involvedObject                         | the Event's namespace |
|--------------------------------|----------------------------------------|-----------------------|
| a GPR applied with kubectl     | its GpuProvisionRequest                | the resource's        |
| another GPR of a slice         | the Namespace (its namespace: itself)  | that namespace        |
| a GPU node                     | the Node                               | ``default``           |

A GPR made from a GpuProvisionRequest resource has its Events on that resource
(``kubectl describe gpr NAME``). Other GPRs have theirs on the slice's
namespaces: naming the namespace as its own namespace keeps the Event in it,
where ``kubectl get events -n NS`` shows it to the slice's members (the API
server requires an Event's namespace to equal its involved object's, or be
``default`` when that has none). Node Events live in ``default``, as the
kubelet's do (``kubectl describe node`` shows them).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from kubernetes_asyncio import client

COMPONENT = "egs-hub"
NODE_EVENTS_NAMESPACE = "default"
TYPES = ("Normal", "Warning")


@dataclass(frozen=True)
class Notice:
    type: str
    reason: str
    message: str

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"an Event's type is Normal or Warning, not {self.type!r}")


def _timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(involved: dict, namespace: str, notice: Notice, now: datetime) -> dict:
    # Named as client-go names Events (the involved object's name and a nanosecond timestamp in hex), with
    # a random tail: notices about one object can share a timestamp.
    name = f"{involved['name']}.{int(now.timestamp() * 1e9):x}{secrets.token_hex(2)}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved,
        "type": notice.type,
        "reason": notice.reason,
        "message": notice.message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": _timestamp(now),
        "lastTimestamp": _timestamp(now),
        "count": 1,
    }


def namespace_event(namespace: str, notice: Notice, now: datetime) -> dict:
    return object_event(
        {"apiVersion": "v1", "kind": "Namespace", "name": namespace, "namespace": namespace}, notice, now
    )


def object_event(involved: dict, notice: Notice, now: datetime) -> dict:
    """An Event about a namespaced object (``involved`` has its namespace), in that namespace."""
    return _event(involved, involved["namespace"], notice, now)


def node_event(node: str, notice: Notice, now: datetime) -> dict:
    return _event({"apiVersion": "v1", "kind": "Node", "name": node}, NODE_EVENTS_NAMESPACE, notice, now)


async def create_event(api: client.ApiClient, event: dict, *, request_timeout: float = 10.0) -> None:
    await client.CoreV1Api(api).create_namespaced_event(
        event["metadata"]["namespace"], event, _request_timeout=request_timeout
    )
