"""The Helm chart (charts/egs-hub): helm lint and template, every document checked with kubernetes-validate,
the GPR CRD's schema against the REST API's fields, the webhook's registration, and the hub's RBAC.

helm comes from tests/k8s/install_helm.sh (``make install-test`` runs it) into .cache/bin/helm.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess

import certifi
import jsonschema
import kubernetes_validate
import pytest
import yaml

from egs_hub.core.model import Status
from egs_hub.core.requests import GPRCreate

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "egs-hub"
CRD = CHART / "crds" / "gpuprovisionrequests.yaml"
KUBERNETES_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())  # the chart's kubeVersion floor, the latest
# One real CA certificate (the first of certifi's), as a webhook's caBundle holds one
FIRST_CA = certifi.contents().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
CA_BUNDLE = base64.b64encode(FIRST_CA[FIRST_CA.index("-----BEGIN") :].encode()).decode()


@pytest.fixture(scope="module")
def helm() -> str:
    found = os.environ.get("HELM") or (
        str(ROOT / ".cache/bin/helm") if (ROOT / ".cache/bin/helm").exists() else shutil.which("helm")
    )
    if found is None:
        pytest.fail("helm is not installed: run tests/k8s/install_helm.sh (make install-test runs it), or set $HELM")
    return found


def run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def render(helm: str, *values: str) -> list[dict]:
    sets = [f"--set={v}" for v in values]
    out = run(helm, "template", "egs", str(CHART), "--namespace", "hub", "--include-crds", *sets)
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def rendered(helm: str) -> list[dict]:
    return render(helm, f"webhook.caBundle={CA_BUNDLE}")


def of_kind(docs: list[dict], kind: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def test_helm_lint(helm):
    out = run(helm, "lint", "--strict", str(CHART), "--set", f"webhook.caBundle={CA_BUNDLE}")
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_the_chart_renders_what_the_backend_needs(rendered):
    names = sorted((d["kind"], d["metadata"]["name"]) for d in rendered)
    assert names == [
        ("ClusterRole", "egs-egs-hub"),
        ("ClusterRoleBinding", "egs-egs-hub"),
        ("CustomResourceDefinition", "gpuprovisionrequests.egs.io"),
        ("MutatingWebhookConfiguration", "egs-egs-hub"),
        ("ServiceAccount", "egs-hub"),
    ]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_document_is_valid_kubernetes(rendered, version):
    problems = []
    for doc in [*rendered, yaml.safe_load(CRD.read_text())]:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{doc['kind']} {doc['metadata']['name']}: {e.message} at {list(e.path)}")
    assert not problems, "\n".join(problems)


def test_the_webhook_registration(rendered):
    (hook,) = of_kind(rendered, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["namespaceSelector"] == {"matchExpressions": [{"key": "egs.io/slice", "operator": "Exists"}]}
    assert "objectSelector" not in hook
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert (hook["sideEffects"], hook["failurePolicy"], hook["admissionReviewVersions"]) == ("None", "Ignore", ["v1"])
    assert hook["clientConfig"] == {
        "service": {"name": "egs-hub", "namespace": "hub", "path": "/services/egs/webhooks/pods/home", "port": 443},
        "caBundle": CA_BUNDLE,
    }


def test_without_a_ca_bundle_the_api_server_trusts_its_roots(helm):
    hook = of_kind(render(helm), "MutatingWebhookConfiguration")["webhooks"][0]
    assert "caBundle" not in hook["clientConfig"]
    assert not [d for d in render(helm, "webhook.enabled=false") if d["kind"] == "MutatingWebhookConfiguration"]


# What the egs service does through the API, each with where it does it; the ClusterRole must grant exactly these.
USES = {
    ("", "nodes", "list"): "reflector.py: the inventory",
    ("", "nodes", "watch"): "reflector.py: the inventory",
    ("", "nodes", "get"): "backend.py: entry pre-checks, exit",
    ("", "nodes", "patch"): "objects.py: entry, cordon, return",
    ("", "pods", "list"): "drain.py: the slice's pods on a node",
    ("", "pods", "delete"): "drain.py: after the grace period",
    ("", "pods/eviction", "create"): "drain.py: exit",
    ("", "namespaces", "list"): "drain.py, slices.py: the slice's namespaces by label",
    ("", "namespaces", "get"): "slices.py: a wanted namespace",
    ("", "namespaces", "create"): "slices.py: ensure_slice",
    ("", "namespaces", "patch"): "slices.py: adopt, release",
    ("", "namespaces", "delete"): "slices.py: remove_slice",
    **{
        (group, resource, verb): f"slices.py: the slice's {resource}"
        for group, resource in (
            ("", "serviceaccounts"),
            ("", "resourcequotas"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "rolebindings"),
        )
        for verb in ("get", "list", "create", "update", "delete")
    },
    ("rbac.authorization.k8s.io", "roles", "escalate"): "slices.py: Roles granting what the hub does not hold",
    ("rbac.authorization.k8s.io", "roles", "bind"): "slices.py: RoleBindings to those Roles",
    ("", "serviceaccounts/token", "create"): "kubeconfig.py: TokenRequest",
    ("", "pods", "create"): "spawners/kube.py: KubeSpawner creates the server's pod",
    ("", "pods", "watch"): "spawners/kube.py: KubeSpawner's pod reflector",
    ("", "events", "list"): "spawners/kube.py: KubeSpawner's event reflector (spawn progress)",
    ("", "events", "watch"): "spawners/kube.py: KubeSpawner's event reflector (spawn progress)",
    ("", "events", "create"): "Kubernetes Events (issue 4, item 8)",
    ("events.k8s.io", "events", "create"): "Kubernetes Events (issue 4, item 8)",
    **{("egs.io", "gpuprovisionrequests", v): "GPR resources (issue 4, item 7)" for v in ("get", "list", "watch")},
    **{("egs.io", "gpuprovisionrequests", v): "GPR finalizer (issue 4, item 7)" for v in ("update", "patch")},
    **{
        ("egs.io", "gpuprovisionrequests/status", v): "GPR status (issue 4, item 7)" for v in ("get", "update", "patch")
    },
}


def test_the_hub_may_do_exactly_what_the_backend_does(rendered):
    granted = {
        (group, resource, verb)
        for rule in of_kind(rendered, "ClusterRole")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert not set(USES) - granted, f"not granted: {sorted(set(USES) - granted)}"
    assert not granted - set(USES), f"granted but unused: {sorted(granted - set(USES))}"
    binding = of_kind(rendered, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == of_kind(rendered, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "egs-hub", "namespace": "hub"}]


# The GPR custom resource


@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD.read_text())


def version_of(crd: dict) -> dict:
    (version,) = crd["spec"]["versions"]
    return version


def test_crd_names(crd):
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "gpuprovisionrequests.egs.io"
    assert (spec["group"], spec["scope"], spec["names"]["shortNames"]) == ("egs.io", "Namespaced", ["gpr"])
    version = version_of(crd)
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert {
        "Status": ".status.phase",
        "GPUs": ".spec.gpus",
        "Priority": ".spec.priority",
        "Estimated Start": ".status.estimatedStart",
        "Window End": ".status.windowEnd",
    }.items() <= columns.items()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_crd_spec_fields_are_the_rest_apis(crd):
    """Every field of POST /gprs but slice (the namespace's) and name (metadata.name), in camelCase."""
    spec = version_of(crd)["schema"]["openAPIV3Schema"]["properties"]["spec"]
    api_fields = {camel(f.name) for f in dataclasses.fields(GPRCreate)} - {"slice", "name"}
    assert set(spec["properties"]) == api_fields
    phases = version_of(crd)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]["enum"]
    assert set(phases) == {s.value for s in Status} | {"invalid"}


def structural_problems(schema: dict, where: str = "", *, in_junction: bool = False) -> list[str]:
    """Where the schema is not structural (Kubernetes' rules): a type on every node outside junctions (unless
    int-or-string or preserve-unknown-fields); no type, default, additionalProperties or nullable inside
    anyOf/oneOf/allOf, except int-or-string's own anyOf of integer and string; no regex lookaround or
    backreferences (patterns are RE2)."""
    problems = []
    int_or_string = schema.get("x-kubernetes-int-or-string", False)
    untyped_allowed = int_or_string or schema.get("x-kubernetes-preserve-unknown-fields")
    if not in_junction and "type" not in schema and not untyped_allowed:
        problems.append(f"{where or '/'}: no type")
    if int_or_string and [b.get("type") for b in schema.get("anyOf", [])] not in ([], ["integer", "string"]):
        problems.append(f"{where}: int-or-string whose anyOf is not [integer, string]")
    for junction in ("anyOf", "oneOf", "allOf"):
        for i, branch in enumerate(schema.get(junction) or []):
            forbidden = {"type", "default", "additionalProperties", "nullable"} & set(branch)
            if int_or_string and junction == "anyOf" and not in_junction:
                forbidden -= {"type"}
            if forbidden:
                problems.append(f"{where}/{junction}[{i}]: {', '.join(sorted(forbidden))} inside {junction}")
            problems += structural_problems(branch, f"{where}/{junction}[{i}]", in_junction=True)
    for name, prop in (schema.get("properties") or {}).items():
        problems += structural_problems(prop, f"{where}/{name}", in_junction=in_junction)
    if isinstance(schema.get("items"), dict):
        problems += structural_problems(schema["items"], f"{where}[]", in_junction=in_junction)
    if re.search(r"\(\?[=!<]|\\[1-9]", schema.get("pattern", "")):
        problems.append(f"{where}: pattern uses lookaround or backreferences, which RE2 does not have")
    return problems


STRUCTURAL_CASES = {
    # schema: want problems
    "typed": ({"type": "object", "properties": {"a": {"type": "string"}}}, []),
    "untyped property": ({"type": "object", "properties": {"a": {}}}, ["/a: no type"]),
    "type inside oneOf": (
        {"type": "object", "oneOf": [{"type": "object", "required": ["a"]}]},
        ["/oneOf[0]: type inside oneOf"],
    ),
    "int-or-string": (
        {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        [],
    ),
    "lookahead": (
        {"type": "string", "pattern": "^(?=a)"},
        [": pattern uses lookaround or backreferences, which RE2 does not have"],
    ),
}


@pytest.mark.parametrize("schema, want", STRUCTURAL_CASES.values(), ids=STRUCTURAL_CASES.keys())
def test_structural_check(schema, want):
    assert structural_problems(schema) == want


def test_crd_schema_is_structural(crd):
    assert structural_problems(version_of(crd)["schema"]["openAPIV3Schema"]) == []


GPR_CASES = {
    # spec: want valid
    "GPUs for two hours": ({"duration": "2h", "gpus": 8}, True),
    "every field": (
        {
            "duration": 3600,
            "nodes": 2,
            "priority": 250,
            "shape": "H100-80GB x8",
            "cluster": "prod",
            "startAfter": "2025-03-01T12:00:00Z",
            "idleTimeout": "30m",
            "preemptible": False,
        },
        True,
    ),
    "both gpus and nodes": ({"duration": "1h", "gpus": 1, "nodes": 1}, False),
    "neither gpus nor nodes": ({"duration": "1h"}, False),
    "no duration": ({"gpus": 1}, False),
    "priority out of band": ({"duration": "1h", "gpus": 1, "priority": 301}, False),
    "duration in words": ({"duration": "two hours", "gpus": 1}, False),
    "zero GPUs": ({"duration": "1h", "gpus": 0}, False),
    "duration as a float": ({"duration": 1.5, "gpus": 1}, False),
}


@pytest.mark.parametrize("spec, want", GPR_CASES.values(), ids=GPR_CASES.keys())
def test_gpr_resources_against_the_crd_schema(crd, spec, want):
    schema = version_of(crd)["schema"]["openAPIV3Schema"]
    resource = {"apiVersion": "egs.io/v1", "kind": "GpuProvisionRequest", "metadata": {"name": "r"}, "spec": spec}
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(resource))
    assert (not errors) is want, [e.message for e in errors]
