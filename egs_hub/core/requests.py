"""Request bodies of the REST API as dataclasses, parsed and validated.

Each body class lists its fields once; the metadata of a field holds its
parser (``value -> typed value``, raising InvalidRequest naming the field) and
its JSON schema, so validation and the OpenAPI document cannot disagree.
A field left out of a body is ``MISSING`` (PATCH bodies) or its default.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import InvalidRequest
from .model import BIND_FAILURES, EVICTION_MODES, PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN, GPRSpec
from .units import (
    DURATION_PATTERN,
    LATEST_TIME,
    MAX_DURATION_SECONDS,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)
from .user_names import normalize_user_name

SLICE_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
GROUP_NAME_RE = re.compile(r"[A-Za-z0-9][-_.@A-Za-z0-9]{0,254}")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()

DURATION_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": MAX_DURATION_SECONDS, "description": "seconds"},
        {"type": "string", "pattern": DURATION_PATTERN},
    ],
    "description": 'seconds, or units largest first like "1d2h30m"; at most ten years',
}
TIME_SCHEMA = {"type": "string", "format": "date-time"}
START_AFTER_SCHEMA = {
    **TIME_SCHEMA,
    "type": ["string", "null"],
    "description": "not before this time; at most the service's max_start_after (default 365 days) from now",
}


def _field(parse: Callable[[Any, str], Any], schema: dict, default: Any = MISSING) -> Any:
    metadata = {"parse": parse, "schema": schema}
    if isinstance(default, dict):
        return dataclasses.field(default_factory=dict, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def parse_body(cls: type, body: object, *, partial: bool = False, prefix: str = ""):
    """Build ``cls`` from a decoded JSON body; ``partial`` allows any field to be left out.

    ``prefix`` names the enclosing field of a nested object in error messages.
    """
    if not isinstance(body, Mapping):
        where = prefix.rstrip(".")
        raise InvalidRequest(where or "body", f"{where or 'the request body'} must be a JSON object")
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in body:
        if key not in known:
            raise InvalidRequest(
                f"{prefix}{key}",
                f"unknown field {prefix + key!r}; known fields: {', '.join(sorted(known))}",
            )
    values = {}
    for name, f in known.items():
        if name in body:
            values[name] = f.metadata["parse"](body[name], f"{prefix}{name}")
        elif f.default is MISSING and not partial:
            raise InvalidRequest(f"{prefix}{name}", f"{prefix}{name} is required")
        elif partial:
            values[name] = MISSING
    made = cls(**values)
    check = getattr(made, "check", None)
    if check is not None:
        check(partial=partial)
    return made


def body_schema(cls: type, *, partial: bool = False) -> dict:
    """The JSON schema of a body class, for the OpenAPI document."""
    fields = dataclasses.fields(cls)
    schema: dict = {
        "type": "object",
        "additionalProperties": False,
        "properties": {f.name: f.metadata["schema"] for f in fields},
    }
    required = [f.name for f in fields if f.default is MISSING and not partial]
    if required:
        schema["required"] = required
    return schema


# Field parsers: (value, field name) -> typed value, or InvalidRequest.


def optional(parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def parse_optional(value: Any, field: str) -> Any:
        return None if value is None else parse(value, field)

    return parse_optional


def parse_int_between(low: int, high: int) -> Callable[[Any, str], int]:
    def parse_int(value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest(field, f"{field} must be a whole number from {low} to {high}")
        if not low <= value <= high:
            raise InvalidRequest(field, f"{field} must be from {low} to {high}, not {value}")
        return value

    return parse_int


def parse_positive_number(high: float) -> Callable[[Any, str], float]:
    """A number above 0 and at most ``high`` (whole or not); JSON's NaN and Infinity are refused."""

    def parse(value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidRequest(field, f"{field} must be a number above 0 and at most {high:g}")
        if not 0 < value <= high:
            raise InvalidRequest(field, f"{field} must be above 0 and at most {high:g}, not {value}")
        return float(value)

    return parse


def parse_choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if not isinstance(value, str) or value not in choices:
            raise InvalidRequest(field, f"{field} must be one of {', '.join(map(repr, choices))}, not {value!r}")
        return value

    return parse


def parse_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(field, f"{field} must be true or false")
    return value


def parse_text(max_length: int) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise InvalidRequest(field, f"{field} must be a string")
        if len(value) > max_length:
            raise InvalidRequest(field, f"{field} must be at most {max_length} characters")
        if any(ord(c) < 32 for c in value):
            raise InvalidRequest(field, f"{field} must not contain control characters")
        return value.strip()

    return parse


def parse_matching(pattern: re.Pattern, what: str) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise InvalidRequest(field, f"{field} must be {what}, not {value!r}")
        return value

    return parse


parse_slice_name = parse_matching(
    SLICE_NAME_RE, "lower-case letters, digits and '-', starting and ending with a letter or digit"
)


def check_slice_name(name: str, field: str = "slice") -> str:
    parse_slice_name(name, field)
    if len(name) > 63:
        raise InvalidRequest(field, f"{field} must be at most 63 characters")
    return name


def parse_slice_ref(value: Any, field: str) -> str:
    return check_slice_name(parse_slice_name(value, field), field)


def parse_duration_field(value: Any, field: str) -> timedelta:
    return parse_duration(value, field)


def parse_start_after(value: Any, field: str) -> datetime:
    """A GPR's start_after: a time from EARLIEST_TIME on; how far ahead is bounded by
    ``check_start_after``, which needs the time now and the service's horizon."""
    return parse_time(value, field, latest=None)


def check_start_after(start_after: datetime | None, now: datetime, horizon: timedelta) -> None:
    """Refuse a start_after more than ``horizon`` (the service's ``max_start_after``) after
    ``now``: the planner could not place it, or would hold a place for it for years (issue 25)."""
    if start_after is None:
        return
    latest = min(now + horizon, LATEST_TIME)
    if start_after > latest:
        raise InvalidRequest(
            "start_after",
            f"start_after must be within {describe_horizon(horizon)} from now (before {format_time(latest)}), "
            f"not {format_time(start_after)}",
        )


def describe_horizon(horizon: timedelta) -> str:
    """``timedelta(days=365)`` is "365 days", ``timedelta(hours=36)`` is "1d12h"."""
    days, rest = divmod(horizon, timedelta(days=1))
    if rest or not days:
        return format_duration(horizon)
    return f"{days} day" if days == 1 else f"{days} days"


_COUNT = parse_int_between(1, 100_000)
_COUNT_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 100_000}
_PRIORITY = parse_int_between(PRIORITY_MIN, PRIORITY_MAX)
_PRIORITY_SCHEMA = {
    "type": "integer",
    "minimum": PRIORITY_MIN,
    "maximum": PRIORITY_MAX,
    "description": "low 1-100, medium 101-200, high 201-300",
}
_NAME = parse_text(100)
_SELECTOR = optional(parse_text(100))
_SELECTOR_SCHEMA = {"type": ["string", "null"], "maxLength": 100}


def _check_gpus_or_nodes(gpus: Any, nodes: Any, *, partial: bool) -> None:
    if gpus and nodes:
        raise InvalidRequest("gpus", "give either gpus or nodes, not both")
    if not partial and gpus is None and nodes is None:
        raise InvalidRequest("gpus", "give gpus (a number of GPUs) or nodes (whole nodes)")


@dataclass(frozen=True)
class GPRCreate:
    slice: str = _field(parse_slice_ref, {"type": "string"})
    duration: timedelta = _field(parse_duration_field, DURATION_SCHEMA)
    gpus: int | None = _field(optional(_COUNT), {**_COUNT_SCHEMA, "type": ["integer", "null"]}, None)
    nodes: int | None = _field(optional(_COUNT), {**_COUNT_SCHEMA, "type": ["integer", "null"]}, None)
    name: str = _field(_NAME, {"type": "string", "maxLength": 100}, "")
    priority: int = _field(_PRIORITY, _PRIORITY_SCHEMA, PRIORITY_DEFAULT)
    shape: str | None = _field(_SELECTOR, _SELECTOR_SCHEMA, None)
    cluster: str | None = _field(_SELECTOR, _SELECTOR_SCHEMA, None)
    start_after: datetime | None = _field(optional(parse_start_after), START_AFTER_SCHEMA, None)
    idle_timeout: timedelta | None = _field(
        optional(parse_duration_field), {"oneOf": [DURATION_SCHEMA, {"type": "null"}]}, None
    )
    preemptible: bool = _field(parse_bool, {"type": "boolean"}, True)

    def check(self, partial: bool) -> None:
        _check_gpus_or_nodes(self.gpus, self.nodes, partial=partial)

    def to_spec(self) -> GPRSpec:
        return GPRSpec(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


@dataclass(frozen=True)
class GPRUpdate:
    """PATCH /gprs/{id}: the owner edits before provisioning; admins change priority."""

    duration: timedelta = _field(parse_duration_field, DURATION_SCHEMA)
    gpus: int | None = _field(optional(_COUNT), {**_COUNT_SCHEMA, "type": ["integer", "null"]})
    nodes: int | None = _field(optional(_COUNT), {**_COUNT_SCHEMA, "type": ["integer", "null"]})
    name: str = _field(_NAME, {"type": "string", "maxLength": 100})
    priority: int = _field(_PRIORITY, _PRIORITY_SCHEMA)
    shape: str | None = _field(_SELECTOR, _SELECTOR_SCHEMA)
    cluster: str | None = _field(_SELECTOR, _SELECTOR_SCHEMA)
    start_after: datetime | None = _field(optional(parse_start_after), START_AFTER_SCHEMA)
    idle_timeout: timedelta | None = _field(
        optional(parse_duration_field), {"oneOf": [DURATION_SCHEMA, {"type": "null"}]}
    )
    preemptible: bool = _field(parse_bool, {"type": "boolean"})

    def check(self, partial: bool) -> None:
        _check_gpus_or_nodes(self.gpus, self.nodes, partial=partial)

    def changes(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not MISSING}

    def apply(self, spec: GPRSpec) -> GPRSpec:
        """The spec with these changes; giving gpus clears nodes and the other way round."""
        changes = self.changes()
        if changes.get("gpus"):
            changes["nodes"] = None
        if changes.get("nodes"):
            changes["gpus"] = None
        updated = dataclasses.replace(spec, **changes)
        _check_gpus_or_nodes(updated.gpus, updated.nodes, partial=False)
        return updated


@dataclass(frozen=True)
class WaitTimeQuery:
    slice: str = _field(parse_slice_ref, {"type": "string"})
    duration: timedelta = _field(parse_duration_field, DURATION_SCHEMA)
    gpus: int | None = _field(optional(_COUNT), {**_COUNT_SCHEMA, "type": ["integer", "null"]}, None)
    nodes: int | None = _field(optional(_COUNT), {**_COUNT_SCHEMA, "type": ["integer", "null"]}, None)
    priority: int = _field(_PRIORITY, _PRIORITY_SCHEMA, PRIORITY_DEFAULT)
    shape: str | None = _field(_SELECTOR, _SELECTOR_SCHEMA, None)
    cluster: str | None = _field(_SELECTOR, _SELECTOR_SCHEMA, None)
    start_after: datetime | None = _field(optional(parse_start_after), START_AFTER_SCHEMA, None)

    def check(self, partial: bool) -> None:
        _check_gpus_or_nodes(self.gpus, self.nodes, partial=partial)

    def to_spec(self) -> GPRSpec:
        return GPRSpec(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


@dataclass(frozen=True)
class Reason:
    """Body of approve, deny, release and cancel: an optional reason for the audit log."""

    reason: str = _field(parse_text(500), {"type": "string", "maxLength": 500}, "")


def parse_user_list(value: Any, field: str) -> tuple[str, ...]:
    """User names, normalised as the hub does (``Bob`` is ``bob``), each once."""
    if not isinstance(value, list) or len(value) > 1000:
        raise InvalidRequest(field, f"{field} must be a list of at most 1000 user names")
    return tuple(dict.fromkeys(normalize_user_name(name, field) for name in value))


def nested(cls: type, *, partial: bool = False) -> Callable[[Any, str], Any]:
    def parse(value: Any, field: str) -> Any:
        return parse_body(cls, value, partial=partial, prefix=f"{field}.")

    return parse


_LIMIT = optional(parse_int_between(1, 100_000))
_LIMIT_SCHEMA = {"type": ["integer", "null"], "minimum": 1, "maximum": 100_000}


_AMOUNT_MAX = 1e9
_AMOUNT = optional(parse_positive_number(_AMOUNT_MAX))
_AMOUNT_SCHEMA = {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": _AMOUNT_MAX}


@dataclass(frozen=True)
class QuotaBody:
    max_gpus: int | None = _field(_LIMIT, {**_LIMIT_SCHEMA, "description": "GPUs held at once"}, None)
    max_gpu_hours: float | None = _field(
        _AMOUNT, {**_AMOUNT_SCHEMA, "description": "GPU-hours per rolling week (7 days)"}, None
    )


@dataclass(frozen=True)
class PolicyBody:
    max_duration: timedelta | None = _field(
        optional(parse_duration_field), {"oneOf": [DURATION_SCHEMA, {"type": "null"}]}, None
    )
    max_priority: int = _field(_PRIORITY, _PRIORITY_SCHEMA, PRIORITY_MAX)
    auto_approve_max_gpus: int | None = _field(_LIMIT, _LIMIT_SCHEMA, None)
    max_active_gprs: int = _field(parse_int_between(1, 1000), {"type": "integer", "minimum": 1, "maximum": 1000}, 1)
    restart_servers: bool = _field(parse_bool, {"type": "boolean"}, False)
    reject_over_limits: bool = _field(
        parse_bool, {"type": "boolean", "description": "reject over-limit GPRs instead of asking an admin"}, False
    )
    eviction: str = _field(
        parse_choice(EVICTION_MODES),
        {
            "type": "string",
            "enum": list(EVICTION_MODES),
            "description": "ending lower-priority preemptible GPRs for this slice's GPRs: "
            "auto, confirm (an admin confirms) or off",
        },
        "confirm",
    )
    requeue_evicted: bool = _field(
        parse_bool, {"type": "boolean", "description": "an evicted GPR of this slice is queued again"}, True
    )
    share: float | None = _field(
        _AMOUNT, {**_AMOUNT_SCHEMA, "description": "fair-share weight; null: max_gpus, else 1"}, None
    )
    idle_timeout: timedelta | None = _field(
        optional(parse_duration_field),
        {"oneOf": [DURATION_SCHEMA, {"type": "null"}], "description": "default idle timeout of the slice's GPRs"},
        None,
    )
    max_idle_timeout: timedelta | None = _field(
        optional(parse_duration_field),
        {"oneOf": [DURATION_SCHEMA, {"type": "null"}], "description": "longest idle timeout members may ask for"},
        None,
    )
    bind_failure: str = _field(
        parse_choice(BIND_FAILURES),
        {
            "type": "string",
            "enum": list(BIND_FAILURES),
            "description": "a GPR whose nodes fail their pre-checks: fail, or move (queued again for other nodes)",
        },
        "fail",
    )


def parse_namespaces(value: Any, field: str) -> dict[str, tuple[str, ...]]:
    """``{cluster: [namespace, ...]}``, names as Kubernetes allows them."""
    if not isinstance(value, Mapping):
        raise InvalidRequest(field, f"{field} must be an object of cluster name to namespace list")
    namespaces = {}
    for cluster, names in value.items():
        where = f"{field}.{cluster}"
        _SELECTOR(cluster, where)
        if not isinstance(names, list) or not names:
            raise InvalidRequest(where, f"{where} must be a non-empty list of namespace names")
        namespaces[cluster] = tuple(parse_slice_ref(name, where) for name in names)
        if len(set(namespaces[cluster])) != len(names):
            raise InvalidRequest(where, f"{where} lists a namespace more than once")
    return namespaces


_NAMESPACES_SCHEMA = {
    "type": "object",
    "additionalProperties": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
}


@dataclass(frozen=True)
class SliceCreate:
    name: str = _field(parse_slice_ref, {"type": "string", "pattern": SLICE_NAME_RE.pattern})
    display_name: str = _field(_NAME, {"type": "string", "maxLength": 100}, "")
    group: str | None = _field(
        optional(parse_matching(GROUP_NAME_RE, "a JupyterHub group name")),
        {"type": ["string", "null"], "description": "hub group of members; default: the slice name"},
        None,
    )
    quota: QuotaBody = _field(nested(QuotaBody), body_schema(QuotaBody), QuotaBody())
    policy: PolicyBody = _field(nested(PolicyBody), body_schema(PolicyBody), PolicyBody())
    namespaces: dict = _field(parse_namespaces, _NAMESPACES_SCHEMA, {})
    members: tuple[str, ...] = _field(
        parse_user_list, {"type": "array", "items": {"type": "string"}, "maxItems": 1000}, ()
    )


@dataclass(frozen=True)
class SliceUpdate:
    """PATCH /slices/{name}: the fields given replace the slice's; quota and policy per key."""

    display_name: str = _field(_NAME, {"type": "string", "maxLength": 100})
    quota: QuotaBody = _field(nested(QuotaBody, partial=True), body_schema(QuotaBody, partial=True))
    policy: PolicyBody = _field(nested(PolicyBody, partial=True), body_schema(PolicyBody, partial=True))
    namespaces: dict = _field(parse_namespaces, _NAMESPACES_SCHEMA)


ID_MAX = 2**31 - 1  # ids are SQL INTEGER columns
_ID = parse_int_between(1, ID_MAX)
_ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": ID_MAX}


def parse_id_list(value: Any, field: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= 1000:
        raise InvalidRequest(field, f"{field} must be a list of 1 to 1000 GPR ids")
    ids = tuple(_ID(item, field) for item in value)
    if len(set(ids)) != len(ids):
        raise InvalidRequest(field, f"{field} lists a GPR more than once")
    return ids


@dataclass(frozen=True)
class EvictionConfirm:
    """POST queue/evictions: an admin confirms the planner's proposal for ``gpr_id``."""

    gpr_id: int = _field(_ID, _ID_SCHEMA)
    victims: tuple[int, ...] = _field(
        parse_id_list,
        {"type": "array", "items": _ID_SCHEMA, "minItems": 1, "maxItems": 1000, "uniqueItems": True},
    )


@dataclass(frozen=True)
class ServerStart:
    """PUT servers/{user}[/{server}]: the slice a starting server belongs to."""

    slice: str = _field(parse_slice_ref, {"type": "string"})


_PATH_MAX = 4096

# Kubernetes label selector syntax (equality- and set-based requirements, comma-separated).
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}"
_LABEL_VALUE = rf"(?:{_LABEL_NAME})?"
_REQUIREMENT = (
    rf"\s*(?:!\s*{_LABEL_KEY}|{_LABEL_KEY}\s*(?:(?:==|=|!=)\s*{_LABEL_VALUE}"
    rf"|\s(?:in|notin)\s*\(\s*{_LABEL_VALUE}(?:\s*,\s*{_LABEL_VALUE})*\s*\))?)\s*"
)
LABEL_SELECTOR_RE = re.compile(rf"{_REQUIREMENT}(?:,{_REQUIREMENT})*")
EXIT_GRACE_MAX = timedelta(days=1)


def parse_label_selector(value: Any, field: str) -> str:
    text = parse_text(1000)(value, field)
    if not LABEL_SELECTOR_RE.fullmatch(text):
        raise InvalidRequest(
            field, f"{field} {text[:80]!r} is not a Kubernetes label selector (like 'egs.io/slice,pool in (a,b)')"
        )
    return text.strip()


def parse_exit_grace(value: Any, field: str) -> timedelta:
    grace = parse_duration(value, field)
    if grace > EXIT_GRACE_MAX:
        raise InvalidRequest(field, f"{field} must be at most a day")
    return grace


@dataclass(frozen=True)
class ClusterCreate:
    """POST /clusters, and each item of ``EGSService.clusters``: a Kubernetes cluster reached by a
    kubeconfig file on the service's host (its ``context``, else its current context), or by the
    ServiceAccount of the pod the service runs in (``in_cluster``)."""

    name: str = _field(parse_slice_ref, {"type": "string", "pattern": SLICE_NAME_RE.pattern, "maxLength": 63})
    kubeconfig: str | None = _field(
        optional(parse_text(_PATH_MAX)),
        {"type": ["string", "null"], "maxLength": _PATH_MAX, "description": "absolute path on the service's host"},
        None,
    )
    context: str | None = _field(
        optional(parse_text(253)),
        {"type": ["string", "null"], "maxLength": 253, "description": "default: the file's current-context"},
        None,
    )
    in_cluster: bool = _field(parse_bool, {"type": "boolean"}, False)
    node_selector: str = _field(
        parse_label_selector,
        {"type": "string", "maxLength": 1000, "description": "label selector of the GPU nodes egs-hub manages there"},
        "egs.io/slice",
    )
    exit_grace: timedelta = _field(
        parse_exit_grace,
        {
            "oneOf": [{**DURATION_SCHEMA["oneOf"][0], "maximum": 86400}, DURATION_SCHEMA["oneOf"][1]],
            "description": "how long a slice's pods may take to leave a node before what remains is deleted",
        },
        timedelta(minutes=5),
    )

    def check(self, *, partial: bool) -> None:
        if self.in_cluster:
            if self.kubeconfig is not None or self.context is not None:
                raise InvalidRequest("in_cluster", "in_cluster takes no kubeconfig or context: give one or the other")
            return
        if not self.kubeconfig:
            raise InvalidRequest(
                "kubeconfig", "kubeconfig is required: the absolute path of a kubeconfig file on the service's host"
            )
        if not self.kubeconfig.startswith("/"):
            raise InvalidRequest("kubeconfig", f"kubeconfig must be an absolute path, not {self.kubeconfig!r}")
        if self.context == "":
            raise InvalidRequest("context", "context must not be empty: name a context of the kubeconfig")
