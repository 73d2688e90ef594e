"""Any JSON value in any field of any request body: parsed, or refused naming the field.

Every model the API parses a body with (``BODIES``), from one valid body each, with each field
(nested bodies' fields and list items included) replaced by a fixed set of awkward JSON values,
and by arbitrary JSON in any number of fields at once. Whatever comes in, ``parse_body`` either
returns the model or raises InvalidRequest whose field is one the body has: never another
exception, which the API would answer with a 500.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from types import UnionType
from typing import Any, Union, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, RootModel

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.requests import BODIES, parse_body

# One valid body per model, giving every nested body and list a first item, so each nested field
# has a place to be replaced.
CHECK = {"name": "gpu", "kind": "custom", "at": ["entry"], "timeout": 60, "thresholds": {}, "command": ["true"]}
QUOTA = {"max_gpus": 8, "max_gpu_hours": 100.0, "max_cost_month": 1000.0}
POLICY = {"max_duration": "1d", "eviction": "auto", "share": 2.0, "idle_timeout": 3600, "home_volume_size": "10Gi"}
ASK = {"slice": "team", "duration": "2h", "gpus": 2, "priority": 150, "shape": "H100", "cluster": "local"}
VALID: dict[type, Any] = {
    "GPRCreate": {**ASK, "name": "train", "idle_timeout": "30m", "preemptible": False},
    "GPRUpdate": {"duration": 3600, "gpus": 1, "name": "x", "start_after": "2030-01-01T00:00:00Z"},
    "WaitTimeQuery": ASK,
    "TemplateCreate": {"name": "t", "description": "d", "gpus": 1, "duration": "1h", "priority": 100},
    "TemplateUpdate": {"description": "d", "gpus": 2},
    "PriceTable": {"H100-80GB x8": 4.5},
    "SliceCreate": {
        "name": "team",
        "display_name": "Team",
        "quota": QUOTA,
        "policy": POLICY,
        "namespaces": {"c1": ["team"]},
        "members": ["alice"],
    },
    "SliceUpdate": {"display_name": "T", "quota": QUOTA, "policy": POLICY, "namespaces": {"c1": ["team"]}},
    "ProjectCreate": {"name": "p", "display_name": "P", "admin_group": "p-admins", "quota": QUOTA, "share": 1.0},
    "ProjectUpdate": {"display_name": "P", "quota": QUOTA, "share": 2.0},
    "WorkspaceRequestCreate": {"name": "w", "purpose": "x", "members": ["bob"], "quota": QUOTA, "clusters": ["c1"]},
    "WorkspaceApproval": {"quota": QUOTA, "policy": POLICY, "clusters": ["c1"], "reason": "ok"},
    "ClusterCreate": {"name": "c1", "kubeconfig": "/etc/kube", "context": "ctx", "exit_grace": "5m"},
    "ClusterUpdate": {"project": "p"},
    "MaintenanceCreate": {"start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z", "reason": "fw"},
    "LayoutChangeCreate": {"mig": {"1g.10gb": 7}, "mig_config": "all-1g.10gb", "reason": "r"},
    "PoolCreate": {"name": "pool", "shape": "H100-80GB x8", "max_nodes": 4, "scale_up_delay": "10m"},
    "ClusterChecks": {"checks": [CHECK, {**CHECK, "name": "nccl", "kind": "nccl", "thresholds": {}}]},
    "Reason": {"reason": "why"},
    "EvictionConfirm": {"gpr_id": 1, "victims": [2, 3]},
    "ServerStart": {"slice": "team", "gpus": 1, "cluster": "c1"},
    "CapacityPlanCreate": {
        "since": "7d",
        "add_nodes": [{"shape": "H100-80GB x8", "count": 2, "price": 3.0}],
        "remove_nodes": [{"shape": "H100", "count": 1}],
    },
    "EndpointCreate": {
        "slice": "team",
        "name": "llm",
        "runtime": "vllm",
        "model": "m",
        "gpus": 1,
        "args": ["--x"],
        "env": {"A": "b"},
        "max_replicas": 2,
    },
    "EndpointUpdate": {"model": "m", "env": {"A": "b"}, "max_replicas": 3},
    "EndpointScale": {"replicas": 2},
}
MODELS = {cls.__name__: cls for cls in BODIES}
AWKWARD = [
    None,
    True,
    0,
    -1,
    2.0,
    2.5,
    -0.0,
    2**63,
    -(2**70),
    1e308,
    "",
    "x",
    "\x00",
    "é" * 5000,
    "1h",
    "2030-01-01T00:00:00Z",
    [],
    [{}],
    [None],
    [[]],
    ["entry", "entry"],
    {},
    {"": {}},
    {"x": [1]},
    {"1g.10gb": [7]},
]


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The body model a field holds (directly, optionally, or as the items of a list), and whether
    it is a list of them."""
    while hasattr(annotation, "__metadata__"):
        annotation = annotation.__origin__
    if isinstance(annotation, UnionType) or get_origin(annotation) is Union:
        for arg in get_args(annotation):
            found = _nested_model(arg)
            if found[0] is not None:
                return found
        return None, False
    if get_origin(annotation) is tuple:
        model, _ = _nested_model(get_args(annotation)[0])
        return model, model is not None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def paths(cls: type[BaseModel], body: Any) -> Iterator[tuple]:
    """Every place in ``body`` (of model ``cls``) a value may be put: each field, each nested body's
    fields, the first item of each list and of each object."""
    if issubclass(cls, RootModel):
        yield ()
        yield from ((key,) for key in body)
        return
    for name, info in cls.model_fields.items():
        yield (name,)
        value = body.get(name)
        model, many = _nested_model(info.annotation)
        if model is not None and isinstance(value, dict if not many else list) and value:
            inner = value[0] if many else value
            prefix = (name, 0) if many else (name,)
            yield from (prefix + path for path in paths(model, inner))
        elif isinstance(value, list) and value:
            yield (name, 0)
        elif isinstance(value, dict) and value:
            yield (name, next(iter(value)))


def put(body: Any, path: tuple, value: Any) -> Any:
    if not path:
        return copy.deepcopy(value)
    changed = copy.deepcopy(body)
    place = changed
    for part in path[:-1]:
        place = place[part]
    place[path[-1]] = copy.deepcopy(value)
    return changed


def assert_parsed_or_refused(cls: type, body: Any) -> None:
    try:
        made = parse_body(cls, body)
    except InvalidRequest as refusal:
        assert str(refusal), "a refusal says what is wrong"
        named = {"body", *cls.model_fields, *(body if isinstance(body, dict) else ())}
        field = refusal.field
        assert any(field == key or field.startswith((f"{key}.", f"{key}[")) for key in named), f"{field!r}: {refusal}"
    else:
        assert isinstance(made, cls)


def test_every_body_model_has_a_valid_body():
    assert set(VALID) == set(MODELS)
    for name, body in VALID.items():
        assert isinstance(parse_body(MODELS[name], body), MODELS[name]), name


CASES = [(name, path) for name, body in VALID.items() for path in paths(MODELS[name], body)]


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{'.'.join(map(str, p)) or 'body'}" for n, p in CASES])
def test_an_awkward_value_anywhere_is_parsed_or_refused(name: str, path: tuple):
    cls = MODELS[name]
    for value in AWKWARD:
        assert_parsed_or_refused(cls, put(VALID[name], path, value))


def test_the_issue_53_checklist_is_refused_naming_the_field():
    """The body schemathesis found answered 500: a check phase that is an object."""
    body = {
        "checks": [
            {"at": [{}], "command": None, "image": None, "kind": "pvc", "name": "0", "thresholds": {}, "timeout": 300}
        ]
    }
    with pytest.raises(InvalidRequest) as refused:
        parse_body(MODELS["ClusterChecks"], body)
    assert refused.value.field == "checks.0.at.0"
    assert str(refused.value) == "checks.0.at.0 must be one of 'entry', 'exit', not {}"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def fuzzed_bodies(draw) -> tuple[type, Any]:
    name = draw(st.sampled_from(sorted(VALID)))
    body = VALID[name]
    places = list(paths(MODELS[name], body))
    for path in draw(st.lists(st.sampled_from(places), min_size=1, max_size=4, unique=True)):
        try:
            body = put(body, path, draw(JSON))
        except (KeyError, IndexError, TypeError):  # an earlier value replaced what this path went through
            continue
    return MODELS[name], body


@settings(max_examples=1000, deadline=None)
@given(fuzzed_bodies())
def test_arbitrary_json_in_any_fields_is_parsed_or_refused(case: tuple[type, Any]):
    assert_parsed_or_refused(*case)
