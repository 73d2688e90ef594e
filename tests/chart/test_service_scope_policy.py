"""The egs service's cluster-wide writes reach slice namespaces only (issue 46, item 4): the service-scope policy.

RBAC cannot grant "in namespaces labelled egs.io/slice", yet the service must write the first RoleBinding
(its grant) in a namespace where it holds nothing, and must label, release and delete namespaces. Its
ClusterRole allows these anywhere; the chart's ValidatingAdmissionPolicy holds them, for the egs
ServiceAccount's requests alone, to what the backend does (slices.py): RoleBindings in slice namespaces,
the egs.io/slice label on namespaces that are not protected, deletes of the slice namespaces it created.
Its rendered CEL runs here over the backend's own requests and an attacker's with the service's token.
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from egs_hub.backends.kubernetes import slice_objects as so

from .admission import bound_policy, verdict
from .conftest import NAMESPACE, of_kind

POLICY = "egs-egs-hub-service-scope"
EGS = f"system:serviceaccount:{NAMESPACE}:egs"
SLICE = "egs.io/slice"


def namespace(name: str, labels: dict | None = None, annotations: dict | None = None) -> dict:
    meta = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def merged(obj: dict, patch: dict) -> dict:
    """A merge patch of metadata labels applied, as the API server gives the policy ``object``."""
    labels = {**obj["metadata"]["labels"], **patch["metadata"]["labels"]}
    return {**obj, "metadata": {**obj["metadata"], "labels": {k: v for k, v in labels.items() if v is not None}}}


def request(operation: str, resource: str, user: str = EGS, *, obj=None, old=None, ns=None) -> dict:
    group = "rbac.authorization.k8s.io" if resource == "rolebindings" else ""
    return {
        "request": {
            "operation": operation,
            "userInfo": {"username": user},
            "resource": {"group": group, "version": "v1", "resource": resource},
        },
        "object": obj,
        "oldObject": old,
        "namespaceObject": ns,
    }


TEAM_X = namespace("team-x")
ML_HOME = so.new_namespace("ml", "ml-home")
ML_HOME["metadata"]["labels"]["kubernetes.io/metadata.name"] = "ml-home"
ADOPTED = merged(TEAM_X, so.adopt_patch("ml"))
GRANT = {"kind": "RoleBinding", "metadata": {"name": "egs:egs-egs-hub-workspace"}}
SYSTEM = namespace("kube-system")

CASES = {
    # name: (request, refused by the validation whose message holds this; None: admitted)
    "the grant in a namespace it created": (request("CREATE", "rolebindings", obj=GRANT, ns=ML_HOME), None),
    "the grant in a namespace it adopted": (request("CREATE", "rolebindings", obj=GRANT, ns=ADOPTED), None),
    "the grant deleted before a release": (request("DELETE", "rolebindings", old=GRANT, ns=ADOPTED), None),
    "adopting a namespace": (request("UPDATE", "namespaces", obj=ADOPTED, old=TEAM_X), None),
    "releasing it": (request("UPDATE", "namespaces", obj=merged(ADOPTED, so.release_patch()), old=ADOPTED), None),
    "deleting a namespace it created": (request("DELETE", "namespaces", old=ML_HOME), None),
    "someone else's request is not the policy's": (
        request("DELETE", "namespaces", "kubernetes-admin", old=SYSTEM),
        None,
    ),
    "a grant in kube-system": (
        request("CREATE", "rolebindings", obj=GRANT, ns=SYSTEM),
        "only in slice namespaces",
    ),
    "a binding in a namespace of no slice": (
        request("UPDATE", "rolebindings", obj=GRANT, old=GRANT, ns=TEAM_X),
        "not in team-x",
    ),
    "adopting kube-system": (
        request("UPDATE", "namespaces", obj=merged(SYSTEM, so.adopt_patch("ml")), old=SYSTEM),
        "kube-system is protected",
    ),
    "adopting the release's own namespace": (
        request(
            "UPDATE",
            "namespaces",
            obj=merged(namespace(NAMESPACE), so.adopt_patch("ml")),
            old=namespace(NAMESPACE),
        ),
        f"{NAMESPACE} is protected",
    ),
    "lifting a namespace's pod security": (
        request(
            "UPDATE",
            "namespaces",
            obj=namespace("team-x", {"pod-security.kubernetes.io/enforce": "privileged"}),
            old=namespace("team-x", {"pod-security.kubernetes.io/enforce": "restricted"}),
        ),
        "changes only the egs.io/slice label",
    ),
    "marking a namespace as its own, to delete it": (
        request(
            "UPDATE",
            "namespaces",
            obj=namespace("team-x", {SLICE: "ml"}, {so.CREATED_BY: so.EGS_HUB}),
            old=namespace("team-x", {SLICE: "ml"}),
        ),
        "changes only the egs.io/slice label",
    ),
    "deleting kube-system": (request("DELETE", "namespaces", old=SYSTEM), "not kube-system"),
    "deleting a namespace it only adopted": (request("DELETE", "namespaces", old=ADOPTED), "not team-x"),
}


@pytest.fixture(scope="module")
def policy(render) -> dict:
    return bound_policy(render(), POLICY)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_policy_admits_what_the_backend_does_and_refuses_the_rest(policy, case):
    given, refused = case
    answer = verdict(policy, given)
    if refused is None:
        assert answer is None
    else:
        assert answer is not None and refused in answer, answer


def test_the_policy_matches_the_service_writes_its_clusterrole_allows_anywhere(policy, render):
    """Every write the service may make in any namespace or on namespaces (its ClusterRole) is matched."""
    matched = {
        (group, resource, operation)
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for operation in rule["operations"]
    }
    operation_of = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE", "delete": "DELETE"}
    role = of_kind(render(), "ClusterRole", "egs-egs-hub")
    writes = {
        (group, resource, operation_of[verb])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        if verb in operation_of and resource in ("namespaces", "rolebindings")
    }
    # Creating a namespace changes none that exists; every other such write is the policy's.
    assert writes - {("", "namespaces", "CREATE")} <= matched


def test_protected_namespaces_are_the_values_and_the_charts_own(render):
    docs = render(set_values={"admissionPolicy.protectedNamespaces": "{cert-manager}"})
    policy = of_kind(docs, "ValidatingAdmissionPolicy", POLICY)
    for name, protected in (("cert-manager", True), ("egs-checks", True), ("egs", True), ("kube-system", False)):
        given = request("UPDATE", "namespaces", obj=merged(namespace(name), so.adopt_patch("ml")), old=namespace(name))
        assert (verdict(policy, given) is not None) == protected, name


def test_the_policy_is_valid_kubernetes_1_30(render):
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        kubernetes_validate.validate(of_kind(render(), kind, POLICY), "1.30", strict=True)
