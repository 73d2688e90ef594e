"""Query parameters of the API as pydantic models: one definition per operation's parameters.

A model's fields are the query arguments the operation reads, each with the parser
that turns its text into a value (refusing bad text with a 400 naming it, as a body's
fields are refused) and the schema the OpenAPI document gives it. A handler reads its
arguments with ``read``; the document lists them with ``documented``. Arguments an
operation does not name are ignored, as in any query string.
"""

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema
from tornado import web

from ..backends.kubernetes.kubeconfig import DEFAULT_EXPIRATION, MAX_EXPIRATION, MIN_EXPIRATION
from ..core.errors import InvalidRequest
from ..core.model import Status
from ..core.requests import DURATION_PATTERN, ID_MAX, Body, SliceName, parse_body, parsed
from ..core.units import parse_duration, parse_time
from ..core.usage import GROUPS, PERIODS
from . import cursors

Q = TypeVar("Q", bound="Query")
STATUS_VALUES = tuple(s.value for s in Status)
SORT_KEYS = {
    "node": None,
    "temperature": "temperature_c",
    "power": "power_w",
    "utilization": "utilization",
    "memory": "memory_used_mib",
}


class Query(Body):
    """An operation's query arguments (all text on the wire)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


def read(cls: type[Q], handler: web.RequestHandler) -> Q:
    """``cls`` from the request's query arguments; InvalidRequest naming the first bad one."""
    arguments = handler.request.query_arguments
    return parse_body(cls, {name: handler.get_query_argument(name) for name in cls.model_fields if name in arguments})


def documented(cls: type[Query]) -> list[dict]:
    """The document's parameter objects for ``cls``'s fields."""
    schema = cls.model_json_schema()
    parameters = []
    for name, prop in schema["properties"].items():
        prop = {key: value for key, value in prop.items() if key not in ("title", "default")}
        description = prop.pop("description")
        required = name in schema.get("required", ())
        parameters.append(
            {"name": name, "in": "query", "required": required, "description": description, "schema": prop}
        )
    return parameters


def _argument(parse: Callable[[str, str], Any], schema: dict, description: str) -> Any:
    return Annotated[Any, BeforeValidator(parsed(parse)), WithJsonSchema(schema), Field(description=description)]


def whole_id(value: str, name: str) -> int:
    """An id in a path or query argument: a whole number from 1 to ID_MAX."""
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequest(name, f"{name} must be a whole number, not {value!r}") from None
    if not 0 < number <= ID_MAX:
        raise InvalidRequest(name, f"{name} must be from 1 to {ID_MAX}, not {number}")
    return number


def _one_of(values: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(value: str, name: str) -> str:
        if value not in values:
            raise InvalidRequest(name, f"{name} must be one of {', '.join(values)}, not {value!r}")
        return value

    return parse


def _expiration(value: str, name: str) -> int:
    try:
        seconds = int(value)
    except ValueError:
        seconds = None
    if seconds is None or not MIN_EXPIRATION <= seconds <= MAX_EXPIRATION:
        raise InvalidRequest(
            name,
            f"{name} must be a whole number of seconds from {MIN_EXPIRATION} (10 minutes) to "
            f"{MAX_EXPIRATION} (7 days), not {value!r}",
        )
    return seconds


def _limit(listing: cursors.Listing) -> Any:
    return _argument(
        lambda value, _: listing.limit(value),
        {"type": "integer", "minimum": 1, "maximum": listing.max_limit},
        f"at most this many per page (default {listing.default_limit})",
    )


def _cursor(listing: cursors.Listing, order: str) -> Any:
    return _argument(
        lambda value, _: listing.after(value),
        {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
        f"the next_cursor of the page before ({order}); leave out for the first page",
    )


def _time(description: str) -> Any:
    return _argument(parse_time, {"type": "string", "format": "date-time"}, description)


def _step(description: str) -> Any:
    return _argument(parse_duration, {"type": "string", "pattern": DURATION_PATTERN}, description)


SliceFilter = Annotated[SliceName, Field(description="only this slice")]


class TemplatesQuery(Query):
    slice: Annotated[SliceName, Field(description="only the templates this slice may use")] = None


class EndpointsQuery(Query):
    slice: SliceFilter = None


class GPRsQuery(Query):
    slice: SliceFilter = None
    status: _argument(_one_of(STATUS_VALUES), {"type": "string", "enum": list(STATUS_VALUES)}, "only this status") = (
        None
    )
    limit: _limit(cursors.GPRS) = cursors.GPRS.default_limit
    cursor: _cursor(cursors.GPRS, "in id order") = None


class QueueQuery(Query):
    limit: _limit(cursors.QUEUE) = cursors.QUEUE.default_limit
    cursor: _cursor(cursors.QUEUE, "in queue position order, then by id") = None


class EventsQuery(Query):
    gpr: _argument(whole_id, {"type": "integer", "minimum": 1, "maximum": ID_MAX}, "only this GPR") = None
    slice: SliceFilter = None
    since: _time("only events at or after") = None
    limit: _limit(cursors.EVENTS) = cursors.EVENTS.default_limit
    cursor: _cursor(cursors.EVENTS, "older events") = None


class ScheduleQuery(Query):
    start: _time("default: a day ago") = None
    end: _time("default: a week ahead") = None


class KubeconfigQuery(Query):
    cluster: Annotated[SliceName, Field(description="a Kubernetes cluster the slice has namespaces on")]
    expiration: _argument(
        _expiration,
        {"type": "integer", "minimum": MIN_EXPIRATION, "maximum": MAX_EXPIRATION},
        f"seconds the token is valid (default {DEFAULT_EXPIRATION}); the cluster may cap it, expires_at says",
    ) = DEFAULT_EXPIRATION


class GPUsQuery(Query):
    sort: _argument(
        _one_of(tuple(SORT_KEYS)),
        {"type": "string", "enum": list(SORT_KEYS)},
        "node order (default), or highest reading first",
    ) = "node"


class UtilizationQuery(Query):
    since: _time("from this time, within the last 24 h, rounded down to 5 minutes") = None
    step: _step("seconds or units, a multiple of 5m, at most 24h (default 5m)") = None


class MetricsQuery(Query):
    since: _time("from this time (default: an hour ago)") = None
    step: _step("seconds or units, at most 1h (default: the sampling interval)") = None


class WorkloadsQuery(Query):
    slice: SliceFilter = None
    limit: _limit(cursors.WORKLOADS) = cursors.WORKLOADS.default_limit
    cursor: _cursor(cursors.WORKLOADS, "by slice, kind (server, pod, process), name") = None


class AlertsQuery(Query):
    slice: SliceFilter = None
    since: _time("only alerts active at some time from then on") = None
    active: _argument(
        lambda value, name: _one_of(("true", "false"))(value, name) == "true",
        {"type": "string", "enum": ["true", "false"]},
        "only active (true) or cleared (false) ones",
    ) = None
    limit: _limit(cursors.ALERTS) = cursors.ALERTS.default_limit
    cursor: _cursor(cursors.ALERTS, "older alerts") = None


class ServersQuery(Query):
    slice: SliceFilter = None


def _choice(values: tuple[str, ...], description: str) -> Any:
    return _argument(_one_of(values), {"type": "string", "enum": list(values)}, description)


class UsageQuery(Query):
    group_by: _choice(GROUPS, "rows per project, slice or user (default slice)") = "slice"
    period: _choice(PERIODS, "rows per calendar week (from Monday, UTC) or month (default month)") = "month"
    since: _time("from the period this time is in (default: the current period)") = None
    format: _choice(("json", "csv"), "json (default) or csv, for chargeback") = "json"


class WorkspaceRequestsQuery(Query):
    status: _choice(("pending", "approved", "denied"), "only requests in this state") = None


class NodesQuery(Query):
    cluster: Annotated[str, Field(description="only this cluster's nodes")] = None
    health: _choice(("healthy", "unhealthy", "quarantined", "unknown"), "only nodes of this health") = None
