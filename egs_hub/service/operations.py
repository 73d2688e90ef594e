"""The operations of REST API v1, each declared once, on the handler method that serves it.

Vocabulary: an *operation* is one method on one path (``POST /gprs``) with what it takes (path
parameters, a query model, a body model, an Idempotency-Key) and answers (its success status, the
model of that answer, the error statuses it may give) and who may call it (``auth``). Handlers
declare theirs with ``handlers.base.operation``; from those declarations come the route table that
app.py mounts (``routes``), the OpenAPI document (``openapi.py``) and the client's methods
(``client/operations.py``, generated from them). A path parameter's type is the one its name has in
``PATH_TYPES`` unless the operation's ``params`` says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..core.requests import GPRId, SliceName, UserName
from ..roles import ADMIN_SCOPE

METHODS = ("get", "post", "put", "patch", "delete")
# Who may call an operation: anyone (PUBLIC), any identified caller (LOGGED_IN), or the holders of a hub scope.
PUBLIC = "public"
LOGGED_IN = "logged-in"
ADMIN = ADMIN_SCOPE
PATH_TYPES: Mapping[str, object] = {
    "id": GPRId,  # every id is a whole number from 1, as a GPR's
    "name": SliceName,  # clusters, projects, templates, endpoints and pools are named as slices are
    "slice": SliceName,
    "cluster": SliceName,
    "pool": SliceName,
    "user": UserName,
}
_PARAMETER = re.compile(r"\{([^}]+)\}")


@dataclass(frozen=True)
class Named:
    """What an operation's success answer names, for OpenAPI links: the operations on ``path`` (and below
    it) whose path parameters ``params`` gives, each as a runtime expression (``$response.body#/id``)."""

    path: str
    params: Mapping[str, str]


def body_at(pointer: str, **fields: str) -> dict[str, str]:
    """Path parameters from an answer: each parameter from ``field`` of the JSON at ``pointer``."""
    return {param: f"$response.body#{pointer}/{name}" for param, name in fields.items()}


def request_path(*params: str) -> dict[str, str]:
    """Path parameters as the request gave them."""
    return {param: f"$request.path.{param}" for param in params}


@dataclass(frozen=True)
class Operation:
    """``answer``: the model of the success answer, ``dict`` for any JSON object, None for no body;
    ``csv``: the answer may also be text/csv (``format=csv``); ``errors``: the error statuses it may give
    besides the 400 of unreadable input and the 413 of a body over the limit, which every operation that
    takes input gives; ``idempotent``: it takes an Idempotency-Key; ``names``: see Named."""

    method: str
    path: str
    summary: str
    ok: str
    answer: Any = None
    status: int = 200
    errors: tuple[int, ...] = ()
    body: type | None = None
    query: type | None = None
    auth: str = LOGGED_IN
    idempotent: bool = False
    description: str | None = None
    csv: bool = False
    params: Mapping[str, object] = field(default_factory=dict)
    names: tuple[Named, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"{self.method!r} is not one of {METHODS}")
        if not self.path.startswith("/"):
            raise ValueError(f"path {self.path!r} must start with /")
        unknown = set(self.params) - set(self.path_names)
        if unknown:
            raise ValueError(f"{self.key}: params {sorted(unknown)} are not in its path")

    @property
    def key(self) -> str:
        return f"{self.method.upper()} {self.path}"

    @property
    def path_names(self) -> list[str]:
        return _PARAMETER.findall(self.path)

    def path_type(self, name: str) -> object:
        return self.params.get(name, PATH_TYPES.get(name, str))

    @property
    def operation_id(self) -> str:
        """``get /gprs/{id}/checks`` is ``get_gprs_id_checks``."""
        return "_".join([self.method, *re.findall(r"[A-Za-z0-9]+", self.path)]).lower()


def declared(method: object) -> tuple[Operation, ...]:
    """The operations a handler method declares (one per path it serves)."""
    return getattr(method, "__operations__", ())


def operations_of(modules: Iterable[ModuleType]) -> list[tuple[Operation, type]]:
    """Every operation the handler classes of ``modules`` declare, with its class, in path order; ValueError
    when two classes declare one path, or two declarations one operation."""
    found: dict[str, tuple[Operation, type]] = {}
    classes: dict[str, type] = {}
    for module in modules:
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != module.__name__:
                continue
            for name in METHODS:
                for op in declared(getattr(cls, name, None)):
                    if op.method != name:
                        raise ValueError(f"{cls.__name__}.{name} declares {op.key}")
                    if op.key in found:
                        raise ValueError(f"{op.key} is declared twice: {found[op.key][1].__name__}, {cls.__name__}")
                    if classes.setdefault(op.path, cls) is not cls:
                        raise ValueError(f"{op.path} is served by {classes[op.path].__name__} and {cls.__name__}")
                    found[op.key] = (op, cls)
    return sorted(found.values(), key=lambda pair: (_route_order(pair[0].path), METHODS.index(pair[0].method)))


def _route_order(path: str) -> tuple:
    """Literal segments before parameters, so that the first route that matches is the one meant."""
    return tuple((part.startswith("{"), part) for part in path.strip("/").split("/"))


def route_pattern(path: str) -> str:
    """The route's regular expression under the API's prefix: ``/gprs/{id}`` is ``gprs/([^/]+)``."""
    return "".join(
        "([^/]+)" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{[^}]+\})", path.lstrip("/"))
    )


def routes(operations: Iterable[tuple[Operation, type]]) -> list[tuple[str, type]]:
    """The route table: one route per path, to the class whose methods serve it."""
    table: dict[str, type] = {}
    for op, cls in operations:
        table.setdefault(route_pattern(op.path), cls)
    return list(table.items())
