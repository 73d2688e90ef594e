"""The chart's RBAC grants exactly what egs-hub's code does through the Kubernetes API, where it does it.

The uses are not listed by hand: the backend's tests (tests/k8s) and SliceKubeSpawner's
(tests/spawners/test_kube_spawner.py) run again in a pytest subprocess with the
recording plugin (api_requests.py), which writes every (group, resource, verb) the
emulator served to the backend and to KubeSpawner, and where: cluster-wide, in a slice
namespace, or in another. What is done cluster-wide must be granted by the ClusterRole bound
cluster-wide; in a slice namespace, by it or by the ClusterRole the service binds there (its
grant, rbac.yaml); in another namespace (the checks and pools ones), by it or by the chart's
Roles there; and nothing is granted that is not used there. Two rules widen what was seen
into what the code can do, each for a reason in the code or in Kubernetes' RBAC:

- ``SliceObjects`` (backends/kubernetes/slices.py) applies one code path to every
  managed kind (``MANAGED_KINDS``), so a verb seen on one of them is used on all;
- writing a Role that grants what the writer does not hold needs ``escalate`` on
  roles, and binding one ``bind``, a ClusterRole's too (RBAC's privilege-escalation
  prevention).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from egs_hub.backends.kubernetes.backend import USER_AGENT
from egs_hub.backends.kubernetes.slice_objects import MANAGED_KINDS

from ..k8s.cluster import HARNESS_USER_AGENT
from .api_requests import client_of
from .conftest import NAMESPACE, ROOT, of_kind

RBAC = "rbac.authorization.k8s.io"
# The tests whose requests are recorded, and those among them that are not egs-hub's code (the emulator's own
# tests; the CRD's, which make no requests).
RECORDED_TESTS = ("tests/k8s", "tests/spawners/test_kube_spawner.py")
NOT_RECORDED = ("tests/k8s/test_emulator.py", "tests/k8s/test_manifests.py")
RESOURCE_OF_KIND = {
    "ServiceAccount": ("", "serviceaccounts"),
    "Role": (RBAC, "roles"),
    "RoleBinding": (RBAC, "rolebindings"),
    "ResourceQuota": ("", "resourcequotas"),
}
# Granted for these uses: (group, resource, verb) -> the uses that need it.
IMPLIED = {
    (RBAC, "roles", "escalate"): {(RBAC, "roles", "create"), (RBAC, "roles", "update")},
    (RBAC, "roles", "bind"): {(RBAC, "rolebindings", "create"), (RBAC, "rolebindings", "update")},
}
# The grants' RoleBindings, written in a slice namespace before the service holds anything there: its one
# cluster-wide write into namespaces (held to slice namespaces by the service-scope policy), and the bind of
# the ClusterRoles they name.
GRANT = {(RBAC, "rolebindings", "create"), (RBAC, "clusterroles", "bind")}
Use = tuple[str, str, str]


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> dict[str, dict[str, set[Use]]]:
    """{client: {scope: {(group, resource, verb)}}} from running the backend's and the spawner's tests again."""
    out = tmp_path_factory.mktemp("api-requests") / "uses.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        "tests.chart.api_requests",
        f"--record-api-requests={out}",
        *RECORDED_TESTS,
        *(f"--deselect={path}" for path in NOT_RECORDED),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the recorded tests failed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    uses: dict[str, dict[str, set]] = {}
    for client, group, resource, verb, scope in json.loads(out.read_text()):
        uses.setdefault(client, {}).setdefault(scope, set()).add((group, resource, verb))
    return uses


def widened(uses: set[Use]) -> set[Use]:
    """The uses, with a verb seen on one managed kind given to all, and what RBAC implies for them."""
    managed = {RESOURCE_OF_KIND[kind] for kind in MANAGED_KINDS}
    verbs = {verb for group, resource, verb in uses if (group, resource) in managed}
    result = set(uses) | {(group, resource, verb) for group, resource in managed for verb in verbs}
    return result | {granted for granted, needs in IMPLIED.items() if needs & result}


def granted(role: dict) -> set[Use]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_recorder_tells_the_clients_apart():
    assert client_of(USER_AGENT, "tests/k8s/test_slices.py::t") == "egs-service"
    assert client_of(USER_AGENT, "tests/spawners/test_kube_spawner.py::t") == "egs-service"
    assert client_of("OpenAPI-Generator/33.3.0/python", "tests/spawners/test_kube_spawner.py::t") == "spawner"
    assert client_of("OpenAPI-Generator/33.3.0/python", "tests/k8s/test_slices.py::t") is None
    assert client_of(HARNESS_USER_AGENT, "tests/spawners/test_kube_spawner.py::t") is None


WIDEN_CASES = {
    # uses: want added
    "a verb on one managed kind": (
        {("", "serviceaccounts", "get")},
        {("", "resourcequotas", "get"), (RBAC, "roles", "get"), (RBAC, "rolebindings", "get")},
    ),
    "creating roles needs escalate and bind": (
        {(RBAC, "roles", "create")},
        {
            ("", "serviceaccounts", "create"),
            ("", "resourcequotas", "create"),
            (RBAC, "rolebindings", "create"),
            (RBAC, "roles", "escalate"),
            (RBAC, "roles", "bind"),
        },
    ),
    "other resources stay as seen": ({("", "nodes", "patch")}, set()),
}


@pytest.mark.parametrize("uses, want_added", WIDEN_CASES.values(), ids=WIDEN_CASES.keys())
def test_widened(uses, want_added):
    assert widened(uses) - uses == want_added


def bound_cluster_wide(docs: list[dict], name: str, account: str) -> dict:
    """The ClusterRole ``name``, checked to be bound cluster-wide to the ServiceAccount ``account`` alone."""
    binding = of_kind(docs, "ClusterRoleBinding", name)
    assert binding["roleRef"]["name"] == name
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    return of_kind(docs, "ClusterRole", name)


def granted_in_slices(docs: list[dict], name: str, account: str) -> dict:
    """The ClusterRole ``name``, checked to be bound by no one but the service's grant of it to ``account``."""
    assert not [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding") and d["roleRef"]["name"] == name]
    grants = json.loads(of_kind(docs, "ConfigMap", "egs")["data"]["egs_config.json"])["EGSService"]["namespace_grants"]
    assert {"cluster_role": name, "service_account": account, "namespace": NAMESPACE} in grants
    return of_kind(docs, "ClusterRole", name)


def test_the_egs_service_may_do_exactly_what_its_backend_does_where_it_does_it(recorded, render):
    docs = render()
    account = of_kind(docs, "Deployment", "egs")["spec"]["template"]["spec"]["serviceAccountName"]
    assert of_kind(docs, "ServiceAccount", account)
    uses = recorded["egs-service"]
    cluster_wide = granted(bound_cluster_wide(docs, "egs-egs-hub", account))
    in_slices = granted(granted_in_slices(docs, "egs-egs-hub-workspace", account))
    elsewhere = set()
    for use in ("checks", "pools"):
        binding = of_kind(docs, "RoleBinding", f"egs-egs-hub-{use}")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
        elsewhere |= granted(of_kind(docs, "Role", binding["roleRef"]["name"]))

    # Requests into namespaces that are not there (absent) need no rights: RBAC refuses them on a cluster.
    need = {scope: widened(found) for scope, found in uses.items()}
    assert not need["cluster"] - cluster_wide, f"used but not granted: {sorted(need['cluster'] - cluster_wide)}"
    missing = need["slice"] - cluster_wide - in_slices - GRANT
    assert not missing, f"used in slice namespaces but not granted there: {sorted(missing)}"
    missing = need["namespace"] - cluster_wide - elsewhere
    assert not missing, f"used in the checks or pools namespace but not granted there: {sorted(missing)}"
    # Cluster-wide only what is done cluster-wide or outside slice namespaces (Events, GPR resources), and the
    # grant: anything done in slice namespaces alone is granted there.
    unused = cluster_wide - need["cluster"] - need["namespace"] - GRANT
    assert not unused, f"granted cluster-wide but used only in slice namespaces, or not at all: {sorted(unused)}"
    assert not in_slices - need["slice"], f"granted in slice namespaces but unused: {sorted(in_slices - need['slice'])}"
    assert not elsewhere - need["namespace"], f"granted but unused: {sorted(elsewhere - need['namespace'])}"
    # What the grant writes, it may write only by binding one of the chart's ClusterRoles, named.
    (bind,) = [r for r in bound_cluster_wide(docs, "egs-egs-hub", account)["rules"] if "bind" in r["verbs"]]
    assert bind == {
        "apiGroups": [RBAC],
        "resources": ["clusterroles"],
        "verbs": ["bind"],
        "resourceNames": ["egs-egs-hub-workspace", "egs-egs-hub-spawner"],
    }


def test_the_hub_may_do_exactly_what_kubespawner_does_in_slice_namespaces_only(recorded, render):
    docs = render()
    account = of_kind(docs, "Deployment", "hub")["spec"]["template"]["spec"]["serviceAccountName"]
    uses = recorded["spawner"]
    assert set(uses) == {"slice"}, f"KubeSpawner used the API outside slice namespaces: {uses}"
    have = granted(granted_in_slices(docs, "egs-egs-hub-spawner", account))
    need = uses["slice"]
    assert not need - have, f"used but not granted: {sorted(need - have)}"
    assert not have - need, f"granted but unused: {sorted(have - need)}"
    ours = [d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].startswith("egs-egs-hub")]
    assert all(b["subjects"][0]["name"] != account for b in ours), "the hub is bound cluster-wide"
