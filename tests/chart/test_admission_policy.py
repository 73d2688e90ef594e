"""Workspace nodes are their workspace's (issue 46, item 5): the chart's ValidatingAdmissionPolicy.

Found: the webhook looks only at pods that ask for GPUs in slice namespaces, and admits pods unchanged
when it is down (failurePolicy Ignore): a pod in any namespace that asks for no GPU could set
``nodeSelector egs.io/slice=<other>`` and the toleration and land on another workspace's nodes. The
policy runs in the API server (it needs no egs pod, and fails closed) over every pod. Here its rendered
CEL runs (cel-python) as the API server runs it: the variables, then each validation, over pods an
attacker and the cluster's own components would create.
"""

from __future__ import annotations

import subprocess

import kubernetes_validate
import pytest

from .admission import bound_policy, verdict
from .conftest import of_kind

POLICY = "egs-egs-hub-workspace-nodes"
TAINT = "egs.io/slice"


def namespace(name: str, slice_name: str | None = None) -> dict:
    labels = {"kubernetes.io/metadata.name": name, **({TAINT: slice_name} if slice_name else {})}
    return {"metadata": {"name": name, "labels": labels}}


def toleration(value: str | None = None, key: str | None = TAINT, operator: str = "Equal") -> dict:
    found = {"operator": operator, "effect": "NoSchedule"}
    if key is not None:
        found["key"] = key
    if value is not None:
        found["value"] = value
    return found


def pod(**spec) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def affinity(*values: str, operator: str = "In") -> dict:
    expression = {"key": TAINT, "operator": operator, "values": list(values)}
    term = {"matchExpressions": [expression]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


ML, OTHER, SYSTEM = namespace("ml-home", "ml"), namespace("team-b"), namespace("kube-system")

CASES = {
    # name: (namespace, pod, operation, refused by the validation whose message holds this; None: admitted)
    "a workspace's pod on its nodes, as the webhook makes it": (
        ML,
        pod(nodeSelector={TAINT: "ml"}, tolerations=[toleration("ml")]),
        "CREATE",
        None,
    ),
    "a pod on units: the free pool's taint": (ML, pod(tolerations=[toleration("free")]), "CREATE", None),
    "a pod with no placement at all": (OTHER, pod(), "CREATE", None),
    "a pod with the usual keyed tolerations": (
        OTHER,
        pod(tolerations=[toleration(key="node.kubernetes.io/not-ready", operator="Exists")]),
        "CREATE",
        None,
    ),
    "another workspace's selector, from a namespace of none": (
        OTHER,
        pod(nodeSelector={TAINT: "ml"}),
        "CREATE",
        "selects the nodes of workspace ml",
    ),
    "another workspace's toleration, no GPU asked for": (
        OTHER,
        pod(tolerations=[toleration("ml")]),
        "CREATE",
        "tolerates another workspace's nodes",
    ),
    "a workspace's pod tolerating another's": (
        ML,
        pod(tolerations=[toleration("ml"), toleration("team-c")]),
        "CREATE",
        "tolerates another workspace's nodes",
    ),
    "tolerating every slice (Exists on the key)": (
        ML,
        pod(tolerations=[toleration(operator="Exists")]),
        "CREATE",
        "tolerates another workspace's nodes",
    ),
    "tolerating every taint (no key)": (
        OTHER,
        pod(tolerations=[toleration(key=None, operator="Exists")]),
        "CREATE",
        "a toleration without a key",
    ),
    "another workspace by node affinity": (OTHER, pod(affinity=affinity("ml")), "CREATE", "nodeAffinity"),
    "node affinity NotIn the free pool (every workspace)": (
        OTHER,
        pod(affinity=affinity("free", operator="NotIn")),
        "CREATE",
        "nodeAffinity",
    ),
    "its own workspace by node affinity": (ML, pod(affinity=affinity("ml", "free")), "CREATE", None),
    "naming its node, past the scheduler": (OTHER, pod(nodeName="gpu-a"), "CREATE", "spec.nodeName"),
    "a bound pod updated (its labels)": (OTHER, pod(nodeName="gpu-a"), "UPDATE", None),
    "a toleration added by an update": (OTHER, pod(tolerations=[toleration("ml")]), "UPDATE", "tolerates"),
    "a node agent in an exempt namespace": (
        SYSTEM,
        pod(nodeName="gpu-a", tolerations=[toleration(key=None, operator="Exists")]),
        "CREATE",
        None,
    ),
}


@pytest.fixture(scope="module")
def policy(render) -> dict:
    return bound_policy(render(), POLICY)


def admit(policy: dict, ns: dict, obj: dict, operation: str) -> str | None:
    """None when the policy admits the pod, else the message of the first validation that refuses it."""
    return verdict(policy, {"object": obj, "namespaceObject": ns, "request": {"operation": operation}})


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_policy_admits_a_workspaces_own_pods_and_refuses_the_rest(policy, case):
    ns, obj, operation, refused = case
    answer = admit(policy, ns, obj, operation)
    if refused is None:
        assert answer is None
    else:
        assert answer is not None and refused in answer, answer


def test_the_policy_matches_every_pod_of_the_cluster(policy):
    constraints = policy["spec"]["matchConstraints"]
    assert "namespaceSelector" not in constraints and "objectSelector" not in constraints
    (rule,) = constraints["resourceRules"]
    assert (rule["resources"], sorted(rule["operations"])) == (["pods"], ["CREATE", "UPDATE"])


def test_the_policy_is_valid_kubernetes_1_30(policy, render):
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        kubernetes_validate.validate(of_kind(render(), kind, POLICY), "1.30", strict=True)


def test_the_policy_can_be_left_out(render):
    docs = render(set_values={"admissionPolicy.enabled": "false"})
    assert not [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]


def test_a_cluster_before_1_30_is_told_what_to_do(helm, chart_with_dependency):
    def template(*more: str) -> subprocess.CompletedProcess:
        args = [helm, "template", "egs", str(chart_with_dependency), "-n", "egs", "--kube-version", "1.29.0", *more]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    refused = template()
    assert refused.returncode != 0 and "set admissionPolicy.enabled=false" in refused.stderr, refused.stderr
    assert template("--set", "admissionPolicy.enabled=false").returncode == 0
