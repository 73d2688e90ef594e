"""The test client's contract check: it fails on what the document does not describe."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate
from tornado import web

from egs_hub.service.app import API_ROUTES, api_document

from .contract import Contract, ContractError
from .fuzzing import schema_valid_bodies

CONTRACT = Contract(api_document("/services/egs/api/v1/", "test"))
GPR = {
    "id": 7,
    "name": "",
    "slice": "team",
    "requested_by": "ann",
    "cluster": None,
    "shape": None,
    "gpus": 1,
    "nodes": None,
    "priority": 101,
    "duration": 3600,
    "start_after": None,
    "idle_timeout": None,
    "preemptible": True,
    "status": "queued",
}


def test_the_document_is_valid_openapi_3_1():
    """The validator also resolves every $ref: each names a schema the models made."""
    validate(CONTRACT.document)


def test_the_document_and_the_route_table_agree():
    """Each documented path is served by the handler the route table gives it (the first route that
    matches, as Tornado picks), with exactly the documented methods; each route is documented."""
    served = set()
    for template, item in CONTRACT.document["paths"].items():
        path = re.sub(r"\{[^}]+\}", "x1", template.lstrip("/"))
        route, handler = next((r, h) for r, h in API_ROUTES if re.fullmatch(r, path))
        served.add(route)
        documented = {m.upper() for m in item if m != "parameters"}
        assert documented == _methods(handler), template
    assert served == {route for route, _ in API_ROUTES}


def _methods(handler: type[web.RequestHandler]) -> set[str]:
    return {
        m
        for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
        if getattr(handler, m.lower()) is not getattr(web.RequestHandler, m.lower())
    }


def test_a_documented_answer_passes():
    error = {"status": 404, "message": "no GPR 7"}
    CONTRACT.check("GET", "gprs/7", 404, error)
    CONTRACT.check("GET", "gprs?limit=1", 401, {"status": 401, "message": "no token"})


def test_a_body_that_does_not_match_its_schema_fails_naming_where():
    with pytest.raises(ContractError, match=r"GET /gprs/\{id\} 200: .*"):
        CONTRACT.check("GET", "gprs/7", 200, {**GPR, "gpus": "one"})
    with pytest.raises(ContractError, match="GET /queue 200"):
        CONTRACT.check("GET", "queue", 200, {"queue": "none"})


def test_a_status_the_operation_does_not_list_fails():
    with pytest.raises(ContractError, match="answered 418, which the OpenAPI document does not list"):
        CONTRACT.check("GET", "gprs/7", 418, {"status": 418, "message": "teapot"})


def test_a_body_where_the_document_lists_none_fails():
    with pytest.raises(ContractError, match="lists no body"):
        CONTRACT.check("DELETE", "slices/team", 204, {"deleted": True})


def test_a_path_or_method_outside_the_document_may_only_be_404_or_405():
    CONTRACT.check("GET", "no-such-thing", 404, {"status": 404, "message": "not found"})
    CONTRACT.check("PUT", "gprs", 405, {"status": 405, "message": "method not allowed"})
    with pytest.raises(ContractError, match="no path of the OpenAPI document matches"):
        CONTRACT.check("GET", "no-such-thing", 200, {})
    with pytest.raises(ContractError, match="PUT /gprs is not in the OpenAPI document"):
        CONTRACT.check("PUT", "gprs", 200, {})


def _schema_at(schema: dict, pointer: str) -> dict | None:
    """The schema of the value at JSON pointer ``pointer`` in a value of ``schema`` (None: it has none)."""
    schemas = CONTRACT.document["components"]["schemas"]
    for part in pointer.strip("/").split("/") if pointer.strip("/") else []:
        while "$ref" in schema:
            schema = schemas[schema["$ref"].split("/")[-1]]
        options = [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]
        if part.isdigit():
            found = [o["items"] for o in options if "items" in o]
        else:
            found = [o["properties"][part] for o in options if part in o.get("properties", {})]
        if not found:
            return None
        schema = found[0]
    return schema


def test_links_walk_from_what_answers_name_to_every_operation_on_it():
    """Issue 53: each operation whose path names something (but the PUTs that make it by its path) is
    linked from an answer that names it, and every link gives exactly the target's path parameters
    from a field the answer's schema has, or from the request's path."""
    paths = CONTRACT.document["paths"]
    operations = {
        op["operationId"]: (path, op) for path, item in paths.items() for m, op in item.items() if m != "parameters"
    }
    linked = set()
    for source_path, item in paths.items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                for name, link in response.get("links", {}).items():
                    target_path, _ = operations[link["operationId"]]
                    assert set(link["parameters"]) == set(re.findall(r"\{([^}]+)\}", target_path)), name
                    for expression in link["parameters"].values():
                        if expression.startswith("$request.path."):
                            assert "{" + expression.removeprefix("$request.path.") + "}" in source_path
                        else:
                            pointer = expression.removeprefix("$response.body#")
                            assert _schema_at(schema, pointer) is not None, (method, source_path, status, expression)
                    linked.add(link["operationId"])
    made_by_path = {"put_projects_name_admins_user", "put_slices_name_members_user", "put_servers_user_server"}
    unlinked = {op_id for op_id, (path, _) in operations.items() if "{" in path} - linked - made_by_path
    assert not unlinked


# Bodies whose every rule the document says (issue 53, item 3): the others have rules JSON Schema
# cannot say (an end after its start, min_replicas at most max_replicas, names unique in a list, a
# duration written in units at most ten years); benchmarks/fuzz_bodies.py measures them all.
SAID_IN_FULL = {
    "ProjectCreate",
    "ProjectUpdate",
    "SliceUpdate",
    "ClusterUpdate",
    "WorkspaceApproval",
    "Reason",
    "LayoutChangeCreate",
    "PriceTable",
    "EndpointScale",
    "EvictionConfirm",
    "ServerStart",
}


def test_what_the_document_allows_in_a_body_the_api_takes():
    results = schema_valid_bodies(examples=40, at=11)
    assert {r["model"] for r in results.values()} >= SAID_IN_FULL
    refused = {label: r["refusals"] for label, r in results.items() if r["model"] in SAID_IN_FULL and r["refusals"]}
    assert not refused
    # Rules across fields the document says for the others (a size, a duration or a template; a
    # kubeconfig or in_cluster; what a runtime or a kind of check needs): never a refusal of a valid body.
    said = ("give gpus", "not both", "duration is required", "kubeconfig is required", "absolute path", " needs ")
    said += ("runs no", "has no threshold", "a share of one GPU", "not a Kubernetes label selector", "must name a node")
    broken = {
        label: refusal for label, r in results.items() for refusal in r["refusals"] if any(s in refusal for s in said)
    }
    assert not broken
