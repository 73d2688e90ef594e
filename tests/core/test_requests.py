"""Request bodies: parse_body over every body model, with the field each refusal names."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.model import PRIORITY_DEFAULT, GPRSpec
from egs_hub.core.requests import (
    MISSING,
    GPRCreate,
    GPRUpdate,
    PolicyBody,
    QuotaBody,
    Reason,
    SliceCreate,
    SliceUpdate,
    WaitTimeQuery,
    body_schemas,
    check_start_after,
    describe_horizon,
    parse_body,
)

GPR_BODY = {"slice": "team", "duration": "2h", "gpus": 2}


@dataclass(frozen=True)
class BodyCase:
    cls: type
    body: object
    want: dict = field(default_factory=dict)  # attribute (dotted for nested bodies) -> parsed value
    want_field: str | None = None  # the field InvalidRequest names; None when the body is accepted
    want_message: str = ""  # a piece of the refusal's message


def gpr_body(**changes) -> dict:
    """GPR_BODY with ``changes``; a change to ``...`` removes that key."""
    body = {**GPR_BODY, **changes}
    return {k: v for k, v in body.items() if v is not ...}


CASES = {
    # GPRCreate
    "gpr minimal gets defaults": BodyCase(
        GPRCreate,
        GPR_BODY,
        want={
            "slice": "team",
            "duration": timedelta(hours=2),
            "gpus": 2,
            "nodes": None,
            "name": "",
            "priority": PRIORITY_DEFAULT,
            "shape": None,
            "cluster": None,
            "start_after": None,
            "idle_timeout": None,
            "preemptible": True,
        },
    ),
    "gpr every field": BodyCase(
        GPRCreate,
        gpr_body(
            gpus=...,
            nodes=2,
            name=" train ",
            priority=300,
            shape="H100-80GB x8",
            cluster="c1",
            start_after="2026-11-22T16:00:00+02:00",
            idle_timeout=1800,
            preemptible=False,
            duration=3600,
        ),
        want={
            "nodes": 2,
            "gpus": None,
            "name": "train",
            "priority": 300,
            "shape": "H100-80GB x8",
            "start_after": datetime(2026, 11, 22, 14, tzinfo=UTC),
            "idle_timeout": timedelta(minutes=30),
            "preemptible": False,
            "duration": timedelta(hours=1),
        },
    ),
    "gpr lowest priority": BodyCase(GPRCreate, gpr_body(priority=1), want={"priority": 1}),
    "gpr null selectors": BodyCase(GPRCreate, gpr_body(shape=None, start_after=None), want={"shape": None}),
    "gpr body not an object": BodyCase(GPRCreate, [GPR_BODY], want_field="body", want_message="JSON object"),
    "gpr unknown field": BodyCase(GPRCreate, gpr_body(gpu=2), want_field="gpu", want_message="known fields:"),
    "gpr missing slice": BodyCase(GPRCreate, gpr_body(slice=...), want_field="slice", want_message="required"),
    "gpr missing duration": BodyCase(GPRCreate, gpr_body(duration=...), want_field="duration"),
    "gpr gpus and nodes": BodyCase(GPRCreate, gpr_body(nodes=1), want_field="gpus", want_message="not both"),
    "gpr neither gpus nor nodes": BodyCase(GPRCreate, gpr_body(gpus=...), want_field="gpus"),
    "gpr null gpus and nodes": BodyCase(GPRCreate, gpr_body(gpus=None, nodes=None), want_field="gpus"),
    "gpr priority zero": BodyCase(GPRCreate, gpr_body(priority=0), want_field="priority", want_message="1 to 300"),
    "gpr priority over 300": BodyCase(GPRCreate, gpr_body(priority=301), want_field="priority"),
    "gpr priority as text": BodyCase(GPRCreate, gpr_body(priority="high"), want_field="priority"),
    "gpr priority true": BodyCase(GPRCreate, gpr_body(priority=True), want_field="priority"),
    "gpr priority fraction": BodyCase(GPRCreate, gpr_body(priority=150.5), want_field="priority"),
    "gpr zero gpus": BodyCase(GPRCreate, gpr_body(gpus=0), want_field="gpus"),
    "gpr gpus as text": BodyCase(GPRCreate, gpr_body(gpus="2"), want_field="gpus"),
    "gpr zero nodes": BodyCase(GPRCreate, gpr_body(gpus=..., nodes=0), want_field="nodes"),
    "gpr bad duration": BodyCase(GPRCreate, gpr_body(duration="2 hours"), want_field="duration"),
    "gpr zero idle timeout": BodyCase(GPRCreate, gpr_body(idle_timeout="0"), want_field="idle_timeout"),
    "gpr naive start": BodyCase(GPRCreate, gpr_body(start_after="2026-11-22T14:00"), want_field="start_after"),
    # Any past time is as good as now: one the store's clock cannot hold is read as its earliest (issue 53).
    "gpr start before 1970 is past": BodyCase(
        GPRCreate,
        gpr_body(start_after="1969-07-20T20:17:00Z"),
        want={"start_after": datetime(1970, 1, 1, tzinfo=UTC)},
    ),
    # How far ahead is check_start_after's to say, with the time now and the service's horizon.
    "gpr start far ahead is parsed": BodyCase(
        GPRCreate,
        gpr_body(start_after="9999-12-31T23:59:59Z"),
        want={"start_after": datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)},
    ),
    "gpr slice upper case": BodyCase(GPRCreate, gpr_body(slice="Team"), want_field="slice"),
    "gpr slice too long": BodyCase(GPRCreate, gpr_body(slice="a" * 64), want_field="slice", want_message="63"),
    "gpr name too long": BodyCase(GPRCreate, gpr_body(name="x" * 101), want_field="name", want_message="100"),
    "gpr name control char": BodyCase(GPRCreate, gpr_body(name="a\nb"), want_field="name"),
    "gpr shape not text": BodyCase(GPRCreate, gpr_body(shape=8), want_field="shape"),
    "gpr preemptible not bool": BodyCase(GPRCreate, gpr_body(preemptible="yes"), want_field="preemptible"),
    # GPRUpdate (partial)
    "update empty": BodyCase(GPRUpdate, {}, want={"priority": MISSING, "gpus": MISSING, "duration": MISSING}),
    "update priority only": BodyCase(GPRUpdate, {"priority": 250}, want={"priority": 250, "shape": MISSING}),
    "update clears shape": BodyCase(GPRUpdate, {"shape": None}, want={"shape": None}),
    "update gpus and nodes": BodyCase(GPRUpdate, {"gpus": 1, "nodes": 1}, want_field="gpus"),
    "update bad priority": BodyCase(GPRUpdate, {"priority": 999}, want_field="priority"),
    "update unknown field": BodyCase(GPRUpdate, {"slice": "other"}, want_field="slice", want_message="unknown"),
    "update zero duration": BodyCase(GPRUpdate, {"duration": 0}, want_field="duration"),
    # WaitTimeQuery
    "wait minimal": BodyCase(
        WaitTimeQuery,
        {"slice": "team", "duration": "1d", "nodes": 1},
        want={
            "nodes": 1,
            "gpus": None,
            "duration": timedelta(days=1),
            "priority": PRIORITY_DEFAULT,
        },
    ),
    "wait has no name": BodyCase(WaitTimeQuery, gpr_body(name="x"), want_field="name", want_message="unknown"),
    "wait neither gpus nor nodes": BodyCase(WaitTimeQuery, {"slice": "team", "duration": 60}, want_field="gpus"),
    "wait missing slice": BodyCase(WaitTimeQuery, {"duration": 60, "gpus": 1}, want_field="slice"),
    # SliceCreate
    "slice minimal gets defaults": BodyCase(
        SliceCreate,
        {"name": "ml-team"},
        want={
            "display_name": "",
            "group": None,
            "quota": QuotaBody(),
            "policy": PolicyBody(),
            "namespaces": {},
            "members": (),
            "policy.max_active_gprs": 1,
        },
    ),
    "slice full": BodyCase(
        SliceCreate,
        {
            "name": "ml",
            "display_name": "ML",
            "group": "ml-people",
            "quota": {"max_gpus": 16},
            "policy": {
                "max_duration": "1d",
                "max_priority": 200,
                "auto_approve_max_gpus": 8,
                "max_active_gprs": 2,
                "restart_servers": True,
            },
            "namespaces": {"c1": ["ml-a", "ml-b"]},
            "members": ["alice", "bob", "alice"],
        },
        want={
            "quota.max_gpus": 16,
            "policy.max_duration": timedelta(days=1),
            "policy.max_priority": 200,
            "policy.auto_approve_max_gpus": 8,
            "policy.max_active_gprs": 2,
            "policy.restart_servers": True,
            "namespaces": {"c1": ("ml-a", "ml-b")},
            "members": ("alice", "bob"),
        },
    ),
    "slice empty policy": BodyCase(SliceCreate, {"name": "ml", "policy": {}}, want={"policy": PolicyBody()}),
    "slice missing name": BodyCase(SliceCreate, {}, want_field="name", want_message="required"),
    "slice name too long": BodyCase(SliceCreate, {"name": "a" * 64}, want_field="name", want_message="63"),
    "slice name starts with dash": BodyCase(SliceCreate, {"name": "-ml"}, want_field="name"),
    "slice bad nested duration": BodyCase(
        SliceCreate, {"name": "ml", "policy": {"max_duration": "soon"}}, want_field="policy.max_duration"
    ),
    "slice unknown nested field": BodyCase(
        SliceCreate,
        {"name": "ml", "policy": {"max_gpu": 1}},
        want_field="policy.max_gpu",
        want_message="unknown field 'policy.max_gpu'",
    ),
    "slice policy not an object": BodyCase(
        SliceCreate, {"name": "ml", "policy": 5}, want_field="policy", want_message="JSON object"
    ),
    "slice zero quota": BodyCase(SliceCreate, {"name": "ml", "quota": {"max_gpus": 0}}, want_field="quota.max_gpus"),
    "slice zero active gprs": BodyCase(
        SliceCreate, {"name": "ml", "policy": {"max_active_gprs": 0}}, want_field="policy.max_active_gprs"
    ),
    "slice namespaces not an object": BodyCase(
        SliceCreate, {"name": "ml", "namespaces": ["a"]}, want_field="namespaces"
    ),
    "slice empty namespace list": BodyCase(
        SliceCreate, {"name": "ml", "namespaces": {"c1": []}}, want_field="namespaces.c1"
    ),
    "slice bad namespace": BodyCase(
        SliceCreate, {"name": "ml", "namespaces": {"c1": ["Bad_NS"]}}, want_field="namespaces.c1"
    ),
    "slice namespace listed twice": BodyCase(
        SliceCreate, {"name": "ml", "namespaces": {"c1": ["a", "b", "a"]}}, want_field="namespaces.c1"
    ),
    "slice namespace too long": BodyCase(
        SliceCreate, {"name": "ml", "namespaces": {"c1": ["n" * 64]}}, want_field="namespaces.c1"
    ),
    "slice members not a list": BodyCase(SliceCreate, {"name": "ml", "members": "alice"}, want_field="members"),
    "slice member with slash": BodyCase(SliceCreate, {"name": "ml", "members": ["a/b"]}, want_field="members"),
    "slice group with space": BodyCase(SliceCreate, {"name": "ml", "group": "my group"}, want_field="group"),
    # SliceUpdate (partial: quota and policy per key)
    "slice update one policy key": BodyCase(
        SliceUpdate,
        {"policy": {"max_priority": 200}},
        want={
            "policy.max_priority": 200,
            "policy.max_duration": MISSING,
            "display_name": MISSING,
            "quota": MISSING,
        },
    ),
    "slice update clears quota": BodyCase(SliceUpdate, {"quota": {"max_gpus": None}}, want={"quota.max_gpus": None}),
    "slice update bad policy key": BodyCase(
        SliceUpdate, {"policy": {"max_priority": 0}}, want_field="policy.max_priority"
    ),
    "slice update has no name": BodyCase(SliceUpdate, {"name": "x"}, want_field="name"),
    # Reason
    "reason default": BodyCase(Reason, {}, want={"reason": ""}),
    "reason stripped": BodyCase(Reason, {"reason": " done early "}, want={"reason": "done early"}),
    "reason too long": BodyCase(Reason, {"reason": "x" * 501}, want_field="reason", want_message="500"),
    "reason not text": BodyCase(Reason, {"reason": 5}, want_field="reason"),
    "reason unknown field": BodyCase(Reason, {"why": "x"}, want_field="why"),
    "reason null body": BodyCase(Reason, None, want_field="body"),
}


def attribute(made: object, dotted: str) -> object:
    for name in dotted.split("."):
        made = getattr(made, name)
    return made


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_parse_body(case: BodyCase):
    if case.want_field is None:
        made = parse_body(case.cls, case.body)
        assert isinstance(made, case.cls)
        assert {name: attribute(made, name) for name in case.want} == case.want
        return
    with pytest.raises(InvalidRequest) as raised:
        parse_body(case.cls, case.body)
    assert raised.value.field == case.want_field
    assert case.want_message in str(raised.value)


def test_to_spec_copies_every_field():
    made = parse_body(GPRCreate, gpr_body(shape="H100", priority=200))
    assert made.to_spec() == GPRSpec(slice="team", duration=timedelta(hours=2), gpus=2, priority=200, shape="H100")
    query = parse_body(WaitTimeQuery, gpr_body())
    assert query.to_spec() == GPRSpec(slice="team", duration=timedelta(hours=2), gpus=2)


@pytest.mark.parametrize(
    ("update", "want_gpus", "want_nodes"),
    [
        ({"gpus": 4}, 4, None),  # gpus replaces nodes
        ({"nodes": 2}, None, 2),  # nodes replaces gpus
        ({"priority": 5}, 2, None),  # the rest stays
    ],
)
def test_update_apply(update: dict, want_gpus: int | None, want_nodes: int | None):
    base = parse_body(GPRCreate, GPR_BODY).to_spec()
    applied = parse_body(GPRUpdate, update).apply(base)
    assert (applied.gpus, applied.nodes) == (want_gpus, want_nodes)
    assert dataclasses.replace(applied, gpus=2, nodes=None, priority=base.priority) == base


def test_mig_instances_are_asked_for_by_gpus_not_nodes():
    made = parse_body(GPRCreate, gpr_body(shape="H100-80GB 1g.10gb", gpus=3)).to_spec()
    assert (made.shape, made.gpus) == ("H100-80GB 1g.10gb", 3)
    with pytest.raises(InvalidRequest, match="names MIG instances: ask for a number of them with gpus") as raised:
        parse_body(GPRCreate, gpr_body(shape="H100-80GB 1g.10gb", gpus=None, nodes=1)).to_spec()
    assert raised.value.field == "nodes"
    with pytest.raises(InvalidRequest) as raised:
        parse_body(GPRUpdate, {"nodes": 1}).apply(made)
    assert raised.value.field == "nodes"


def test_a_share_of_a_gpu_is_one_gpu():
    made = parse_body(GPRCreate, gpr_body(gpus=None, gpu_share=0.25)).to_spec()
    assert (made.gpus, made.nodes, made.gpu_share) == (1, None, 0.25)
    assert parse_body(GPRCreate, gpr_body(gpus=1, gpu_share=0.5)).to_spec().gpu_share == 0.5
    refused = {
        "nodes": gpr_body(gpus=None, nodes=1, gpu_share=0.25),
        "gpus": gpr_body(gpus=2, gpu_share=0.25),
        "shape": gpr_body(gpus=None, gpu_share=0.25, shape="H100 1g.10gb"),
    }
    for at_fault, body in refused.items():
        with pytest.raises(InvalidRequest) as raised:
            parse_body(GPRCreate, body)
        assert raised.value.field == at_fault and "gpu_share" in str(raised.value)
    for share in (0, 1, 1.5, -0.25, "0.5"):
        with pytest.raises(InvalidRequest, match="gpu_share must be a number above 0 and below 1") as raised:
            parse_body(GPRCreate, gpr_body(gpus=None, gpu_share=share))
        assert raised.value.field == "gpu_share"


def test_update_apply_moves_between_a_share_and_whole_gpus():
    shared = parse_body(GPRCreate, gpr_body(gpus=None, gpu_share=0.25)).to_spec()
    assert parse_body(GPRUpdate, {"gpu_share": 0.5}).apply(shared).gpu_share == 0.5
    whole = parse_body(GPRUpdate, {"gpus": 4}).apply(shared)
    assert (whole.gpus, whole.gpu_share) == (4, None)
    base = parse_body(GPRCreate, GPR_BODY).to_spec()
    now_shared = parse_body(GPRUpdate, {"gpu_share": 0.25}).apply(base)
    assert (now_shared.gpus, now_shared.nodes, now_shared.gpu_share) == (1, None, 0.25)
    with pytest.raises(InvalidRequest) as raised:
        parse_body(GPRUpdate, {"gpu_share": 0.25, "gpus": 3})
    assert raised.value.field == "gpus"


def test_update_apply_refuses_removing_gpus_and_nodes():
    base = parse_body(GPRCreate, GPR_BODY).to_spec()
    update = parse_body(GPRUpdate, {"gpus": None})
    with pytest.raises(InvalidRequest) as raised:
        update.apply(base)
    assert raised.value.field == "gpus"


def test_body_schemas_list_required_fields():
    schemas = body_schemas("#/components/schemas/{model}")
    assert schemas["GPRCreate"]["required"] == ["slice"]  # duration too, unless a template gives it (check())
    assert schemas["GPRCreate"]["additionalProperties"] is False
    assert set(schemas["GPRCreate"]["properties"]) == set(GPRCreate.model_fields)
    assert "required" not in schemas["GPRUpdate"]
    assert schemas["SliceCreate"]["required"] == ["name"]
    assert schemas["SliceUpdate"]["properties"]["policy"] == {"$ref": "#/components/schemas/PolicyBodyPatch"}
    assert "required" not in schemas["PolicyBodyPatch"]
    assert schemas["ClusterCreate"]["properties"]["exit_grace"]["default"] == 300


KNOWN_KEYS = sorted({name for cls in (GPRCreate, SliceCreate, PolicyBody, QuotaBody) for name in cls.model_fields})
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=400),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["team", "1h", "0", "2026-01-01T00:00:00Z", "2026-01-01T00:00", "H100", "c1", "alice"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
BODIES = st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=6), JSON, max_size=6)


@settings(max_examples=300, deadline=None)
@given(cls=st.sampled_from([GPRCreate, GPRUpdate, WaitTimeQuery, SliceCreate, SliceUpdate, Reason]), body=BODIES)
def test_any_json_body_is_parsed_or_refused_with_a_field(cls: type, body: dict):
    known = set(cls.model_fields)
    try:
        made = parse_body(cls, body)
    except InvalidRequest as error:
        assert error.field in body or error.field.split(".")[0] in known
        assert str(error)
    else:
        assert isinstance(made, cls)
        if cls is GPRCreate:
            assert (made.gpus is None) != (made.nodes is None)


NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


@dataclass(frozen=True)
class HorizonCase:
    start_after: datetime | None
    horizon: timedelta = timedelta(days=365)
    want_message: str | None = None  # the refusal's message; None when it is accepted


HORIZON_CASES = {
    "none": HorizonCase(None),
    "in the past": HorizonCase(datetime(2020, 1, 1, tzinfo=UTC)),
    "now": HorizonCase(NOW),
    "at the horizon": HorizonCase(NOW + timedelta(days=365)),
    "just past the horizon": HorizonCase(
        NOW + timedelta(days=365, seconds=1),
        want_message="start_after must be within 365 days from now (before 2027-11-25T10:00:00Z), "
        "not 2027-11-25T10:00:01Z",
    ),
    "the issue's": HorizonCase(
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        want_message="start_after must be within 365 days from now (before 2027-11-25T10:00:00Z), "
        "not 9999-12-31T23:59:59Z",
    ),
    "a horizon of a day": HorizonCase(NOW + timedelta(days=2), timedelta(days=1), "within 1 day from now"),
    "a horizon of hours": HorizonCase(NOW + timedelta(days=2), timedelta(hours=36), "within 1d12h from now"),
}


@pytest.mark.parametrize("case", HORIZON_CASES.values(), ids=HORIZON_CASES.keys())
def test_check_start_after(case: HorizonCase):
    if case.want_message is None:
        check_start_after(case.start_after, NOW, case.horizon)
        return
    with pytest.raises(InvalidRequest) as raised:
        check_start_after(case.start_after, NOW, case.horizon)
    assert raised.value.field == "start_after"
    assert case.want_message in str(raised.value)


@settings(max_examples=200)
@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)),
    st.integers(min_value=1, max_value=10 * 365 * 86400).map(lambda s: timedelta(seconds=s)),
)
def test_check_start_after_refuses_exactly_what_is_past_the_horizon(start_after: datetime, horizon: timedelta):
    past = start_after > NOW + horizon
    try:
        check_start_after(start_after, NOW, horizon)
    except InvalidRequest as e:
        assert past and e.field == "start_after"
        assert f"within {describe_horizon(horizon)} from now" in str(e)
    else:
        assert not past


@given(gpus=st.integers(min_value=1, max_value=100_000), fraction=st.sampled_from([0.0, 0.5, 0.25]))
def test_a_whole_number_written_with_a_point_is_that_number(gpus: int, fraction: float):
    """JSON Schema's "integer" holds 2.0, so the API takes it as 2; 2.5 stays refused."""
    body = {"slice": "team", "gpus": gpus + fraction, "duration": 3600.0, "priority": 150.0}
    if fraction:
        with pytest.raises(InvalidRequest, match="gpus must be a whole number from 1 to 100000"):
            parse_body(GPRCreate, body)
    else:
        parsed = parse_body(GPRCreate, body)
        assert (parsed.gpus, parsed.duration, parsed.priority) == (gpus, timedelta(hours=1), 150)
        assert type(parsed.gpus) is int
