"""The GPR custom resource definition in charts/egs-hub/crds/: valid Kubernetes, its schema structural and
against the REST API's fields. The rest of the chart (helm lint and template with Zero to JupyterHub, the
webhook, RBAC) is tested in tests/chart/.
"""

from __future__ import annotations

import pathlib
import re

import jsonschema
import kubernetes_validate
import pytest
import yaml

from egs_hub.core.model import Status
from egs_hub.core.requests import GPRCreate

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = ROOT / "charts" / "egs-hub" / "crds" / "gpuprovisionrequests.yaml"
KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())  # the chart's kubeVersion floor, the latest


@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD.read_text())


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_crd_is_valid_kubernetes(crd, version):
    kubernetes_validate.validate(crd, version, strict=True)


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
    api_fields = {camel(name) for name in GPRCreate.model_fields} - {"slice", "name"}
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
    "a template gives the rest": ({"template": "a100-day"}, True),
    "a template and a size": ({"template": "a100-day", "nodes": 2, "duration": "1h"}, True),
    "a template, but gpus and nodes": ({"template": "a100-day", "gpus": 1, "nodes": 1}, False),
    "a template named badly": ({"template": "A100 Day"}, False),
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
