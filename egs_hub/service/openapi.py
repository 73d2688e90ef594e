"""The OpenAPI 3.1 document of REST API v1, made from the operations' declarations (operations.py).

Schemas come from the models: request bodies from ``core.requests`` (the ones the
handlers parse with), answers from ``core.resources`` (the ones the handlers answer
with and the client decodes into), query parameters from ``service.parameters`` (the
ones the handlers read them with), path parameters from their types in the declarations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import TypeAdapter

from ..core.requests import body_required, body_schemas
from ..core.resources import resource_schemas
from .operations import PUBLIC, Named, Operation
from .parameters import documented

REF = "#/components/schemas/{model}"
SCHEMAS = {**resource_schemas(REF), **body_schemas(REF)}


def _ref(name: str) -> dict:
    return {"$ref": REF.format(model=name)}


_ERRORS = {
    "400": "malformed input; `field` names it",
    "401": "no hub token or login",
    "403": "not allowed: not a member, or not an admin",
    "404": "no such thing",
    "409": "conflicts with the current state, or (a create) its Idempotency-Key was sent with another request",
    "413": "the request body is over the service's limit (max_body_bytes); nothing was read or changed",
    "422": "well formed but not acceptable (policy, capacity)",
    "502": "the hub did not answer; nothing was changed",
    "503": "a cluster it needs does not answer; nothing was changed",
}


def _error(code: str) -> dict:
    return {"description": _ERRORS[code], "content": {"application/json": {"schema": _ref("Error")}}}


def _path(name: str, annotation: object = str) -> dict:
    """A path parameter whose value has the type ``annotation`` (a body field's, where one has it)."""
    return {"name": name, "in": "path", "required": True, "schema": TypeAdapter(annotation).json_schema()}


# The header of the creates a client may send again (service/idempotency.py): printable ASCII, without the
# spaces around it that HTTP drops.
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "A key of the caller's for this one create (e.g. a UUID, new for each), sent again on its retries: a "
        "retry with the same key and body makes nothing and answers what the first made, as it is now, with "
        "the first answer's status and 'Idempotent-Replayed: true'; with another body (or to another "
        "operation), or once what it made was deleted, a 409 naming the header. Keys are the caller's (another "
        "caller's same key is another key) and kept at least 24 hours. 400 when not 1 to 255 printable ASCII "
        "characters."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]([ -~]*[!-~])?$"},
}


def _operation(op: Operation) -> dict:
    doc: dict = {"summary": op.summary, "operationId": op.operation_id}
    if op.description:
        doc["description"] = op.description
    if op.auth == PUBLIC:
        doc["security"] = []
    parameters = [*(documented(op.query) if op.query else []), *([IDEMPOTENCY_KEY] if op.idempotent else [])]
    if parameters:
        doc["parameters"] = parameters
    if op.body is not None:
        doc["requestBody"] = {
            "required": body_required(op.body),
            "content": {"application/json": {"schema": _ref(op.body.__name__)}},
        }
    doc["responses"] = _responses(op)
    return doc


def _responses(op: Operation) -> dict:
    ok: dict = {"description": op.ok}
    if op.answer is not None:
        schema = {"type": "object"} if op.answer is dict else _ref(op.answer.__name__)
        ok["content"] = {"application/json": {"schema": schema}}
        if op.csv:
            ok["content"]["text/csv"] = {"schema": {"type": "string"}}
    responses = {str(op.status): ok}
    takes_input = op.path_names or op.query or op.body or op.idempotent
    for code in sorted({*op.errors, *((400,) if takes_input else ()), 413}):
        responses[str(code)] = _error(str(code))
    return responses


def paths(operations: Iterable[Operation]) -> dict:
    """The document's paths: each operation, under its path, whose parameters it gives; each success
    answer with the links its ``names`` make to the operations on what it names."""
    found: dict[str, dict] = {}
    ops = list(operations)
    for op in ops:
        item = found.setdefault(op.path, {})
        parameters = [_path(name, op.path_type(name)) for name in op.path_names]
        if parameters and item.setdefault("parameters", parameters) != parameters:
            raise ValueError(f"{op.key} types its path parameters unlike the other operations on {op.path}")
        item[op.method] = _operation(op)
    for op in ops:
        for named in op.names:
            _link(found, op, named)
    return found


def _link(found: dict, source: Operation, named: Named) -> None:
    responses = found[source.path][source.method]["responses"]
    links = responses[str(source.status)].setdefault("links", {})
    for target, item in found.items():
        if target != named.path and not target.startswith(named.path + "/"):
            continue
        wanted = re.findall(r"\{([^}]+)\}", target)
        if not set(wanted) <= set(named.params):
            continue
        for method, operation in item.items():
            if method == "parameters" or (target, method) == (source.path, source.method):
                continue
            links[operation["operationId"]] = {
                "operationId": operation["operationId"],
                "parameters": {param: named.params[param] for param in wanted},
            }


def openapi_document(operations: Iterable[Operation], api_prefix: str, version: str, hub_prefix: str = "/hub/") -> dict:
    """The document of ``operations`` served at ``api_prefix``, for the hub at ``hub_prefix`` (its OAuth)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "egs-hub",
            "version": version,
            "description": "Elastic GPU Service for JupyterHub. Times are ISO-8601 UTC; durations are "
            'seconds, or units like "1d2h30m" in requests.',
        },
        "servers": [{"url": api_prefix.rstrip("/")}],
        "security": [{"hubToken": []}, {"hubOAuth": []}],
        "components": {
            "securitySchemes": {
                "hubToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "'token <JupyterHub API token>' (or 'Bearer <token>')",
                },
                "hubOAuth": {
                    "type": "oauth2",
                    "description": "The hub's OAuth 2 (the portal's login): the access token it gives is a hub "
                    "token of the user for this service; admins hold the hub scope custom:egs:admin.",
                    "flows": {
                        "authorizationCode": {
                            "authorizationUrl": f"{hub_prefix}api/oauth2/authorize",
                            "tokenUrl": f"{hub_prefix}api/oauth2/token",
                            "scopes": {},
                        }
                    },
                },
            },
            "schemas": SCHEMAS,
        },
        "paths": paths(operations),
    }
