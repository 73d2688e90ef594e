"""Request bodies of the REST API as pydantic models: one definition each.

A model's fields carry their constraints in their types (ranges, lengths, patterns,
choices, and parsers for durations, times, user names and the like), so the same
definition validates a body (``parse_body``), gives the OpenAPI document its schema
(``body_schemas``), and names the field in every refusal: ``parse_body`` turns the
first validation error into an InvalidRequest whose message is a sentence
(``gpus must be from 1 to 100000, not -1``). PATCH bodies leave out what they do not
change: their fields default to ``MISSING``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, Union, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    WithJsonSchema,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from pydantic_core import PydanticCustomError

from .endpoints import (
    DEFAULT_DURATION,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_TARGET_CONCURRENCY,
    HEALTH_PATHS,
    METRICS_PATHS,
    RUNTIMES,
    EndpointSpec,
    check_bounds,
)
from .errors import InvalidRequest
from .layouts import Target
from .model import (
    BIND_FAILURES,
    DEFAULT_HOME_VOLUME_SIZE,
    DEFAULT_PROJECT,
    EVICTION_MODES,
    MAINTENANCE_CROSSINGS,
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    REMEDIATIONS,
    GPRSpec,
    Project,
    Shape,
)
from .node_pools import ATOMIC_SCALE_UP, NodePool
from .sharing import MIG_PROFILE, LayoutError, check_layout, requested_profile
from .templates import GPRTemplate, check_template, fill
from .units import (
    DURATION_PATTERN,
    LATEST_TIME,
    MAX_DURATION_SECONDS,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)
from .user_names import USER_NAME_RE, normalize_user_name

SLICE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
GROUP_NAME_PATTERN = r"^[A-Za-z0-9][-_.@A-Za-z0-9]{0,254}$"
TEXT_PATTERN = r"^[^\x00-\x1f]*$"  # no control characters
# A Kubernetes quantity of bytes: a whole or decimal number with a binary or decimal suffix.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# What a value matching each pattern is, for refusals ("slice must be ..., not 'X'").
LABEL_VALUE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
GPU_TYPE = r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}-[0-9]{1,4}GB$"
PATTERN_MEANINGS = {
    GPU_TYPE: "a whole GPU's type: its model and memory, like H100-80GB",
    SLICE_NAME_PATTERN: "lower-case letters, digits and '-', starting and ending with a letter or digit",
    GROUP_NAME_PATTERN: "a JupyterHub group name",
    LABEL_VALUE_PATTERN: "a Kubernetes label value: letters, digits, '-', '_' and '.', starting and ending with a "
    "letter or digit",
}
ID_MAX = 2**31 - 1  # ids are SQL INTEGER columns
AMOUNT_MAX = 1e9
PATH_MAX = 4096
EXIT_GRACE_MAX = timedelta(days=1)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()
_FIELD = "\x00field\x00"  # stands for the field's name in a parser's refusal until parse_body knows it


def parsed(parse: Callable[[Any, str], Any]) -> Callable[[Any], Any]:
    """A field validator from a parser ``(value, field name) -> value`` that raises InvalidRequest."""

    def validate(value: Any) -> Any:
        try:
            return parse(value, _FIELD)
        except InvalidRequest as e:
            raise PydanticCustomError("egs", "{message}", {"message": str(e), "field": e.field}) from None

    return validate


def _optional(parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    return lambda value, field: None if value is None else parse(value, field)


def _typed(cls: type, parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """``parse``, letting through a value that already has the parsed type (a model built in code)."""
    return lambda value, field: value if isinstance(value, cls) else parse(value, field)


# Field types


def _whole_number(value: Any) -> Any:
    """JSON has one kind of number: 2.0 is the whole number 2 (JSON Schema's "integer" says so too)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Whole = BeforeValidator(_whole_number)
DURATION_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": MAX_DURATION_SECONDS, "description": "seconds"},
        {"type": "string", "pattern": DURATION_PATTERN},
    ],
    "description": 'seconds, or units largest first like "1d2h30m"; at most ten years',
}
_parse_duration = _typed(timedelta, lambda value, field: parse_duration(_whole_number(value), field))
Duration = Annotated[timedelta, BeforeValidator(parsed(_parse_duration)), WithJsonSchema(DURATION_SCHEMA)]
OptionalDuration = Annotated[
    timedelta | None,
    BeforeValidator(parsed(_optional(_parse_duration))),
    WithJsonSchema({"oneOf": [DURATION_SCHEMA, {"type": "null"}]}),
]
StartAfter = Annotated[
    datetime | None,
    # How far ahead is check_start_after's to say, with the time now and the service's horizon.
    BeforeValidator(
        parsed(
            _optional(_typed(datetime, lambda value, field: parse_time(value, field, latest=None, clamp_earliest=True)))
        )
    ),
    WithJsonSchema(
        {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "not before this time (any past time is now); at most the service's max_start_after "
            "(default 365 days) from now",
        }
    ),
]
Count = Annotated[int, Field(ge=1, le=100_000), Whole]
Moment = Annotated[
    datetime,
    BeforeValidator(parsed(_typed(datetime, parse_time))),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
Priority = Annotated[
    int, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX, description="low 1-100, medium 101-200, high 201-300"), Whole
]
SliceName = Annotated[str, Field(pattern=SLICE_NAME_PATTERN, max_length=63)]
TemplateName = SliceName
# Text is stripped after its checks: they hold for the text as given.
_STRIPPED = AfterValidator(lambda value: value.strip() if isinstance(value, str) else value)
Selector = Annotated[str | None, Field(max_length=100, pattern=TEXT_PATTERN), _STRIPPED]
Amount = Annotated[float | None, Field(gt=0, le=AMOUNT_MAX, allow_inf_nan=False)]
GPRId = Annotated[int, Field(ge=1, le=ID_MAX), Whole]
UserName = Annotated[
    str,
    BeforeValidator(parsed(normalize_user_name)),
    WithJsonSchema({"type": "string", "pattern": f"^{USER_NAME_RE.pattern}$"}),
]


def _text(max_length: int) -> Any:
    """Text of at most ``max_length`` characters, none of them control characters, stripped."""
    return Annotated[str, Field(max_length=max_length, pattern=TEXT_PATTERN), _STRIPPED]


# Written out (not _text(...)) so that type checkers read them as types; the same as _text(100), _text(500).
Name = Annotated[str, Field(max_length=100, pattern=TEXT_PATTERN), _STRIPPED]
ReasonText = Annotated[str, Field(max_length=500, pattern=TEXT_PATTERN), _STRIPPED]


def describe_horizon(horizon: timedelta) -> str:
    """``timedelta(days=365)`` is "365 days", ``timedelta(hours=36)`` is "1d12h"."""
    days, rest = divmod(horizon, timedelta(days=1))
    if rest or not days:
        return format_duration(horizon)
    return f"{days} day" if days == 1 else f"{days} days"


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


def check_slice_name(name: str, field: str = "slice") -> str:
    """``name`` if it is a slice name (a path argument), else InvalidRequest naming ``field``."""
    if not re.fullmatch(SLICE_NAME_PATTERN, name):
        raise InvalidRequest(field, f"{field} must be {PATTERN_MEANINGS[SLICE_NAME_PATTERN]}, not {name!r}")
    if len(name) > 63:
        raise InvalidRequest(field, f"{field} must be at most 63 characters")
    return name


def _check_gpus_or_nodes(gpus: Any, nodes: Any, *, partial: bool) -> None:
    if gpus and nodes:
        raise InvalidRequest("gpus", "give either gpus or nodes, not both")
    if not partial and gpus is None and nodes is None:
        raise InvalidRequest("gpus", "give gpus (a number of GPUs) or nodes (whole nodes)")


def _check_share(share: float, gpus: Any, nodes: Any, shape: str | None) -> None:
    """A share of a GPU is one unit of one GPU: not with nodes, more GPUs, or a MIG profile."""
    if nodes is not None:
        raise InvalidRequest("nodes", f"gpu_share {share:g} is a share of one GPU: leave nodes out")
    if gpus not in (None, 1):
        raise InvalidRequest("gpus", f"gpu_share {share:g} is a share of one GPU: leave gpus out (or give 1)")
    if requested_profile(shape) is not None:
        raise InvalidRequest("shape", f"gpu_share asks for a share of a whole GPU; {shape!r} names MIG instances")


def _check_instances(shape: str | None, nodes: int | None) -> None:
    """MIG instances are asked for one by one: ``gpus`` counts them (core/sharing.py)."""
    profile = requested_profile(shape)
    if profile is not None and nodes is not None:
        raise InvalidRequest(
            "nodes", f"{shape!r} names MIG instances: ask for a number of them with gpus, not whole nodes"
        )


# Rules across fields, in JSON Schema: the document says them beside the fields' own.


def _given(field: str, json_type: str) -> dict[str, Any]:
    """``field`` is there and not null."""
    return {"required": [field], "properties": {field: {"type": json_type}}}


def _not_both(one: str, other: str, json_type: str = "integer") -> dict[str, Any]:
    return {"not": {"allOf": [_given(one, json_type), _given(other, json_type)]}}


# A share of one GPU: not with nodes, nor with more GPUs than one (_check_share).
_SHARE_RULE: dict[str, Any] = {
    "anyOf": [
        {"not": _given("gpu_share", "number")},
        {"properties": {"nodes": {"type": "null"}, "gpus": {"enum": [None, 1]}}},
    ]
}


# Bodies


class Body(BaseModel):
    """A request body: unknown fields refused, values exactly of their JSON types (no "2" for 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def check(self) -> None:
        """Rules across fields, after each field is valid; InvalidRequest naming a field."""

    def given(self) -> dict[str, Any]:
        """The fields this (PATCH) body gives: every field not MISSING."""
        return {name: value for name in type(self).model_fields if (value := getattr(self, name)) is not MISSING}


class _Ask(Body):
    """What a wait-time query and a GPR both ask for. With a ``template`` the fields left out are
    the template's (core/templates.py), so ``duration`` and the size may be left out too. The rules
    across fields that ``check`` keeps are in the schema as well, so what the document allows the API
    takes (but that a template gives what the request leaves out, which only the template can say)."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                _not_both("gpus", "nodes"),
                {"anyOf": [_given("template", "string"), {"required": ["duration"]}]},
                {
                    "anyOf": [
                        _given("template", "string"),
                        _given("gpus", "integer"),
                        _given("nodes", "integer"),
                        _given("gpu_share", "number"),
                    ]
                },
                _SHARE_RULE,
            ]
        }
    )

    slice: SliceName
    template: Annotated[
        TemplateName | None, Field(description="a GPR template (GET /templates): it gives the fields left out")
    ] = None
    duration: Annotated[Duration, Field(description="required unless the template gives it")] = MISSING
    gpus: Count | None = None
    nodes: Count | None = None
    priority: Priority = PRIORITY_DEFAULT
    shape: Selector = None
    cluster: Selector = None
    start_after: StartAfter = None
    gpu_share: Annotated[
        float | None,
        Field(
            gt=0,
            lt=1,
            allow_inf_nan=False,
            description="a share of one time-sliced GPU (0.25: a quarter), for slices whose policy allows "
            "gpu_sharing; gpus is then 1",
        ),
    ] = None

    def check(self) -> None:
        if self.gpu_share is not None:
            _check_share(self.gpu_share, self.gpus, self.nodes, self.shape)
            return
        _check_gpus_or_nodes(self.gpus, self.nodes, partial=self.template is not None)
        if self.template is None and self.duration is MISSING:
            raise InvalidRequest("duration", "duration is required (or a template that gives it)")

    def to_spec(self, template: GPRTemplate | None = None) -> GPRSpec:
        """The spec asked for, the fields it leaves out taken from ``template`` (the one it names,
        found by the caller); InvalidRequest when neither gives its duration or size."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        fields = fill(template, given) if template is not None else given
        if fields.get("duration", MISSING) is MISSING:
            raise InvalidRequest("duration", "duration is required: neither the request nor its template gives it")
        if fields.get("gpu_share") is not None:
            fields = {**fields, "gpus": 1, "nodes": None}
        _check_gpus_or_nodes(fields.get("gpus"), fields.get("nodes"), partial=False)
        _check_instances(fields.get("shape"), fields.get("nodes"))
        return GPRSpec(**fields)


class WaitTimeQuery(_Ask):
    """POST /wait-times: when a GPR of this shape would start, on each cluster and shape that could serve it."""


class GPRCreate(_Ask):
    name: Name = ""
    idle_timeout: OptionalDuration = None
    preemptible: bool = True


def _patch(cls: type[Body], omit: tuple[str, ...] = ()) -> type[Body]:
    """The fields of ``cls`` but ``omit`` as a PATCH body: each may be left out, and is then MISSING."""
    fields: dict[str, Any] = {
        name: (info.annotation, FieldInfo.merge_field_infos(info, default=MISSING))
        for name, info in cls.model_fields.items()
        if name not in omit
    }
    return create_model(f"{cls.__name__}Patch", __base__=Body, **fields)


class GPRUpdate(_patch(GPRCreate, omit=("slice", "template"))):  # type: ignore[misc]  # a base made by create_model
    """PATCH /gprs/{id}: the owner edits before provisioning; admins change priority."""

    model_config = ConfigDict(json_schema_extra={"allOf": [_not_both("gpus", "nodes"), _SHARE_RULE]})

    def check(self) -> None:
        _check_gpus_or_nodes(self.gpus, self.nodes, partial=True)
        if self.gpu_share not in (None, MISSING):
            _check_share(self.gpu_share, None if self.gpus is MISSING else self.gpus, None, None)

    def apply(self, spec: GPRSpec) -> GPRSpec:
        """The spec with these changes; giving gpus clears nodes and the other way round, and a
        gpu_share makes it one GPU (giving more, or nodes, clears the share)."""
        changes = self.given()
        if changes.get("gpus"):
            changes["nodes"] = None
        if changes.get("nodes"):
            changes["gpus"] = None
        if changes.get("gpu_share") is not None:
            changes.update(gpus=1, nodes=None)
        elif changes.get("nodes") or (changes.get("gpus") or 1) > 1:
            changes["gpu_share"] = None
        updated = dataclasses.replace(spec, **changes)
        _check_gpus_or_nodes(updated.gpus, updated.nodes, partial=False)
        _check_instances(updated.shape, updated.nodes)
        if updated.gpu_share is not None:
            _check_share(updated.gpu_share, updated.gpus, updated.nodes, updated.shape)
        return updated


_TEMPLATE_RULES: list[Any] = [_not_both("project", "slice", "string"), _not_both("gpus", "nodes")]


class TemplateCreate(Body):
    """POST /templates: a named GPR shape, for everyone, a project's slices or one slice."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [*_TEMPLATE_RULES, {"anyOf": [_given("gpus", "integer"), _given("nodes", "integer")]}]
        }
    )

    name: TemplateName
    description: ReasonText = ""
    project: Annotated[SliceName | None, Field(description="only this project's slices may use it")] = None
    slice: Annotated[SliceName | None, Field(description="only this slice may use it")] = None
    cluster: Selector = None
    shape: Selector = None
    gpus: Count | None = None
    nodes: Count | None = None
    duration: Duration
    priority: Annotated[Priority | None, Field(description="null: the GPR's default")] = None
    idle_timeout: OptionalDuration = None
    preemptible: Annotated[bool | None, Field(description="null: the GPR's default")] = None

    def check(self) -> None:
        check_template(self.to_template())

    def to_template(self) -> GPRTemplate:
        return GPRTemplate(**{name: getattr(self, name) for name in type(self).model_fields})


class TemplateUpdate(_patch(TemplateCreate, omit=("name",))):  # type: ignore[misc]  # a base made by create_model
    """PATCH /templates/{name}: the fields given replace the template's."""

    model_config = ConfigDict(json_schema_extra={"allOf": _TEMPLATE_RULES})

    def check(self) -> None:
        _check_gpus_or_nodes(self.gpus, self.nodes, partial=True)

    def apply(self, template: GPRTemplate) -> GPRTemplate:
        """The template with these changes; giving gpus clears nodes and the other way round, and
        giving a project clears the slice and the other way round."""
        changes = self.given()
        for one, other in (("gpus", "nodes"), ("nodes", "gpus"), ("project", "slice"), ("slice", "project")):
            if changes.get(one) and other not in changes:
                changes[other] = None
        updated = dataclasses.replace(template, **changes)
        check_template(updated)
        return updated


class MaintenanceCreate(Body):
    """POST /nodes/{cluster}/{name}/maintenance: the node is out of service from start to end."""

    start: Moment
    end: Moment
    reason: ReasonText = ""

    def check(self) -> None:
        if self.end <= self.start:
            raise InvalidRequest("end", "end must be after start")


MIG_LAYOUT_SCHEMA = {
    "type": ["object", "null"],
    "propertyNames": {"pattern": f"^{MIG_PROFILE.pattern}$"},
    "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 7},
    "minProperties": 1,
    "description": 'instances per GPU by MIG profile, like {"1g.10gb": 7}; null: whole GPUs',
}


def _parse_mig_layout(value: Any, field: str) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequest(
            field, f'{field} must map MIG profiles to instances per GPU, like {{"1g.10gb": 7}}, or be null'
        )
    if not value:
        raise InvalidRequest(field, f"{field} names at least one MIG profile, or is null for whole GPUs")
    for profile, count in value.items():
        if not MIG_PROFILE.fullmatch(profile):
            raise InvalidRequest(f"{field}.{profile}", f'{profile!r} is not a MIG profile like "1g.10gb" or "3g.40gb"')
        count = _whole_number(count)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 7:
            raise InvalidRequest(
                f"{field}.{profile}",
                f"{field}.{profile} must be a whole number of instances from 1 to 7, not {count!r}",
            )
    return {profile: _whole_number(count) for profile, count in value.items()}


MigLayout = Annotated[
    dict[str, int] | None, BeforeValidator(parsed(_parse_mig_layout)), WithJsonSchema(MIG_LAYOUT_SCHEMA)
]
LabelValue = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")]


class LayoutChangeCreate(Body):
    """POST /nodes/{cluster}/{name}/layout: split each GPU of the node into these MIG instances
    (core/layouts.py); no ``mig`` makes them whole GPUs again."""

    mig: MigLayout = None
    mig_config: Annotated[
        LabelValue | None,
        Field(
            description="Kubernetes: the GPU Operator mig-parted config that gives this layout (the node's "
            "nvidia.com/mig.config label); left out, all-<profile> for one profile at its most, all-disabled for none"
        ),
    ] = None
    reason: ReasonText = ""


class LayoutTarget(Body):
    """One of ``EGSService.layout_targets``: keep ``nodes`` machines whose GPUs are ``gpu_type`` (on
    ``cluster``, else on any) split into the MIG instances ``mig`` (none: whole GPUs); the service
    re-partitions free machines toward it (core/layouts.py)."""

    gpu_type: Annotated[str, Field(pattern=GPU_TYPE, description="a whole GPU's type, as GET /gpus says: H100-80GB")]
    mig: MigLayout = None
    nodes: Annotated[int, Field(ge=0, le=10_000, description="how many machines to keep in this layout")]
    cluster: Selector = None
    mig_config: Annotated[
        LabelValue | None,
        Field(description="Kubernetes: the mig-parted config giving this layout; left out, the default one"),
    ] = None

    def check(self) -> None:
        model, _, memory = self.gpu_type.rpartition("-")
        if self.mig:
            try:
                check_layout(model, int(memory.removesuffix("GB")), self.mig)
            except LayoutError as e:
                raise InvalidRequest("mig", f"a {self.gpu_type} GPU cannot hold this layout: {e}") from None

    def to_target(self) -> Target:
        return Target(self.gpu_type, self.mig, self.nodes, self.cluster, self.mig_config)


POOL_SHAPE = re.compile(r"^(?P<model>[A-Za-z0-9][-A-Za-z0-9_.]{0,62})-(?P<memory>[0-9]{1,4})GB x(?P<gpus>[0-9]{1,3})$")


def parse_pool_shape(value: Any, field: str) -> str:
    if not isinstance(value, str) or not POOL_SHAPE.match(value):
        raise InvalidRequest(
            field, f'{field} must name a node shape as "<model>-<memory>GB x<GPUs>" ("H100-80GB x8"), not {value!r}'
        )
    return value


ProvisioningClass = Literal[
    "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "check-capacity.autoscaling.x-k8s.io"
]  # core.node_pools.PROVISIONING_CLASSES
PROVISIONING_CLASS_HELP = (
    "the ProvisioningRequest class the cluster autoscaler grows it with: best-effort-atomic-scale-up adds "
    "all the nodes asked for at once or none; check-capacity only books capacity the cluster has"
)


class PoolCreate(Body):
    """POST /clusters/{name}/pools: a dynamic node pool (core/node_pools.py), the nodes labelled
    ``egs.io/pool=<name>`` that the cluster's autoscaler adds when egs-hub asks and removes when it gives
    them back."""

    name: Annotated[str, Field(pattern=SLICE_NAME_PATTERN, max_length=40, description="unique in its cluster")]
    shape: Annotated[
        str,
        BeforeValidator(parsed(parse_pool_shape)),
        WithJsonSchema(
            {
                "type": "string",
                "maxLength": 80,
                "pattern": re.sub(r"\(\?P<\w+>", "(", POOL_SHAPE.pattern),  # JSON Schema's regexes name no groups
                "description": 'its nodes\' shape as GET /inventory names it, e.g. "H100-80GB x8"',
            }
        ),
    ]
    min_nodes: Annotated[int, Field(ge=0, le=10_000, description="nodes kept even when idle"), Whole] = 0
    max_nodes: Annotated[int, Field(ge=1, le=10_000, description="nodes it may grow to"), Whole]
    scale_up_delay: Annotated[
        Duration, Field(description="how long a node takes to join once asked for (the planner counts it)")
    ] = timedelta(minutes=10)
    scale_down_idle: Annotated[Duration, Field(description="a node beyond min_nodes idle this long is given back")] = (
        timedelta(minutes=30)
    )
    provisioning_class: Annotated[ProvisioningClass, Field(description=PROVISIONING_CLASS_HELP)] = ATOMIC_SCALE_UP

    def check(self) -> None:
        if self.min_nodes > self.max_nodes:
            raise InvalidRequest(
                "min_nodes", f"min_nodes ({self.min_nodes}) must not exceed max_nodes ({self.max_nodes})"
            )
        for field in ("scale_up_delay", "scale_down_idle"):
            if getattr(self, field) < timedelta(seconds=1):
                raise InvalidRequest(field, f"{field} must be at least 1 second")

    def pool(self, cluster: str) -> NodePool:
        found = POOL_SHAPE.match(self.shape)
        assert found is not None  # the field's pattern is POOL_SHAPE's
        shape = Shape(found["model"], int(found["memory"]), int(found["gpus"]))
        if shape.gpus_per_node == 0:
            raise InvalidRequest("shape", f"shape {self.shape!r} has no GPUs")
        return NodePool(
            cluster,
            self.name,
            shape,
            self.min_nodes,
            self.max_nodes,
            self.scale_up_delay,
            self.scale_down_idle,
            self.provisioning_class,
        )


class Reason(Body):
    """Body of approve, deny, release and cancel: an optional reason for the audit log."""

    reason: ReasonText = ""


def parse_user_list(value: Any, field: str) -> tuple[str, ...]:
    """User names, normalised as the hub does (``Bob`` is ``bob``), each once."""
    if not isinstance(value, list | tuple) or len(value) > 1000:
        raise InvalidRequest(field, f"{field} must be a list of at most 1000 user names")
    return tuple(dict.fromkeys(normalize_user_name(name, field) for name in value))


def parse_namespaces(value: Any, field: str) -> dict[str, tuple[str, ...]]:
    """``{cluster: [namespace, ...]}``, names as Kubernetes allows them."""
    if not isinstance(value, Mapping):
        raise InvalidRequest(field, f"{field} must be an object of cluster name to namespace list")
    namespaces = {}
    for cluster, names in value.items():
        where = f"{field}.{cluster}"
        if len(cluster) > 100 or not re.fullmatch(TEXT_PATTERN, cluster):
            raise InvalidRequest(where, f"{where}: a cluster name is at most 100 characters, none of them control")
        if not isinstance(names, list | tuple) or not names:
            raise InvalidRequest(where, f"{where} must be a non-empty list of namespace names")
        for name in names:
            if not isinstance(name, str):
                raise InvalidRequest(where, f"{where} must list namespace names (strings)")
            check_slice_name(name, where)
        namespaces[cluster] = tuple(names)
        if len(set(namespaces[cluster])) != len(names):
            raise InvalidRequest(where, f"{where} lists a namespace more than once")
    return namespaces


class QuotaBody(Body):
    max_gpus: Annotated[int | None, Field(ge=1, le=100_000, description="GPUs held at once"), Whole] = None
    max_gpu_hours: Annotated[Amount, Field(description="GPU-hours per rolling week (7 days)")] = None
    max_cost_month: Annotated[
        Amount, Field(description="cost per calendar month (UTC) at the prices; over it needs approval")
    ] = None


class PolicyBody(Body):
    max_duration: OptionalDuration = None
    max_priority: Priority = PRIORITY_MAX
    auto_approve_max_gpus: Annotated[int | None, Field(ge=1, le=100_000), Whole] = None
    max_active_gprs: Annotated[int, Field(ge=1, le=1000), Whole] = 1
    restart_servers: bool = False
    reject_over_limits: Annotated[bool, Field(description="reject over-limit GPRs instead of asking an admin")] = False
    eviction: Annotated[
        Literal[EVICTION_MODES],  # type: ignore[valid-type]
        Field(
            description="ending lower-priority preemptible GPRs for this slice's GPRs: "
            "auto, confirm (an admin confirms) or off",
        ),
    ] = "confirm"
    requeue_evicted: Annotated[bool, Field(description="an evicted GPR of this slice is queued again")] = True
    share: Annotated[Amount, Field(description="fair-share weight; null: max_gpus, else 1")] = None
    idle_timeout: Annotated[OptionalDuration, Field(description="default idle timeout of the slice's GPRs")] = None
    max_idle_timeout: Annotated[OptionalDuration, Field(description="longest idle timeout members may ask for")] = None
    bind_failure: Annotated[
        Literal[BIND_FAILURES],  # type: ignore[valid-type]
        Field(description="a GPR whose nodes fail their pre-checks: fail, or move (queued again for other nodes)"),
    ] = "fail"
    remediation: Annotated[
        Literal[REMEDIATIONS],  # type: ignore[valid-type]
        Field(
            description="a GPU failing in a provisioned GPR: replace its node's GPUs by a healthy node's for the "
            "rest of the window, notify its holders only, or off"
        ),
    ] = "replace"
    maintenance_crossing: Annotated[
        Literal[MAINTENANCE_CROSSINGS],  # type: ignore[valid-type]
        Field(
            description="a GPR whose window runs past a maintenance planned on its node: ask (an admin decides), "
            "shorten (it ends when the maintenance starts), move (to a healthy node then, else it ends)"
        ),
    ] = "ask"
    auto_gpr: Annotated[
        TemplateName | None,
        Field(
            description="template a GPR is filed from when a member starts a server asking for GPUs "
            "(or a GPU pod is made in its namespace) while the slice has none; null: none is filed"
        ),
    ] = None
    home_volume_size: Annotated[
        str | None,
        Field(
            pattern=QUANTITY_PATTERN,
            max_length=32,
            description="Kubernetes: size of each member's home volume in the slice (e.g. 10Gi); null: none",
        ),
    ] = DEFAULT_HOME_VOLUME_SIZE
    home_volume_class: Annotated[
        str | None,
        Field(
            pattern=DNS_SUBDOMAIN_PATTERN,
            max_length=253,
            description="Kubernetes: storage class of the home volumes; null: the cluster's default",
        ),
    ] = None
    gpu_sharing: Annotated[
        bool,
        Field(description="members may ask for a share of a time-sliced GPU (gpu_share), shared with such slices"),
    ] = False


if TYPE_CHECKING:  # made by create_model, which type checkers cannot follow: the bodies' fields, each optional
    QuotaPatch = QuotaBody
    PolicyPatch = PolicyBody
else:
    QuotaPatch = _patch(QuotaBody)
    PolicyPatch = _patch(PolicyBody)
Namespaces = Annotated[
    dict[str, tuple[str, ...]],
    BeforeValidator(parsed(parse_namespaces)),
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"maxLength": 100, "pattern": TEXT_PATTERN},
            "additionalProperties": {
                "type": "array",
                "items": {"type": "string", "pattern": SLICE_NAME_PATTERN, "maxLength": 63},
                "minItems": 1,
                "uniqueItems": True,
            },
        }
    ),
]


ClusterNames = Annotated[
    tuple[Annotated[str, Field(min_length=1, max_length=100, pattern=TEXT_PATTERN)], ...],
    Field(max_length=100),
    BeforeValidator(lambda value: tuple(value) if isinstance(value, list) else value),
]
Members = Annotated[
    tuple[str, ...],
    BeforeValidator(parsed(parse_user_list)),
    WithJsonSchema(
        {"type": "array", "items": {"type": "string", "pattern": f"^{USER_NAME_RE.pattern}$"}, "maxItems": 1000}
    ),
]


class ProjectCreate(Body):
    """POST /projects: a project, the hub group of its admins (made when missing), its quota and share."""

    name: SliceName
    display_name: Name = ""
    admin_group: Annotated[
        str | None,
        Field(pattern=GROUP_NAME_PATTERN, description="hub group of its admins; default: NAME-admins"),
    ] = None
    quota: Annotated[QuotaBody, Field(description="caps the sum of its slices")] = QuotaBody()
    share: Annotated[Amount, Field(description="fair-share weight among projects; null: max_gpus, else 1")] = None

    def to_project(self) -> Project:
        return Project(
            name=self.name,
            display_name=self.display_name,
            admin_group=self.admin_group or f"{self.name}-admins",
            share=self.share,
            **self.quota.given(),
        )


class ProjectUpdate(Body):
    """PATCH /projects/{name}: the fields given replace the project's; quota per key."""

    display_name: Name = MISSING
    quota: QuotaPatch = MISSING
    share: Annotated[Amount, Field(description="fair-share weight among projects")] = MISSING

    def apply(self, project: Project) -> Project:
        changes = {name: value for name, value in self.given().items() if name != "quota"}
        if self.quota is not MISSING:
            changes.update(self.quota.given())
        return dataclasses.replace(project, **changes)


class SliceCreate(Body):
    name: SliceName
    project: Annotated[SliceName, Field(description="the project it belongs to (GET /projects)")] = DEFAULT_PROJECT
    display_name: Name = ""
    group: Annotated[
        str | None,
        Field(pattern=GROUP_NAME_PATTERN, description="hub group of members; default: the slice name"),
    ] = None
    quota: QuotaBody = QuotaBody()
    policy: PolicyBody = PolicyBody()
    namespaces: Namespaces = {}
    members: Members = ()


class WorkspaceRequestCreate(Body):
    """POST /workspace-requests: a user asks a project's admins for a new workspace."""

    project: SliceName = DEFAULT_PROJECT
    name: SliceName
    display_name: Name = ""
    purpose: ReasonText = ""
    members: Annotated[Members, Field(description="besides the one who asks")] = ()
    quota: QuotaBody = QuotaBody()
    clusters: Annotated[
        ClusterNames, Field(description="Kubernetes clusters it gets a namespace on (named as the workspace)")
    ] = ()


class WorkspaceApproval(Body):
    """POST /workspace-requests/{id}/approve: optionally with edits to what was asked."""

    quota: QuotaBody = MISSING
    policy: PolicyBody = MISSING
    clusters: ClusterNames = MISSING
    reason: ReasonText = ""


class SliceUpdate(Body):
    """PATCH /slices/{name}: the fields given replace the slice's; quota and policy per key."""

    display_name: Name = MISSING
    quota: QuotaPatch = MISSING
    policy: PolicyPatch = MISSING
    namespaces: Namespaces = MISSING


def _as_tuple(value: Any) -> Any:
    """A JSON array as the tuple a frozen body holds (its items are checked after)."""
    return tuple(value) if isinstance(value, list) else value


class EvictionConfirm(Body):
    """POST queue/evictions: an admin confirms the planner's proposal for ``gpr_id``."""

    gpr_id: GPRId
    victims: Annotated[
        tuple[GPRId, ...],
        Field(min_length=1, max_length=1000, json_schema_extra={"uniqueItems": True}),
        BeforeValidator(_as_tuple),
    ]

    def check(self) -> None:
        if len(set(self.victims)) != len(self.victims):
            raise InvalidRequest("victims", "victims lists a GPR more than once")


def parse_prices(value: Any, _field: str) -> dict[str, float]:
    """``{shape name: price per GPU-hour}``; a refusal names the shape at fault."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("body", "the body must be an object of shape name to price per GPU-hour")
    if len(value) > 1000:
        raise InvalidRequest("body", "at most 1000 prices")
    prices = {}
    for shape, price in value.items():
        if not shape or len(shape) > 100 or not re.fullmatch(TEXT_PATTERN, shape):
            raise InvalidRequest(
                shape or "body", f"{shape!r} is not a shape name (1 to 100 characters, none of them control)"
            )
        if isinstance(price, bool) or not isinstance(price, int | float) or not 0 <= price <= AMOUNT_MAX:
            raise InvalidRequest(
                shape, f"the price of {shape} must be a number from 0 to {AMOUNT_MAX:g} per GPU-hour, not {price!r}"
            )
        prices[shape] = float(price)
    return prices


class PriceTable(RootModel):
    """PUT /clusters/{name}/prices: every price of the cluster, per shape as GET /inventory names it."""

    model_config = ConfigDict(frozen=True)
    root: Annotated[
        dict[str, float],
        BeforeValidator(parsed(parse_prices)),
        WithJsonSchema(
            {
                "type": "object",
                "propertyNames": {"minLength": 1, "maxLength": 100, "pattern": TEXT_PATTERN},
                "additionalProperties": {"type": "number", "minimum": 0, "maximum": AMOUNT_MAX},
                "maxProperties": 1000,
                "description": 'price per GPU-hour of each shape, e.g. {"H100-80GB x8": 4.5}',
            }
        ),
    ]

    def check(self) -> None:
        """Each price was checked as it was read."""


class ServerStart(Body):
    """PUT servers/{user}[/{server}]: the slice a starting server belongs to, and the GPUs it asks for
    (when the spawn form asks: with none held, the slice's auto_gpr files a GPR) on which cluster."""

    slice: SliceName
    gpus: Annotated[
        int | None,
        Field(ge=0, le=100_000, description="GPUs the server asks for; null: it does not say (no GPR is filed)"),
        Whole,
    ] = None
    cluster: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=100,
            pattern=TEXT_PATTERN,
            description="where the server runs (as GET /clusters names it); null: this host",
        ),
    ] = None


# Kubernetes label selector syntax (equality- and set-based requirements, comma-separated).
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}"
# Spaces only between the parts: selectors hold no control characters (TEXT_PATTERN). Each run of
# spaces has one place in a match (a part never starts or ends with a space; an empty value takes no
# space), so a selector that almost matches is refused in time linear in its parts, not exponential
# (one of 1,000 characters took the service's loop for minutes: issue 53's fuzzing).
_SET = rf"(?: *(?:{_LABEL_NAME} *)?)(?:,(?: *(?:{_LABEL_NAME} *)?))*"
_REQUIREMENT = rf" *(?:! *{_LABEL_KEY}|{_LABEL_KEY}(?: *(?:==|=|!=)(?: *{_LABEL_NAME})?| +(?:in|notin) *\({_SET}\))?) *"
LABEL_SELECTOR_RE = re.compile(rf"{_REQUIREMENT}(?:,{_REQUIREMENT})*")


def parse_label_selector(value: Any, field: str) -> str:
    if not LABEL_SELECTOR_RE.fullmatch(value):
        raise InvalidRequest(
            field, f"{field} {value[:80]!r} is not a Kubernetes label selector (like 'egs.io/slice,pool in (a,b)')"
        )
    return value.strip()


def parse_exit_grace(value: Any, field: str) -> timedelta:
    grace = _parse_duration(value, field)
    if grace > EXIT_GRACE_MAX:
        raise InvalidRequest(field, f"{field} must be at most a day")
    return grace


class ClusterCreate(Body):
    """POST /clusters, and each item of ``EGSService.clusters``: a Kubernetes cluster reached by a
    kubeconfig file on the service's host (its ``context``, else its current context), or by the
    ServiceAccount of the pod the service runs in (``in_cluster``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "required": ["in_cluster"],
                    "properties": {
                        "in_cluster": {"const": True},
                        "kubeconfig": {"type": "null"},
                        "context": {"type": "null"},
                    },
                },
                {
                    "allOf": [_given("kubeconfig", "string"), {"properties": {"kubeconfig": {"pattern": "^/"}}}],
                    "properties": {"in_cluster": {"const": False}, "context": {"minLength": 1}},
                },
            ]
        }
    )

    name: SliceName
    kubeconfig: Annotated[
        str | None,
        Field(max_length=PATH_MAX, pattern=TEXT_PATTERN, description="absolute path on the service's host"),
    ] = None
    context: Annotated[
        str | None, Field(max_length=253, pattern=TEXT_PATTERN, description="default: the file's current-context")
    ] = None
    in_cluster: bool = False
    project: Annotated[
        SliceName,
        Field(description="the project holding it: the default project's serve every project, another's only its own"),
    ] = DEFAULT_PROJECT
    node_selector: Annotated[
        str,
        Field(
            max_length=1000,
            pattern=TEXT_PATTERN,
            description="label selector of the GPU nodes egs-hub manages there",
        ),
        AfterValidator(parsed(parse_label_selector)),
        WithJsonSchema(
            {
                "type": "string",
                "maxLength": 1000,
                "pattern": f"^{LABEL_SELECTOR_RE.pattern}$",
                "description": "label selector of the GPU nodes egs-hub manages there",
            }
        ),
    ] = "egs.io/slice"
    exit_grace: Annotated[
        timedelta,
        BeforeValidator(parsed(_typed(timedelta, parse_exit_grace))),
        WithJsonSchema(
            {
                "oneOf": [{**DURATION_SCHEMA["oneOf"][0], "maximum": 86400}, DURATION_SCHEMA["oneOf"][1]],
                "description": "how long a slice's pods may take to leave a node before what remains is deleted",
            }
        ),
    ] = timedelta(minutes=5)

    def check(self) -> None:
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


class ClusterUpdate(Body):
    """PATCH /clusters/{name}: move a cluster (of any origin) to another project."""

    project: Annotated[SliceName, Field(description="the project that holds it from now on")]


CHECK_KINDS = ("gpu-health", "nccl", "rdma", "pvc", "custom")
CheckKind = Literal["gpu-health", "nccl", "rdma", "pvc", "custom"]
CheckPhase = Literal["entry", "exit"]
# The thresholds each kind of check reads (core/checks.py judges with them), with what each means.
CHECK_THRESHOLDS: dict[str, dict[str, str]] = {
    "gpu-health": {
        "max_temperature_c": "hottest a GPU may be (default 85)",
        "max_ecc_errors": "uncorrected ECC errors since the driver loaded (default 0)",
        "max_memory_left_mib": "at exit: memory still in use on a GPU (default 1024)",
    },
    "nccl": {
        "min_busbw_gbps": "the all-reduce's average bus bandwidth, GB/s, at least",
        "max_latency_us": "the smallest message's all-reduce time, microseconds, at most",
    },
    "rdma": {"min_rate_gbps": "each active port's rate, Gb/s, at least", "min_ports": "active ports, at least"},
    "pvc": {},
    "custom": {},
}
CHECK_TIMEOUT_MAX = timedelta(hours=1)


def parse_thresholds(value: Any, field: str) -> dict[str, float]:
    if not isinstance(value, Mapping) or len(value) > 20:
        raise InvalidRequest(field, f"{field} must be a JSON object of at most 20 numbers")
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number <= AMOUNT_MAX:
            raise InvalidRequest(f"{field}.{name}", f"{field}.{name} must be a number from 0 to {AMOUNT_MAX:g}")
    return {name: float(number) for name, number in value.items()}


def _check_kind_rule(kind: str, thresholds: Mapping[str, str]) -> dict:
    """What a check of ``kind`` takes (CheckSpec.check): its thresholds, a command, an image."""
    properties: dict[str, Any] = {
        "kind": {"const": kind},
        "thresholds": {"propertyNames": {"enum": list(thresholds)}} if thresholds else {"maxProperties": 0},
    }
    if kind in ("gpu-health", "pvc"):
        properties["command"] = {"type": "null"}
    if kind not in ("nccl", "custom"):
        properties["image"] = {"type": "null"}
    if kind == "custom":
        properties["command"] = {"type": "array", "minItems": 1}
        return {"properties": properties, "required": ["command"]}
    return {"properties": properties}


class CheckSpec(Body):
    """One check of a checklist: what runs, when (at entry, before a GPR's nodes are bound; at exit,
    after they are returned), how long it may take, and what counts as a pass."""

    model_config = ConfigDict(
        json_schema_extra={"anyOf": [_check_kind_rule(kind, names) for kind, names in CHECK_THRESHOLDS.items()]}
    )

    name: Annotated[str, Field(pattern=SLICE_NAME_PATTERN, max_length=63, description="unique in its list")]
    kind: Annotated[
        CheckKind,
        Field(
            description="gpu-health: the GPUs' telemetry (XID, ECC, temperature; at exit no process and memory "
            "freed); nccl: an all-reduce across the GPR's GPUs (nccl-tests); rdma: InfiniBand/RoCE ports "
            "active; pvc: the slice's volume claims bound and usable on the node; custom: a command that "
            "passes by exiting 0"
        ),
    ]
    at: Annotated[
        tuple[CheckPhase, ...],
        Field(min_length=1, max_length=2, description="entry, exit or both", json_schema_extra={"uniqueItems": True}),
        BeforeValidator(_as_tuple),
    ] = ("entry",)
    timeout: Annotated[
        Duration,
        Field(description="longest it may run, at most 1h; it fails then"),
        WithJsonSchema(
            {
                "oneOf": [
                    {**DURATION_SCHEMA["oneOf"][0], "maximum": int(CHECK_TIMEOUT_MAX.total_seconds())},
                    DURATION_SCHEMA["oneOf"][1],
                ]
            }
        ),
    ] = timedelta(minutes=5)
    thresholds: Annotated[
        dict[str, float],
        BeforeValidator(parsed(parse_thresholds)),
        WithJsonSchema(
            {
                "type": "object",
                "additionalProperties": {"type": "number", "minimum": 0, "maximum": AMOUNT_MAX},
                "maxProperties": 20,
                "description": "limits by name, per kind: "
                + "; ".join(f"{kind}: {', '.join(names) or 'none'}" for kind, names in CHECK_THRESHOLDS.items()),
            }
        ),
    ] = {}
    command: Annotated[
        tuple[Annotated[str, Field(max_length=PATH_MAX, pattern=TEXT_PATTERN)], ...] | None,
        Field(
            max_length=100,
            description="the argument list it runs (custom: required; nccl and rdma: instead of all_reduce_perf "
            "and ibstat); {gpus} is replaced by the number of GPUs",
        ),
        BeforeValidator(_as_tuple),
    ] = None
    image: Annotated[
        str | None,
        Field(
            max_length=1000,
            pattern=r"^[^\s]+$",
            description="on Kubernetes: the container image a nccl or custom check runs in (a Job on the node)",
        ),
    ] = None

    def check(self) -> None:
        known = CHECK_THRESHOLDS[self.kind]
        for name in self.thresholds:
            if name not in known:
                raise InvalidRequest(
                    f"thresholds.{name}",
                    f"{self.kind} has no threshold {name!r}; its thresholds: {', '.join(known) or 'none'}",
                )
        if not self.timeout <= CHECK_TIMEOUT_MAX:
            raise InvalidRequest("timeout", "timeout must be at most 1h")
        if len(set(self.at)) != len(self.at):
            raise InvalidRequest("at", "at names entry and exit once each")
        if self.kind == "custom" and not self.command:
            raise InvalidRequest("command", "a custom check runs a command: give its argument list")
        if self.command is not None and self.kind in ("gpu-health", "pvc"):
            raise InvalidRequest("command", f"a {self.kind} check runs no command")
        if self.image is not None and self.kind not in ("nccl", "custom"):
            raise InvalidRequest("image", f"a {self.kind} check runs no image")


class ClusterChecks(Body):
    """PUT /clusters/{name}/checks: the cluster's checklist, replacing the one it has."""

    checks: Annotated[tuple[CheckSpec, ...], Field(max_length=50), BeforeValidator(_as_tuple)]

    def check(self) -> None:
        seen = set()
        for i, spec in enumerate(self.checks):
            try:
                spec.check()
            except InvalidRequest as e:
                raise InvalidRequest(f"checks.{i}.{e.field}", f"checks.{i}: {e}") from None
            if spec.name in seen:
                raise InvalidRequest(f"checks.{i}.name", f"checks.{i}: a second check named {spec.name!r}")
            seen.add(spec.name)


# Parsing and schemas


B = TypeVar("B", bound=Body)


def body_required(cls: type[BaseModel]) -> bool:
    """Whether a request must have a body of ``cls``: when a field of it is required (a table that
    replaces everything has one, its root). A body whose every field may be left out may be left out."""
    return any(info.is_required() for info in cls.model_fields.values())


def parse_body(cls: type[B], body: object) -> B:
    """``cls`` from a decoded JSON body (MISSING: the request had none), or InvalidRequest naming the
    first field that is wrong."""
    if body is MISSING:
        if body_required(cls):
            raise InvalidRequest("body", "the request needs a body: a JSON object (see openapi.json)")
        body = {}
    if not isinstance(body, Mapping):
        raise InvalidRequest("body", "the request body must be a JSON object")
    try:
        made = cls.model_validate(body)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        # An unknown field is named first: the rest of the body may be meant for another field.
        first = next((error for error in errors if error["type"] == "extra_forbidden"), errors[0])
        raise _refusal(cls, first) from None
    made.check()
    return made


def _refusal(cls: type[Body], error: Mapping[str, Any]) -> InvalidRequest:
    """One pydantic error as the sentence the API answers."""
    field = ".".join(str(part) for part in error["loc"])
    kind, value, context = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "egs":
        return InvalidRequest(context["field"].replace(_FIELD, field), context["message"].replace(_FIELD, field))
    if kind == "extra_forbidden":
        known = ", ".join(_model_at(cls, error["loc"][:-1]).model_fields)
        return InvalidRequest(field, f"unknown field {field!r}; known fields: {known}")
    if kind == "missing":
        return InvalidRequest(field, f"{field} is required")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return InvalidRequest(field, f"{field} must be a JSON object")
    if kind == "bool_type":
        return InvalidRequest(field, f"{field} must be true or false")
    if kind == "string_type":
        return InvalidRequest(field, f"{field} must be a string")
    if kind == "string_too_long":
        return InvalidRequest(field, f"{field} must be at most {context['max_length']} characters")
    if kind == "string_pattern_mismatch":
        meaning = PATTERN_MEANINGS.get(context["pattern"])
        if meaning is None:
            return InvalidRequest(field, f"{field} must not contain control characters")
        return InvalidRequest(field, f"{field} must be {meaning}, not {value!r}")
    bounds = _bounds(cls, error["loc"])
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return InvalidRequest(field, f"{field} must be a whole number from {bounds['ge']} to {bounds['le']}")
    if kind in ("greater_than_equal", "less_than_equal") and "ge" in bounds:
        return InvalidRequest(field, f"{field} must be from {bounds['ge']} to {bounds['le']}, not {value}")
    if "lt" in bounds and kind in ("float_type", "float_parsing", "finite_number", "greater_than", "less_than"):
        above, below = bounds["gt"], bounds["lt"]
        return InvalidRequest(field, f"{field} must be a number above {above:g} and below {below:g}, not {value!r}")
    if kind in ("float_type", "float_parsing", "finite_number"):
        return InvalidRequest(field, f"{field} must be a number above 0 and at most {bounds['le']:g}")
    if kind in ("greater_than", "less_than_equal"):
        return InvalidRequest(field, f"{field} must be above 0 and at most {bounds['le']:g}, not {value}")
    if kind == "literal_error":
        choices = get_args(_type_at(cls, error["loc"])[0])
        return InvalidRequest(field, f"{field} must be one of {', '.join(map(repr, choices))}, not {value!r}")
    if kind in ("tuple_type", "list_type", "too_short", "too_long"):
        low, high = bounds.get("min_length", 0), bounds["max_length"]
        return InvalidRequest(field, f"{field} must be a list of {low} to {high} items")
    return InvalidRequest(field, f"{field}: {error['msg']}")


def _model_at(cls: type[Body], loc: tuple) -> type[Body]:
    """The body model at ``loc`` within ``cls`` (a nested body, an item of a list of them)."""
    return _type_at(cls, loc)[0]


def _type_at(cls: type[Body], loc: tuple) -> tuple[Any, list]:
    """The type of the value at ``loc`` (field names, list indexes, object keys) in a body of ``cls``,
    without its ``Annotated`` and ``None`` parts, and the constraints on it: the field's own, or, at an
    item of a list or object, those of the item type."""
    annotation: Any = cls
    metadata: list = []
    for part in loc:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if part not in annotation.model_fields:
                break
            info = annotation.model_fields[part]
            annotation, metadata = info.annotation, list(info.metadata)
        elif getattr(annotation, "__origin__", None) in (tuple, list, dict):
            annotation, metadata = get_args(annotation)[-1 if annotation.__origin__ is dict else 0], []
        else:  # a union's member tag, or a value a parser checks
            break
        metadata += _metadata(annotation)
        annotation = _bare(annotation)
    return annotation, metadata


def _bare(annotation: Any) -> Any:
    """``Annotated[T, ...]`` and ``T | None`` as ``T``."""
    while hasattr(annotation, "__metadata__"):
        annotation = annotation.__origin__
    if isinstance(annotation, UnionType) or getattr(annotation, "__origin__", None) is Union:
        others = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _bare(others[0]) if len(others) == 1 else annotation
    return annotation


def _bounds(cls: type[Body], loc: tuple) -> dict[str, Any]:
    """The bounds (ge, le, gt, lt, min_length, max_length) of the value at ``loc``."""
    keys = ("ge", "le", "gt", "lt", "min_length", "max_length")
    return {key: getattr(m, key) for m in _type_at(cls, loc)[1] for key in keys if getattr(m, key, None) is not None}


def _metadata(annotation: Any) -> list:
    """The constraints inside a type: ``Annotated[int, Field(ge=1)] | None`` has ``Ge(1)``."""
    if hasattr(annotation, "__metadata__"):  # Annotated[...]
        found = [m for item in annotation.__metadata__ for m in getattr(item, "metadata", [item])]
        return found + _metadata(annotation.__origin__)
    if isinstance(annotation, UnionType) or getattr(annotation, "__origin__", None) is Union:
        return [m for arg in get_args(annotation) for m in _metadata(arg)]
    return []


class _Schema(GenerateJsonSchema):
    """JSON schemas for the OpenAPI document: no titles, no MISSING defaults."""

    def field_title_should_be_set(self, schema) -> bool:
        return False

    def default_schema(self, schema):
        default = schema.get("default")
        if default is MISSING:
            return self.generate_inner(schema["schema"])
        if isinstance(default, timedelta):  # as the API writes durations: seconds
            return {**self.generate_inner(schema["schema"]), "default": int(default.total_seconds())}
        return super().default_schema(schema)


MAX_ADDED_NODES = 2000  # nodes a what-if may add in all: bench_planner's inventory


class NodeChange(Body):
    """Nodes of one shape added to or removed from a what-if capacity plan."""

    shape: Annotated[
        str,
        Field(
            min_length=1,
            max_length=80,
            pattern=TEXT_PATTERN,
            description='a shape, GPU type or model as a GPR names one ("H100-80GB x8", "H100"); a shape no '
            'node has is named in full, "MODEL-MEMGB xG"',
        ),
    ]
    count: Annotated[int, Field(ge=1, le=MAX_ADDED_NODES), Whole]
    price: Annotated[
        float | None,
        Field(ge=0, le=AMOUNT_MAX, description="price per GPU-hour of this shape's nodes (default: the cluster's)"),
    ] = None


class CapacityPlanCreate(Body):
    """POST /capacity-plans: replay the GPRs the service recorded over ``since`` through the planner, on
    its nodes as they are and with ``add_nodes`` / ``remove_nodes`` (sim/history.py)."""

    since: Annotated[
        Duration,
        Field(description="how far back to replay; at most 400 days"),
        WithJsonSchema(
            {"oneOf": [{**DURATION_SCHEMA["oneOf"][0], "maximum": 400 * 86400}, DURATION_SCHEMA["oneOf"][1]]}
        ),
    ] = timedelta(days=30)
    add_nodes: Annotated[tuple[NodeChange, ...], Field(max_length=20), BeforeValidator(_as_tuple)] = ()
    remove_nodes: Annotated[tuple[NodeChange, ...], Field(max_length=20), BeforeValidator(_as_tuple)] = ()

    def check(self) -> None:
        if self.since > timedelta(days=400):
            raise InvalidRequest("since", "since must be at most 400 days")
        added = sum(change.count for change in self.add_nodes)
        if added > MAX_ADDED_NODES:
            raise InvalidRequest(
                "add_nodes", f"add_nodes adds {added} nodes; at most {MAX_ADDED_NODES} (the planner's measured scale)"
            )


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
ARG_MAX = 4096


def _parse_arguments(value: Any, field: str) -> tuple[str, ...]:
    """An argument list: at most 100 strings of at most ARG_MAX characters, none holding NUL."""
    if not isinstance(value, list | tuple) or len(value) > 100:
        raise InvalidRequest(field, f'{field} must be a list of at most 100 arguments, like ["python", "serve.py"]')
    for i, arg in enumerate(value):
        if not isinstance(arg, str) or len(arg) > ARG_MAX or "\x00" in arg:
            raise InvalidRequest(f"{field}[{i}]", f"{field}[{i}] must be text of at most {ARG_MAX} characters")
    return tuple(value)


def _parse_env(value: Any, field: str) -> dict[str, str]:
    """Environment variables: names as a shell allows them, values text without NUL."""
    if not isinstance(value, Mapping) or len(value) > 100:
        raise InvalidRequest(field, f'{field} must be an object of at most 100 variables, like {{"HF_HOME": "/data"}}')
    for name, text in value.items():
        if not ENV_NAME.fullmatch(name):
            raise InvalidRequest(
                f"{field}.{name}", f"{name!r} is not an environment variable name (letters, digits, _)"
            )
        if not isinstance(text, str) or len(text) > ARG_MAX or "\x00" in text:
            raise InvalidRequest(f"{field}.{name}", f"{field}.{name} must be text of at most {ARG_MAX} characters")
    return dict(value)


Arguments = Annotated[
    tuple[str, ...],
    BeforeValidator(parsed(_parse_arguments)),
    WithJsonSchema(
        {"type": "array", "items": {"type": "string", "maxLength": ARG_MAX, "pattern": "^[^\x00]*$"}, "maxItems": 100}
    ),
]
Environment = Annotated[
    dict[str, str],
    BeforeValidator(parsed(_parse_env)),
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": ENV_NAME.pattern},
            "additionalProperties": {"type": "string", "maxLength": ARG_MAX, "pattern": "^[^\x00]*$"},
            "maxProperties": 100,
        }
    ),
]
Replicas = Annotated[int, Field(ge=0, le=100), Whole]
HealthPath = Annotated[str | None, Field(max_length=1000, pattern=r"^/[^\x00-\x20]*$")]


# As _text(PATH_MAX) and _text(500), written out for type checkers.
_PathText = Annotated[str, Field(max_length=PATH_MAX, pattern=TEXT_PATTERN), _STRIPPED]
_ImageText = Annotated[str, Field(max_length=500, pattern=TEXT_PATTERN), _STRIPPED]


class EndpointCreate(Body):
    """POST /endpoints: serve a model from the slice's GPUs (core/endpoints.py); each replica is a GPR
    of ``gpus`` (or of ``template``) for ``duration``, renewed while the endpoint wants it."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {"not": {"allOf": [_given("gpus", "integer"), _given("template", "string")]}},
                {
                    "anyOf": [
                        {
                            "properties": {"runtime": {"const": "command"}, "command": {"minItems": 1}},
                            "required": ["command"],
                        },
                        {
                            "properties": {
                                "runtime": {"not": {"const": "command"}},
                                "model": {"minLength": 1, "pattern": r"\S"},
                            },
                            "required": ["model"],
                        },
                    ]
                },
            ]
        }
    )

    slice: SliceName
    name: Annotated[SliceName, Field(description="the endpoint's name in its slice (a DNS label)")]
    runtime: Literal[RUNTIMES]  # type: ignore[valid-type]
    model: Annotated[_PathText, Field(description="a Hugging Face model id, or a path in the workspace's storage")] = ""
    gpus: Annotated[Count | None, Field(description="GPUs per replica; left out: the template's, else 1")] = None
    template: Annotated[TemplateName | None, Field(description="a GPR template for each replica's GPR")] = None
    cluster: Annotated[
        Selector,
        Field(description="the cluster it runs on, kept; left out: this host's GPUs, else the only Kubernetes cluster"),
    ] = None
    command: Annotated[
        Arguments, Field(description="runtime command: the server's argument list; {port} stands for its port")
    ] = ()
    image: Annotated[_ImageText | None, Field(description="the container image on Kubernetes")] = None
    args: Annotated[Arguments, Field(description="more arguments for the runtime's server")] = ()
    env: Environment = {}
    min_replicas: Replicas = 0
    max_replicas: Annotated[int, Field(ge=1, le=100), Whole] = 1
    idle_timeout: Annotated[
        Duration, Field(description="with no request for this long, it scales to min_replicas (0: none)")
    ] = DEFAULT_IDLE_TIMEOUT
    duration: Annotated[Duration, Field(description="each replica GPR's window")] = DEFAULT_DURATION
    target_concurrency: Annotated[
        int, Field(ge=1, le=10_000, description="requests in flight per replica before another is wanted"), Whole
    ] = DEFAULT_TARGET_CONCURRENCY
    health_path: Annotated[HealthPath, Field(description="answers 200 once ready (default: the runtime's)")] = None
    metrics_path: Annotated[
        HealthPath,
        Field(
            description="Prometheus metrics with vllm:num_requests_waiting, which scale it too (default: vllm's "
            "/metrics; none for other runtimes)"
        ),
    ] = None

    def check(self) -> None:
        check_endpoint(self.runtime, self.model, self.command, self.gpus, self.template)
        check_bounds(self.min_replicas, self.max_replicas)

    def to_spec(self) -> EndpointSpec:
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields["health_path"] = self.health_path or HEALTH_PATHS[self.runtime]
        fields["metrics_path"] = self.metrics_path or METRICS_PATHS.get(self.runtime)
        if self.gpus is None and self.template is None:
            fields["gpus"] = 1
        return EndpointSpec(**fields)


def check_endpoint(runtime: str, model: str, command: tuple[str, ...], gpus: Any, template: Any) -> None:
    if runtime == "command" and not command:
        raise InvalidRequest(
            "command", "runtime command needs command: the argument list of an HTTP server, with {port}"
        )
    if runtime != "command" and not model:
        raise InvalidRequest("model", f"runtime {runtime} needs model: a Hugging Face id or a path in your storage")
    if gpus is not None and template is not None:
        raise InvalidRequest("gpus", "give gpus or a template, not both")


class EndpointUpdate(_patch(EndpointCreate, omit=("slice", "name", "runtime"))):  # type: ignore[misc]  # a base made by create_model
    """PATCH /endpoints/{slice}/{name}: bounds, idle time and load apply at once; a new model, command,
    arguments, environment or health path restart the servers; GPUs, template and duration apply to the
    replicas filed from then on. Its cluster is the one it was created on (another is refused)."""

    def check(self) -> None:
        given = self.given()
        if "min_replicas" in given and "max_replicas" in given:
            check_bounds(self.min_replicas, self.max_replicas)

    def apply(self, spec: EndpointSpec) -> EndpointSpec:
        changes = self.given()
        if changes.get("gpus") is not None:
            changes["template"] = None
        elif changes.get("template") is not None:
            changes["gpus"] = None
        if "health_path" in changes:
            changes["health_path"] = changes["health_path"] or HEALTH_PATHS[spec.runtime]
        if "metrics_path" in changes:
            changes["metrics_path"] = changes["metrics_path"] or METRICS_PATHS.get(spec.runtime)
        updated = dataclasses.replace(spec, **changes)
        if updated.gpus is None and updated.template is None:
            updated = dataclasses.replace(updated, gpus=1)
        check_endpoint(updated.runtime, updated.model, updated.command, updated.gpus, updated.template)
        check_bounds(updated.min_replicas, updated.max_replicas)
        return updated


class EndpointScale(Body):
    """POST /endpoints/{slice}/{name}/scale: this many replicas now, kept for the endpoint's idle_timeout
    at least, then following the load."""

    replicas: Replicas


BODIES: tuple[type[BaseModel], ...] = (
    GPRCreate,
    GPRUpdate,
    WaitTimeQuery,
    TemplateCreate,
    TemplateUpdate,
    PriceTable,
    SliceCreate,
    SliceUpdate,
    ProjectCreate,
    ProjectUpdate,
    WorkspaceRequestCreate,
    WorkspaceApproval,
    ClusterCreate,
    ClusterUpdate,
    MaintenanceCreate,
    LayoutChangeCreate,
    PoolCreate,
    ClusterChecks,
    Reason,
    EvictionConfirm,
    ServerStart,
    CapacityPlanCreate,
    EndpointCreate,
    EndpointUpdate,
    EndpointScale,
)


def body_schemas(ref_template: str) -> dict[str, dict]:
    """The JSON schema of every body model and the models nested in them, by name;
    references between them follow ``ref_template`` (``"#/components/schemas/{model}"``)."""
    _, schemas = models_json_schema(
        [(cls, "validation") for cls in BODIES], ref_template=ref_template, schema_generator=_Schema
    )
    return {name: {k: v for k, v in schema.items() if k != "title"} for name, schema in schemas["$defs"].items()}
