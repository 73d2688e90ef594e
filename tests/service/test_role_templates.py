"""Role templates and namespace grants in the service's config: checked when set, templates merged over the
built-in ones, and handed to the Kubernetes backends the registry makes (what a backend does with them:
tests/k8s/test_slices.py, tests/chart/test_least_privilege.py)."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from egs_hub.backends.kubernetes.roles import DEFAULT_ROLE_TEMPLATES, parse_namespace_grants
from egs_hub.core.requests import ClusterCreate
from egs_hub.service.app import EGSService
from egs_hub.service.clusters import Clusters

AUDITOR = {
    "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]}],
    "subjects": [{"kind": "Group", "name": "auditors-{slice}"}],
}


def test_configured_templates_join_and_replace_the_built_in_ones():
    service = EGSService(role_templates={"auditor": AUDITOR, "reader": AUDITOR})
    templates = service.all_role_templates
    assert sorted(templates) == ["auditor", "deployment", "reader"]
    assert templates["deployment"] is DEFAULT_ROLE_TEMPLATES["deployment"]
    group = {"kind": "Group", "name": "auditors-{slice}", "apiGroup": "rbac.authorization.k8s.io"}
    assert templates["reader"].subjects == (group,)
    assert EGSService().all_role_templates == dict(DEFAULT_ROLE_TEMPLATES)


@pytest.mark.parametrize(
    ("templates", "message"),
    [
        ({"Bad Name": AUDITOR}, "role template 'Bad Name': the name must be"),
        ({"auditor": {"rules": []}}, "role template 'auditor': rules must be a non-empty list"),
        ({"auditor": {**AUDITOR, "verbs": []}}, "role template 'auditor' must be an object with only rules and"),
    ],
)
def test_bad_templates_are_refused_naming_what_is_wrong(templates, message):
    with pytest.raises(TraitError, match=f"^EGSService.role_templates: {message}"):
        EGSService(role_templates=templates)


def test_the_registry_gives_every_kubernetes_backend_the_templates(tmp_path):
    templates = EGSService(role_templates={"auditor": AUDITOR}).all_role_templates
    registry = Clusters(sessions=None, clock=None, role_templates=templates)
    backend = registry.make_backend(ClusterCreate(name="east", kubeconfig=str(tmp_path / "kubeconfig")))
    assert backend.role_templates == templates


GRANTS = [
    {"cluster_role": "egs-egs-hub-workspace", "service_account": "egs", "namespace": "egs"},
    {"cluster_role": "egs-egs-hub-spawner", "service_account": "hub", "namespace": "egs"},
]


def test_namespace_grants_reach_the_in_cluster_backend_only(tmp_path):
    """The grants name ClusterRoles of the cluster the service runs in (the chart's); another cluster has none."""
    grants = parse_namespace_grants(EGSService(namespace_grants=GRANTS).namespace_grants)
    registry = Clusters(sessions=None, clock=None, namespace_grants=grants)
    assert registry.make_backend(ClusterCreate(name="home", in_cluster=True)).namespace_grants == grants
    other = registry.make_backend(ClusterCreate(name="east", kubeconfig=str(tmp_path / "kubeconfig")))
    assert other.namespace_grants == ()


def test_bad_namespace_grants_are_refused_naming_what_is_wrong():
    with pytest.raises(TraitError, match=r"^EGSService.namespace_grants: namespace grant \[1\].service_account"):
        EGSService(namespace_grants=[GRANTS[0], {**GRANTS[1], "service_account": "Hub!"}])
