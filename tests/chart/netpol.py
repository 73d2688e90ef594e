"""NetworkPolicy as Kubernetes reads it, over rendered documents: whether a connection between two pods
is admitted, by the source's egress policies and the destination's ingress policies.

Vocabulary: a *pod* here is its namespace, that namespace's labels, its labels and its named ports.
Peers are matched by selectors only: an ``ipBlock`` admits no pod (pod IPs are not known when the chart
renders, and some CNIs, Cilium's, do not match in-cluster pods by CIDR at all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, int] = field(default_factory=dict)  # named container ports


def selects(selector: Mapping | None, labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions; {} selects everything)."""
    if selector is None:
        return False
    if not (selector.get("matchLabels") or {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True


def _port_matches(ports: Sequence[Mapping] | None, port: int, target: Pod) -> bool:
    if not ports:
        return True
    named = {number: name for name, number in target.ports.items()}
    return any(p.get("port") in (None, port, named.get(port)) for p in ports)


def _peer_matches(peer: Mapping, policy_namespace: str, other: Pod) -> bool:
    if "ipBlock" in peer:
        return False
    in_namespace = (
        selects(peer["namespaceSelector"], other.namespace_labels)
        if "namespaceSelector" in peer
        else other.namespace == policy_namespace
    )
    return in_namespace and ("podSelector" not in peer or selects(peer["podSelector"], other.labels))


def _admitted(policies: Sequence[Mapping], pod: Pod, other: Pod, port: int, port_owner: Pod, direction: str) -> bool:
    """Whether ``pod``'s policies of ``direction`` ("Ingress" or "Egress") let ``other`` in or out on ``port``
    (a port of ``port_owner``, which may name it)."""
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    governing = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and selects(p["spec"].get("podSelector", {}), pod.labels)
        and direction in p["spec"].get("policyTypes", ["Ingress"] + (["Egress"] if "egress" in p["spec"] else []))
    ]
    if not governing:
        return True
    for policy in governing:
        for rule in policy["spec"].get(key) or []:
            if not _port_matches(rule.get("ports"), port, port_owner):
                continue
            peers = rule.get(peers_key)
            if not peers or any(_peer_matches(peer, pod.namespace, other) for peer in peers):
                return True
    return False


def connects(documents: Sequence[Mapping], namespace: str, source: Pod, destination: Pod, port: int) -> bool:
    """Whether ``source`` may open a connection to ``destination``'s ``port`` under the documents' policies
    (those that name no namespace are in ``namespace``, the release's)."""
    policies = [
        {**d, "metadata": {"namespace": namespace, **d["metadata"]}}
        for d in documents
        if d.get("kind") == "NetworkPolicy"
    ]
    return _admitted(policies, source, destination, port, destination, "Egress") and _admitted(
        policies, destination, source, port, destination, "Ingress"
    )
