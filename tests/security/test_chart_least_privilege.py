"""The chart's ServiceAccounts cannot take over the cluster (issue 46, item 4).

Found: the egs service's ClusterRole, bound cluster-wide, let it mint a token of any ServiceAccount
(``kube-system``'s included), write Roles with escalate and bind them, delete pods and write Deployments
in every namespace; the hub's let it create pods in any namespace. Anyone holding either pod's token held
most of the cluster. Here the rendered RBAC is read as the API server's RBAC authorizer reads it
(tests/k8s/rbac.py), in a namespace that is no slice's: before the fix every one of these was allowed.
What the service does in slice namespaces it may do there only once it has granted itself the chart's
ClusterRole there, which the service-scope policy lets it do only in slice namespaces
(tests/chart/test_service_scope_policy.py).
"""

from __future__ import annotations

import pytest

from ..chart.conftest import CHART, NAMESPACE, find_helm, put_dependencies, render_chart, vendor_dir
from ..k8s.rbac import RBAC, Attributes, allowed, of_objects


@pytest.fixture(scope="module")
def chart() -> list[dict]:
    put_dependencies(CHART, vendor_dir())
    return render_chart(find_helm(), CHART)


EGS, HUB = (NAMESPACE, "egs"), (NAMESPACE, "hub")
ATTACKS = {
    # name: (ServiceAccount, verb, API group, resource, namespace, name)
    "the service mints kube-system's tokens": (EGS, "create", "", "serviceaccounts/token", "kube-system", "default"),
    "the service writes a Role granting everything": (EGS, "escalate", RBAC, "roles", "kube-system", "x"),
    "the service binds any Role": (EGS, "bind", RBAC, "roles", "kube-system", "x"),
    "the service binds cluster-admin": (EGS, "bind", RBAC, "clusterroles", "kube-system", "cluster-admin"),
    "the service deletes kube-system's pods": (EGS, "delete", "", "pods", "kube-system", "coredns"),
    "the service evicts them": (EGS, "create", "", "pods/eviction", "kube-system", "coredns"),
    "the service proxies to any pod": (EGS, "get", "", "pods/proxy", "kube-system", "coredns"),
    "the service runs Deployments anywhere": (EGS, "create", "apps", "deployments", "kube-system", None),
    "the service rewrites Services anywhere": (EGS, "update", "", "services", "kube-system", "kube-dns"),
    "the service writes ServiceAccounts anywhere": (EGS, "create", "", "serviceaccounts", "team-x", None),
    "the service lifts quotas anywhere": (EGS, "update", "", "resourcequotas", "team-x", "compute"),
    "the service runs Jobs outside its checks namespace": (EGS, "create", "batch", "jobs", "kube-system", None),
    "the hub creates pods anywhere": (HUB, "create", "", "pods", "kube-system", None),
    "the hub deletes pods anywhere": (HUB, "delete", "", "pods", "team-x", "trainer"),
    "the hub makes claims anywhere": (HUB, "create", "", "persistentvolumeclaims", "team-x", None),
}


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
def test_outside_slice_namespaces_the_charts_accounts_are_refused(chart, attack):
    account, verb, group, resource, namespace, name = attack
    attributes = Attributes(verb, group, resource, namespace, name)
    assert not allowed(account, attributes, of_objects(chart, namespace)), attack


def test_the_service_binds_only_the_charts_own_clusterroles(chart):
    policy = of_objects(chart, "team-x")
    bind = lambda name: allowed(EGS, Attributes("bind", RBAC, "clusterroles", "team-x", name), policy)  # noqa: E731
    assert bind("egs-egs-hub-workspace") and bind("egs-egs-hub-spawner")
    assert not bind("egs-egs-hub") and not bind("admin") and not bind("edit")
