"""The one base of every API handler.

Vocabulary: the *caller* is the hub user (or service) identified by a hub API
token or by the OAuth cookie; an *admin* holds the custom scope
``custom:egs:admin``, or is this service itself; a *project admin* belongs to
the hub group a project names, and manages that project's slices; a *member* of
a slice belongs to the hub group the slice names (admins and the admins of its
project see and act in it as members do). Domain errors map to HTTP statuses in
one table; every error body is ``{"status", "message"}`` plus ``field`` when a
field is at fault.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from sqlalchemy.exc import SQLAlchemyError
from tornado import web

from ...core.decoding import decode_argument, decode_json
from ...core.errors import (
    Conflict,
    Forbidden,
    IllegalTransition,
    InvalidRequest,
    NotFound,
    PolicyViolation,
    Unavailable,
)
from ...core.requests import MISSING, check_slice_name
from ...core.resources import Error, Resource
from ...roles import ADMIN_SCOPE
from ...store import queries
from .. import idempotency
from ..hub import HubAPIError
from ..idempotency import Create
from ..operations import LOGGED_IN, PUBLIC, Operation, declared
from ..parameters import whole_id
from ..visibility import EVERYTHING, Viewer

if TYPE_CHECKING:
    from ...store.models import Slice

log = logging.getLogger(__name__)

KNOWN_SCOPES = frozenset({ADMIN_SCOPE})

ERROR_STATUS: dict[type[Exception], int] = {
    InvalidRequest: 400,
    PolicyViolation: 422,
    IllegalTransition: 409,
    Conflict: 409,
    Forbidden: 403,
    NotFound: 404,
    Unavailable: 503,
    HubAPIError: 502,
}


def authenticated(method: Callable) -> Callable:
    """Answer 401 with what to do when no hub user or service is identified, or the token lacks the
    scope to reach the service (one that reaches only endpoints, say)."""

    @functools.wraps(method)
    def wrapper(self: APIHandler, *args, **kwargs):
        if self.current_user is None:
            raise self.not_logged_in()
        return method(self, *args, **kwargs)

    return wrapper


def needs_scope(scope: str) -> Callable[[Callable], Callable]:
    """Require a hub scope of the caller; scope names are checked at import time."""
    if scope not in KNOWN_SCOPES:
        raise ValueError(f"unknown scope {scope!r}; known: {sorted(KNOWN_SCOPES)}")

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        @authenticated
        def wrapper(self: APIHandler, *args, **kwargs):
            if not self.has_scope(scope):
                raise web.HTTPError(403, f"this needs the JupyterHub scope {scope}; ask a hub admin for it")
            return method(self, *args, **kwargs)

        return wrapper

    return decorate


def operation(
    key: str, summary: str, *, ok: str, idempotent: Create | None = None, **fields: Any
) -> Callable[[Callable], Callable]:
    """Declare the operation ``key`` ("POST /gprs") that the decorated method serves (operations.Operation
    names the rest) and apply what it declares: who may call it (``auth``: the caller is identified first,
    then holds the scope), and for a create that takes an Idempotency-Key, ``idempotent``'s claim on it.
    A method that serves two paths is declared once for each."""
    verb, path = key.split(" ")
    op = Operation(verb.lower(), path, summary, ok, idempotent=idempotent is not None, **fields)

    def decorate(served: Callable) -> Callable:
        before = declared(served)
        if before:
            if (before[0].auth, before[0].idempotent) != (op.auth, op.idempotent):
                raise ValueError(f"{op.key} and {before[0].key} are one method: declare one auth and one create")
            wrapper = served
        else:
            wrapper = served if idempotent is None else idempotency.idempotent(idempotent)(served)
            wrapper = authenticated(wrapper) if op.auth == LOGGED_IN else wrapper
            wrapper = needs_scope(op.auth)(wrapper) if op.auth not in (LOGGED_IN, PUBLIC) else wrapper
        wrapper.__operations__ = (op, *before)  # type: ignore[attr-defined]
        return wrapper

    return decorate


@web.stream_request_body
class APIHandler(HubOAuthenticated, web.RequestHandler):
    """The body streams in (``data_received``) once ``prepare`` identified the caller: the body of a request
    with no caller is dropped as it comes, never kept, and the request answered 401 (issue 45); the
    application bounds its size (body_limits.py). Handlers read it as ``self.request.body`` as usual."""

    refused_token = False  # the hub identified a caller whose token lacks the service's access scope
    _managed: frozenset[str] | None = None  # the projects the caller manages, once per request
    _slice_projects: Mapping[str, str] = {}  # every slice's project, read with _managed
    _viewer: Viewer | None = None  # what the caller sees of others (visibility.py), once per request

    @property
    def egs(self):
        """The service (app.EGSService): its commands, planning, sessions and clock."""
        return self.settings["egs"]

    @property
    def hub_auth(self):
        return self.settings["hub_auth"]

    async def prepare(self) -> None:
        """Identify the caller without blocking the loop (the hub answers over HTTP)."""
        model = await self.hub_auth.get_user(self, sync=False)
        if model is not None:
            try:
                model = self.check_hub_user(model)
            except UserNotAllowed:
                if not self.allowed_without_access(model):
                    model, self.refused_token = None, True
        self.current_user = model

    def data_received(self, chunk: bytes) -> None:
        # Kept for a caller only; at most the application's limit in all (body_limits.py): a few dozen
        # chunks of 64 KiB. A stranger's is dropped: answering before it is read would cut the connection
        # while they still send, and the hub's proxy would answer them 503 instead of the 401.
        if self.current_user is not None:
            self.request.body += chunk

    def flush(self, include_footers: bool = False):
        if not self._headers_written and not self.request._body_future.done():
            # An answer sent before the request was read all (an unknown path, a path with NUL, an error in
            # prepare): tornado closes the connection after it. Said in the answer, the hub's proxy does not
            # send the next request on that connection, which it would answer 503 (issue 45).
            self.set_header("Connection", "close")
        return super().flush(include_footers)

    def not_logged_in(self) -> web.HTTPError:
        if self.refused_token:
            return web.HTTPError(
                401,
                f"this token does not reach {self.request.path}: it lacks the JupyterHub scope "
                f"{' or '.join(sorted(self.hub_auth.access_scopes))}; use a token made without naming scopes",
            )
        return web.HTTPError(
            401,
            "not logged in: send a JupyterHub API token as 'Authorization: token <token>', or log in at the hub first",
        )

    def allowed_without_access(self, model: dict) -> bool:
        """Whether a caller whose token lacks the service's access scope (``access:services!service=egs``)
        may still make this request; ``model`` is the hub's model of the caller, with the token's
        ``scopes`` and the owner's ``groups``. No, but at an endpoint's proxy path (endpoint_proxy.py)."""
        return False

    def now(self) -> datetime:
        return self.egs.clock()

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
        self.set_header("Cache-Control", "no-store")

    def check_xsrf_cookie(self) -> None:
        return self.hub_auth.check_xsrf_cookie(self)

    # identity

    @property
    def user_name(self) -> str:
        return self.current_user["name"]

    def has_scope(self, scope: str) -> bool:
        user = self.current_user
        if user is None:
            return False
        if user.get("kind") == "service" and user.get("name") == self.egs.service_name:
            return True
        return scope in set(user.get("scopes", ()))

    @property
    def is_admin(self) -> bool:
        return self.has_scope(ADMIN_SCOPE)

    @property
    def user_groups(self) -> frozenset[str]:
        return frozenset(self.current_user.get("groups") or ())

    def planning_state(self):
        """The planning state (service/state.py) with every committed change read."""
        with self.egs.sessions() as session:
            return self.egs.planning.state.current(session, self.now())

    @property
    def managed_projects(self) -> frozenset[str]:
        """The projects whose admin group the caller is in."""
        if self._managed is None:
            groups = self.user_groups
            state = self.planning_state()
            projects = state.project_policies.values()
            self._managed = frozenset(p.name for p in projects if p.admin_group is not None and p.admin_group in groups)
            self._slice_projects = state.projects
        return self._managed

    def manages(self, project: str | None) -> bool:
        """Whether the caller may manage ``project``: an admin, or one of its project admins."""
        return self.is_admin or (project is not None and project in self.managed_projects)

    def require_manager(self, project: str) -> None:
        if not self.manages(project):
            raise web.HTTPError(
                403,
                f"this needs the JupyterHub scope {ADMIN_SCOPE} or being an admin of project {project!r}, which "
                f"{self.user_name} is not; an egs-hub admin makes project admins (PUT /projects/{project}/admins/USER)",
            )

    def is_member(self, slice_row: Slice) -> bool:
        return self.is_member_of(slice_row.group_name, slice_row.name)

    def is_member_of(self, group: str, slice_name: str | None = None) -> bool:
        """Whether the caller may see and act in a slice of hub group ``group``: a member, an admin, or
        (given the slice's name) an admin of its project."""
        if self.is_admin or group in self.user_groups:
            return True
        if slice_name is None:
            return False
        managed = self.managed_projects  # reads the slices' projects too
        return bool(managed) and self._slice_projects.get(slice_name) in managed

    @property
    def viewer(self) -> Viewer:
        """What the caller sees in full, and so what it sees of other tenants (visibility.py)."""
        if self._viewer is None:
            groups = None if self.is_admin else self.planning_state().groups
            self._viewer = EVERYTHING if groups is None else Viewer(frozenset(self.slices_of_caller(groups)))
        return self._viewer

    def may_act_in(self, slice_name: str, group: str) -> bool:
        """Whether the caller sees and acts in the slice ``slice_name`` of hub group ``group`` (commands'
        ``authorize``: a command answers a "no" as it answers a missing slice or GPR)."""
        return self.is_member_of(group, slice_name)

    def slices_of_caller(self, groups: Mapping[str, str]) -> set[str]:
        """Of the slices with these hub groups (planning state's ``groups``), those the caller is a member of."""
        return {name for name, group in groups.items() if self.is_member_of(group, name)}

    def listed_slices(self, session, slice_filter: str | None) -> list[str] | None:
        """The slices a list answers for: ``slice_filter`` (404 as member_slice), else every slice
        for admins (None), else the caller's."""
        if slice_filter is not None:
            return [self.member_slice(session, check_slice_name(slice_filter)).name]
        if self.is_admin:
            return None
        return sorted(self.slices_of_caller(self.egs.planning.state.current(session, self.now()).groups))

    def member_slice(self, session, name: str) -> Slice:
        """The slice named ``name``: 404 when there is none, and the same 404 when the caller may not see it."""
        row = queries.get_slice(session, name)
        if row is None:
            raise self.not_found(f"slice named {name!r}")
        self.require_member(row)
        return row

    def require_member(self, slice_row: Slice, what: str | None = None) -> None:
        self.require_member_of(slice_row.name, slice_row.group_name, what)

    def require_member_of(self, slice_name: str, group: str, what: str | None = None) -> None:
        """404, exactly as for a missing one, when the caller may not see the slice: ``what`` names what
        they asked for (the slice itself by default; a GPR, an endpoint of it)."""
        if not self.is_member_of(group, slice_name):
            raise self.not_found(what or f"slice named {slice_name!r}")

    def require_manager_of(self, slice_row: Slice) -> None:
        """404 when the caller may not see the slice; 403 when they see it but do not manage its project."""
        self.require_member(slice_row)
        self.require_manager(slice_row.project.name)

    # bodies and answers

    def json_body(self) -> object:
        """The body's JSON value, MISSING when there is none (parse_body says whether one is needed): 400
        when it is not UTF-8 JSON, too deep, or not valid Unicode."""
        if not self.request.body:
            return MISSING
        return decode_json(self.request.body)

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        """Path (``name`` None) and query arguments as text: 400 naming them when not UTF-8 or holding NUL."""
        return decode_argument(value, name or "path")

    def write_json(self, value: Resource, status: int = 200) -> None:
        """Answer ``value`` (a model of core/resources.py, so the answer is what the document says)."""
        self.set_status(status)
        self.finish(value.model_dump_json(by_alias=True))

    def int_argument(self, name: str, value: str) -> int:
        return whole_id(value, name)

    def not_found(self, what: str) -> web.HTTPError:
        return web.HTTPError(404, f"no {what}")

    def registered_cluster(self, name: str) -> str:
        """``name``, a cluster the service knows; 404 otherwise."""
        if name not in self.egs.registry.states:
            raise self.not_found(f"cluster named {name!r}")
        return name

    def log_exception(self, typ, value, tb) -> None:
        if isinstance(value, tuple(ERROR_STATUS)):
            log.info("%s %s: %s", self.request.method, self.request.path, value)
        else:
            super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        status, message, field = status_code, self._reason, None
        for cls, error_status in ERROR_STATUS.items():
            if isinstance(error, cls):
                status, message, field = error_status, str(error), getattr(error, "field", None) or None
                break
        else:
            if isinstance(error, web.HTTPError) and error.log_message:
                message = error.log_message % error.args if error.args else error.log_message
            elif isinstance(error, SQLAlchemyError):
                message = "the database failed; nothing was changed. Try again."
            elif status_code >= 500:
                message = "internal error; the service log has the details"
        self.set_status(status)
        if status == 405:
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(Error(status=status, message=message, field=field).model_dump_json(exclude_none=True))

    def allowed_methods(self) -> list[str]:
        """The methods this path answers: those its handler implements (tornado answers 405 to the rest)."""
        base = web.RequestHandler
        return [
            m for m in self.SUPPORTED_METHODS if getattr(type(self), m.lower(), None) is not getattr(base, m.lower())
        ]


class NotFoundHandler(APIHandler):
    def prepare(self) -> None:
        raise web.HTTPError(404, f"no API path {self.request.path}; see openapi.json")
