"""One declaration per operation (issue 47): a handler method's @operation makes its route, its paths in
the document, its links and who may call it; two declarations of one operation or path are refused."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import types

import pytest

from egs_hub.core.requests import Reason
from egs_hub.core.resources import GPR, Health
from egs_hub.service.app import API_OPERATIONS, API_ROUTES
from egs_hub.service.handlers.base import APIHandler, operation
from egs_hub.service.openapi import openapi_document
from egs_hub.service.operations import ADMIN, PUBLIC, Named, body_at, operations_of, route_pattern, routes


def module(name: str, *classes: type) -> types.ModuleType:
    found = types.ModuleType(name)
    for cls in classes:
        cls.__module__ = name
        setattr(found, cls.__name__, cls)
    return found


class Things(APIHandler):
    @operation(
        "POST /things",
        "Make a thing",
        ok="made",
        answer=GPR,
        status=201,
        body=Reason,
        auth=ADMIN,
        names=(Named("/things/{id}", body_at("", id="id")),),
    )
    def post(self) -> None: ...


class Thing(APIHandler):
    @operation("GET /things/{id}", "One thing", ok="the thing", answer=GPR, errors=(404,))
    def get(self, thing_id: str) -> None: ...

    @operation("DELETE /things/{id}", "Delete a thing", ok="deleted", status=204, errors=(404, 409), auth=ADMIN)
    def delete(self, thing_id: str) -> None: ...


def test_an_added_operation_is_routed_documented_and_linked_from_its_declaration_alone():
    declared = operations_of([module("things", Things, Thing)])
    assert routes(declared) == [("things", Things), ("things/([^/]+)", Thing)]
    paths = openapi_document([op for op, _ in declared], "/api/", "1")["paths"]
    post = paths["/things"]["post"]
    assert post["summary"] == "Make a thing"
    assert post["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Reason"}
    assert set(post["responses"]) == {"201", "400", "413"}
    assert set(post["responses"]["201"]["links"]) == {"get_things_id", "delete_things_id"}
    assert paths["/things/{id}"]["parameters"][0]["schema"]["minimum"] == 1  # an id, by its name
    assert set(paths["/things/{id}"]["delete"]["responses"]) == {"204", "400", "404", "409", "413"}


def test_the_declared_auth_is_applied():
    public = operation("GET /open", "Open", ok="yes", answer=Health, auth=PUBLIC)(lambda self: "ran")
    assert public(types.SimpleNamespace()) == "ran"
    guarded = operation("GET /closed", "Closed", ok="yes", answer=Health)(lambda self: "ran")
    nobody = types.SimpleNamespace(current_user=None, not_logged_in=lambda: RuntimeError("401"))
    with pytest.raises(RuntimeError, match="401"):
        guarded(nobody)


def test_one_path_served_by_two_classes_or_one_operation_declared_twice_is_refused():
    class Other(APIHandler):
        @operation("PUT /things/{id}", "Change", ok="changed", answer=GPR)
        def put(self, thing_id: str) -> None: ...

    with pytest.raises(ValueError, match=re.escape("/things/{id} is served by Thing and Other")):
        operations_of([module("two", Thing, Other)])

    class Again(APIHandler):
        @operation("GET /things/{id}", "Again", ok="it", answer=GPR)
        def get(self, thing_id: str) -> None: ...

    with pytest.raises(ValueError, match=re.escape("GET /things/{id} is declared twice")):
        operations_of([module("again", Thing), module("again2", Again)])
    with pytest.raises(ValueError, match="params \\['user'\\] are not in its path"):
        operation("GET /things", "Bad", ok="no", params={"user": str})


def test_each_route_is_the_one_its_paths_match_first():
    """Tornado takes the first route that matches: each documented path reaches the class declaring it."""
    for op, cls in API_OPERATIONS:
        probe = re.sub(r"\{[^}]+\}", "x1", op.path.lstrip("/"))
        assert next(handler for route, handler in API_ROUTES if re.fullmatch(route, probe)) is cls, op.key
    assert route_pattern("/openapi.json") == r"openapi\.json"


def _parsed_with(cls: type, method: object, seen: set | None = None) -> set[str]:
    """The models ``method`` (and the methods of ``cls`` it calls on self) parse input with: the first
    argument of each parse_body(...) and read(...)."""
    seen = set() if seen is None else seen
    while hasattr(method, "__wrapped__"):
        method = method.__wrapped__
    if method in seen or not callable(method):
        return set()
    seen.add(method)
    names = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(method)))):
        if not isinstance(node, ast.Call):
            continue
        called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if called in ("parse_body", "read") and node.args and isinstance(node.args[0], ast.Name):
            names.add(node.args[0].id)
        if (
            isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
        ):
            names |= _parsed_with(cls, getattr(cls, node.func.attr, None), seen)
    return names


@pytest.mark.parametrize(("op", "cls"), API_OPERATIONS, ids=[op.key for op, _ in API_OPERATIONS])
def test_each_handler_parses_its_input_with_the_models_it_declares(op, cls):
    """The document says what the handler reads: its declared body and query models are the ones it parses."""
    parsed = _parsed_with(cls, getattr(cls, op.method))
    for declared in (op.body, op.query):
        if declared is not None:
            assert declared.__name__ in parsed, f"{op.key} declares {declared.__name__} but parses {sorted(parsed)}"
