"""A slice's objects on a cluster, decided without I/O: namespace plans, managed objects, role templates."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pytest

from egs_hub.backends.kubernetes import slice_objects as so
from egs_hub.backends.kubernetes.roles import (
    DEFAULT_ROLE_TEMPLATES,
    NamespaceGrant,
    RoleTemplateError,
    parse_namespace_grants,
    parse_role_templates,
)


def namespace(name: str, slice_name: str | None = None, *, created: bool = False, deleting: bool = False) -> dict:
    meta: dict = {"name": name, "labels": {"kubernetes.io/metadata.name": name}}
    if slice_name is not None:
        meta["labels"]["egs.io/slice"] = slice_name
    if created:
        meta["annotations"] = {"egs.io/created-by": "egs-hub"}
    if deleting:
        meta["deletionTimestamp"] = "2025-03-01T12:00:00Z"
    return {"metadata": meta}


@dataclass
class PlanCase:
    wanted: tuple[str, ...]
    existing: list[dict]
    want: so.NamespacePlan = field(default_factory=so.NamespacePlan)


PLAN_CASES = {
    "new slice: every namespace created": PlanCase(
        wanted=("a", "b"), existing=[], want=so.NamespacePlan(create=("a", "b"))
    ),
    "an unlabelled namespace is adopted": PlanCase(
        wanted=("a", "ml"), existing=[namespace("ml")], want=so.NamespacePlan(create=("a",), adopt=("ml",))
    ),
    "the slice's namespaces are kept, created or adopted": PlanCase(
        wanted=("a", "ml"),
        existing=[namespace("a", "team-a", created=True), namespace("ml", "team-a")],
        want=so.NamespacePlan(keep=("a", "ml")),
    ),
    "another slice's namespace is a conflict": PlanCase(
        wanted=("a", "shared"),
        existing=[namespace("shared", "team-b")],
        want=so.NamespacePlan(create=("a",), conflicts=("namespace shared belongs to slice team-b",)),
    ),
    "a namespace being deleted is a conflict": PlanCase(
        wanted=("a",),
        existing=[namespace("a", "team-a", created=True, deleting=True)],
        want=so.NamespacePlan(conflicts=("namespace a is being deleted; try again once it is gone",)),
    ),
    "namespaces no longer wanted: created deleted, adopted released": PlanCase(
        wanted=("a",),
        existing=[
            namespace("a", "team-a", created=True),
            namespace("old", "team-a", created=True),
            namespace("ml", "team-a"),
        ],
        want=so.NamespacePlan(keep=("a",), release=("ml",), delete=("old",)),
    ),
    "removing the slice (nothing wanted)": PlanCase(
        wanted=(),
        existing=[namespace("a", "team-a", created=True), namespace("ml", "team-a")],
        want=so.NamespacePlan(release=("ml",), delete=("a",)),
    ),
    "another slice's namespaces are never released or deleted": PlanCase(
        wanted=(),
        existing=[namespace("b", "team-b", created=True), namespace("plain")],
        want=so.NamespacePlan(),
    ),
    "wanted order is kept": PlanCase(
        wanted=("z", "m", "a"), existing=[namespace("m")], want=so.NamespacePlan(create=("z", "a"), adopt=("m",))
    ),
}


@pytest.mark.parametrize("case", PLAN_CASES.values(), ids=PLAN_CASES.keys())
def test_plan_namespaces(case: PlanCase):
    existing = {n["metadata"]["name"]: n for n in case.existing}
    assert so.plan_namespaces("team-a", case.wanted, existing) == case.want


def test_new_namespace_is_labelled_and_marked_created():
    made = so.new_namespace("team-a", "team-a-dev")
    assert made == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-a-dev",
            "labels": {"egs.io/slice": "team-a"},
            "annotations": {"egs.io/created-by": "egs-hub"},
        },
    }
    assert so.created_by_egs_hub(made)
    assert not so.created_by_egs_hub(namespace("ml", "team-a"))
    assert so.adopt_patch("team-a") == {"metadata": {"labels": {"egs.io/slice": "team-a"}}}
    assert so.release_patch() == {"metadata": {"labels": {"egs.io/slice": None}}}


def keyed(objects: list[dict]) -> list[tuple[str, str, str]]:
    return [(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects]


def test_managed_objects_per_namespace_and_template():
    objects = so.managed_objects("team-a", ("a", "b"), DEFAULT_ROLE_TEMPLATES, {"nvidia.com/gpu": 8})
    assert keyed(objects) == [
        ("ServiceAccount", "a", "egs-team-a"),
        ("Role", "a", "egs-deployment"),
        ("Role", "a", "egs-reader"),
        ("Role", "b", "egs-deployment"),
        ("Role", "b", "egs-reader"),
        ("RoleBinding", "a", "egs-deployment"),
        ("RoleBinding", "a", "egs-reader"),
        ("RoleBinding", "b", "egs-deployment"),
        ("RoleBinding", "b", "egs-reader"),
        ("ResourceQuota", "a", "egs-gpus"),
        ("ResourceQuota", "b", "egs-gpus"),
    ]
    for obj in objects:
        assert obj["metadata"]["labels"] == {"egs.io/slice": "team-a", "app.kubernetes.io/managed-by": "egs-hub"}
    binding = next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "b")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "egs-deployment"}
    # the ServiceAccount lives in the home (first) namespace and is bound in every namespace
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "egs-team-a", "namespace": "a"}]
    reader = next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "egs-reader")
    assert reader["subjects"] == [{"kind": "Group", "name": "egs:team-a", "apiGroup": "rbac.authorization.k8s.io"}]
    assert objects[-1]["spec"] == {"hard": {"requests.nvidia.com/gpu": "8"}}


def rules_allow(rules, verb: str, group: str, resource: str) -> bool:
    return any(verb in r["verbs"] and group in r["apiGroups"] and resource in r["resources"] for r in rules)


ACCESS_CASES = {
    # (template, verb, group, resource): want allowed
    "deployment creates pods": ("deployment", "create", "", "pods", True),
    "deployment creates deployments": ("deployment", "create", "apps", "deployments", True),
    "deployment creates jobs": ("deployment", "create", "batch", "jobs", True),
    "deployment applies GPRs": ("deployment", "create", "egs.io", "gpuprovisionrequests", True),
    "deployment execs into pods": ("deployment", "create", "", "pods/exec", True),
    "deployment manages secrets": ("deployment", "update", "", "secrets", True),
    "deployment reads its quota": ("deployment", "get", "", "resourcequotas", True),
    "deployment cannot raise its quota": ("deployment", "update", "", "resourcequotas", False),
    "deployment cannot write GPR status": ("deployment", "patch", "egs.io", "gpuprovisionrequests/status", False),
    "deployment cannot change roles": ("deployment", "update", "rbac.authorization.k8s.io", "roles", False),
    "deployment cannot bind roles": ("deployment", "create", "rbac.authorization.k8s.io", "rolebindings", False),
    "reader lists pods": ("reader", "list", "", "pods", True),
    "reader reads logs": ("reader", "get", "", "pods/log", True),
    "reader watches GPRs": ("reader", "watch", "egs.io", "gpuprovisionrequests", True),
    "reader cannot create pods": ("reader", "create", "", "pods", False),
    "reader cannot read secrets": ("reader", "get", "", "secrets", False),
    "reader cannot exec": ("reader", "create", "", "pods/exec", False),
}


@pytest.mark.parametrize("template, verb, group, resource, want", ACCESS_CASES.values(), ids=ACCESS_CASES.keys())
def test_default_templates_are_edit_and_view_in_the_namespace(template, verb, group, resource, want):
    assert rules_allow(DEFAULT_ROLE_TEMPLATES[template].rules, verb, group, resource) is want


def test_custom_templates_render_their_placeholders():
    templates = parse_role_templates(
        {
            "gpu-admin": {
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"], "resourceNames": []}],
                "subjects": [
                    {"kind": "User", "name": "admin-of-{slice}"},
                    {"kind": "ServiceAccount", "name": "{service_account}", "namespace": "{service_account_namespace}"},
                ],
            }
        }
    )
    objects = so.managed_objects("team-a", ("home", "b"), templates, {})
    role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["namespace"] == "b")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]
    binding = next(o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "b")
    assert binding["metadata"]["name"] == "egs-gpu-admin"
    assert binding["subjects"] == [
        {"kind": "User", "name": "admin-of-team-a", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": "egs-team-a", "namespace": "home"},
    ]


RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
TEMPLATE_ERRORS = {
    "not an object": ([], "must be a non-empty object"),
    "bad name": ({"Deploy": {"rules": [RULE]}}, "role template 'Deploy': the name must be"),
    "unknown field": ({"x": {"rules": [RULE], "bind": []}}, "role template 'x' must be an object with only rules"),
    "no rules": ({"x": {"rules": []}}, "role template 'x': rules must be a non-empty list"),
    "rule without verbs": (
        {"x": {"rules": [{"apiGroups": [""], "resources": ["pods"]}]}},
        r"rules\[0\].verbs must be a non-empty list of strings",
    ),
    "unknown rule field": ({"x": {"rules": [{**RULE, "nonResourceURLs": ["/"]}]}}, "unknown field.*nonResourceURLs"),
    "subject kind": ({"x": {"rules": [RULE], "subjects": [{"kind": "Robot", "name": "r"}]}}, "kind is one of"),
    "service account without namespace": (
        {"x": {"rules": [RULE], "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}},
        r"subjects\[0\].namespace is required",
    ),
    "unknown placeholder": (
        {"x": {"rules": [RULE], "subjects": [{"kind": "Group", "name": "{team}"}]}},
        r"unknown placeholder \{team\}",
    ),
}


@pytest.mark.parametrize("data, want", TEMPLATE_ERRORS.values(), ids=TEMPLATE_ERRORS.keys())
def test_bad_role_templates_are_named(data, want):
    with pytest.raises(RoleTemplateError, match=want):
        parse_role_templates(data)


def test_default_templates_survive_parsing():
    """The defaults are of the form admins write: parsing them as data gives them back."""
    as_data = {
        t.name: {"rules": [dict(r) for r in t.rules], "subjects": [dict(s) for s in t.subjects]}
        for t in DEFAULT_ROLE_TEMPLATES.values()
    }
    assert parse_role_templates(as_data) == dict(DEFAULT_ROLE_TEMPLATES)


def quota_edited(edit) -> dict:
    """The slice's quota as the server might hold it, after ``edit`` (a function changing it in place)."""
    current = copy.deepcopy(so.gpu_quota("team-a", "a", {"nvidia.com/gpu": 4}))
    edit(current)
    return current


DIFFERS_CASES = {
    "same": (lambda q: None, False),
    "extra labels and server fields are fine": (
        lambda q: (
            q.update(status={"used": {}}) or q["metadata"].update(uid="u", labels={**q["metadata"]["labels"], "x": "y"})
        ),
        False,
    ),
    "label changed": (lambda q: q["metadata"]["labels"].update({"egs.io/slice": "team-b"}), True),
    "label removed": (lambda q: q["metadata"]["labels"].pop("app.kubernetes.io/managed-by"), True),
    "quota raised by hand": (lambda q: q["spec"]["hard"].update({"requests.nvidia.com/gpu": "99"}), True),
    "another hard limit added": (lambda q: q["spec"]["hard"].update(pods="10"), True),
}


@pytest.mark.parametrize("edit, want", DIFFERS_CASES.values(), ids=DIFFERS_CASES.keys())
def test_differs(edit, want):
    assert so.differs(so.gpu_quota("team-a", "a", {"nvidia.com/gpu": 4}), quota_edited(edit)) is want


def test_stale_objects_are_those_not_desired():
    desired = so.managed_objects("team-a", ("a",), DEFAULT_ROLE_TEMPLATES, {"nvidia.com/gpu": 1})
    old_role = so.role("team-a", "a", parse_role_templates({"old": {"rules": [RULE]}})["old"])
    moved_account = so.service_account("team-a", "b")
    assert so.stale(desired, [*desired, old_role, moved_account]) == [old_role, moved_account]


SERVICE = NamespaceGrant("egs-egs-hub-workspace", "egs", "egs")
HUB = NamespaceGrant("egs-egs-hub-spawner", "hub", "egs")


def test_a_grant_binds_its_clusterrole_to_its_account_in_every_namespace_first():
    bindings = so.grant_bindings("team-a", ("a", "b"), (SERVICE, HUB))
    assert [(b["metadata"]["namespace"], b["metadata"]["name"]) for b in bindings] == [
        ("a", "egs:egs-egs-hub-workspace"),
        ("a", "egs:egs-egs-hub-spawner"),
        ("b", "egs:egs-egs-hub-workspace"),
        ("b", "egs:egs-egs-hub-spawner"),
    ]
    first = bindings[0]
    assert first["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": SERVICE.cluster_role,
    }
    assert first["subjects"] == [{"kind": "ServiceAccount", "name": "egs", "namespace": "egs"}]
    assert first["metadata"]["labels"] == {"egs.io/slice": "team-a", "app.kubernetes.io/managed-by": "egs-hub"}
    # No role template can be named like a grant: template names have no ':'.
    with pytest.raises(RoleTemplateError):
        parse_role_templates({"egs:egs-egs-hub-workspace": {"rules": [RULE]}})


def test_the_service_deletes_its_own_grant_last():
    grants = (SERVICE, HUB)
    objects = [
        *so.grant_bindings("team-a", ("a",), grants),
        *so.managed_objects("team-a", ("a",), DEFAULT_ROLE_TEMPLATES, {"nvidia.com/gpu": 1}),
    ]
    order = [(o["kind"], o["metadata"]["name"]) for o in so.deletion_order(objects, grants)]
    assert order[-2:] == [("RoleBinding", "egs:egs-egs-hub-spawner"), ("RoleBinding", "egs:egs-egs-hub-workspace")]
    assert sorted(order[:-2]) == sorted((o["kind"], o["metadata"]["name"]) for o in objects[2:])


GRANT = {"cluster_role": "egs-egs-hub-workspace", "service_account": "egs", "namespace": "egs"}
GRANT_ERRORS = {
    "not a list": ({"cluster_role": "x"}, "must be a list"),
    "a field missing": (
        [{"cluster_role": "x", "service_account": "egs"}],
        r"grant \[0\] must be an object with exactly",
    ),
    "an unknown field": ([{**GRANT, "verbs": ["*"]}], "exactly cluster_role, service_account, namespace"),
    "not a name": ([{**GRANT, "namespace": "Kube System"}], r"grant \[0\].namespace must be a Kubernetes name"),
    "a ClusterRole twice": ([GRANT, {**GRANT, "service_account": "hub"}], "name a ClusterRole twice"),
}


@pytest.mark.parametrize("data, want", GRANT_ERRORS.values(), ids=GRANT_ERRORS.keys())
def test_bad_namespace_grants_are_named(data, want):
    with pytest.raises(RoleTemplateError, match=want):
        parse_namespace_grants(data)


def test_namespace_grants_parse():
    assert parse_namespace_grants([GRANT]) == (SERVICE,)
    assert parse_namespace_grants([]) == ()


def test_bad_inputs():
    with pytest.raises(ValueError, match="at least one namespace"):
        so.managed_objects("team-a", (), DEFAULT_ROLE_TEMPLATES, {"nvidia.com/gpu": 1})
    with pytest.raises(ValueError, match="cannot be negative"):
        so.gpu_quota("team-a", "a", {"nvidia.com/gpu": -1})
