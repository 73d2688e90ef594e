"""The chart's ClusterRoles grant exactly what egs-hub's code does through the Kubernetes API.

The uses are not listed by hand: the backend's tests (tests/k8s) and SliceKubeSpawner's
(tests/spawners/test_kube_spawner.py) run again in a pytest subprocess with the
recording plugin (api_requests.py), which writes every (group, resource, verb) the
emulator served to the backend and to KubeSpawner. Two rules widen what was seen
into what the code can do, each for a reason in the code or in Kubernetes' RBAC:

- ``SliceObjects`` (backends/kubernetes/slices.py) applies one code path to every
  managed kind (``MANAGED_KINDS``), so a verb seen on one of them is used on all;
- writing a Role that grants what the writer does not hold needs ``escalate`` on
  roles, and binding one ``bind`` (RBAC's privilege-escalation prevention); the
  emulator does not check this, a real API server does.
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


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> dict[str, set[tuple[str, str, str]]]:
    """{client: {(group, resource, verb)}} from running the backend's and the spawner's tests again."""
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
    uses: dict[str, set] = {}
    for client, group, resource, verb in json.loads(out.read_text()):
        uses.setdefault(client, set()).add((group, resource, verb))
    return uses


def widened(uses: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """The uses, with a verb seen on one managed kind given to all, and what RBAC implies for them."""
    managed = {RESOURCE_OF_KIND[kind] for kind in MANAGED_KINDS}
    verbs = {verb for group, resource, verb in uses if (group, resource) in managed}
    result = set(uses) | {(group, resource, verb) for group, resource in managed for verb in verbs}
    return result | {granted for granted, needs in IMPLIED.items() if needs & result}


def granted(role: dict) -> set[tuple[str, str, str]]:
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


def test_the_egs_service_may_do_exactly_what_its_backend_does(recorded, render):
    docs = render()
    role = of_kind(docs, "ClusterRole", "egs-egs-hub")
    need = widened(recorded["egs-service"])
    have = granted(role)
    assert not need - have, f"used but not granted: {sorted(need - have)}"
    assert not have - need, f"granted but unused: {sorted(have - need)}"
    binding = of_kind(docs, "ClusterRoleBinding", "egs-egs-hub")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = of_kind(docs, "Deployment", "egs")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    assert of_kind(docs, "ServiceAccount", account)


def test_the_hub_may_do_exactly_what_kubespawner_does(recorded, render):
    docs = render()
    role = of_kind(docs, "ClusterRole", "egs-egs-hub-spawner")
    need, have = recorded["spawner"], granted(role)
    assert not need - have, f"used but not granted: {sorted(need - have)}"
    assert not have - need, f"granted but unused: {sorted(have - need)}"
    binding = of_kind(docs, "ClusterRoleBinding", "egs-egs-hub-spawner")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = of_kind(docs, "Deployment", "hub")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
