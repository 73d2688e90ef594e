"""GPR templates: who may use one, how a GPR's fields fill from it, and their bodies."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core.errors import InvalidRequest, PolicyViolation
from egs_hub.core.model import PRIORITY_DEFAULT, GPRSpec
from egs_hub.core.requests import GPRCreate, TemplateCreate, TemplateUpdate, WaitTimeQuery, parse_body
from egs_hub.core.templates import (
    TEMPLATE_FIELDS,
    GPRTemplate,
    check_template,
    check_usable,
    fill,
    not_usable,
    usable_in,
)

BIG = GPRTemplate(
    name="big",
    duration=timedelta(hours=8),
    gpus=8,
    cluster="east",
    shape="H100-80GB",
    priority=150,
    idle_timeout=timedelta(minutes=30),
    preemptible=False,
)


@pytest.mark.parametrize(
    ("template", "slice_name", "project", "usable"),
    [
        (BIG, "team", "default", True),  # global
        (BIG, "team", None, True),
        (GPRTemplate("p", timedelta(hours=1), gpus=1, project="research"), "team", "research", True),
        (GPRTemplate("p", timedelta(hours=1), gpus=1, project="research"), "team", "default", False),
        (GPRTemplate("p", timedelta(hours=1), gpus=1, project="research"), "team", None, False),
        (GPRTemplate("s", timedelta(hours=1), gpus=1, slice="team"), "team", "default", True),
        (GPRTemplate("s", timedelta(hours=1), gpus=1, slice="team"), "other", "default", False),
    ],
)
def test_who_may_use_a_template(template, slice_name, project, usable):
    assert usable_in(template, slice_name, project) is usable
    if usable:
        check_usable(template, slice_name, project)
    else:
        with pytest.raises(PolicyViolation) as refused:
            check_usable(template, slice_name, project)
        # as a missing template is: whose a template is, is not the caller's to learn (issue 45)
        assert refused.value.field == "template" and template.scope not in str(refused.value)
        assert str(refused.value) == str(not_usable(template.name, slice_name))


@pytest.mark.parametrize(
    ("given_fields", "want"),
    [
        # nothing given: everything the template has
        (
            {},
            {
                "cluster": "east",
                "shape": "H100-80GB",
                "gpus": 8,
                "duration": timedelta(hours=8),
                "priority": 150,
                "idle_timeout": timedelta(minutes=30),
                "preemptible": False,
            },
        ),
        # a size given replaces the template's whole: no gpus and nodes together
        ({"nodes": 2}, {"nodes": 2, "gpus": None}),
        ({"gpus": 2}, {"gpus": 2, "nodes": None}),
        # what is given wins, even a null (the GPR's default) or the default's own value
        ({"shape": None, "priority": PRIORITY_DEFAULT}, {"shape": None, "priority": PRIORITY_DEFAULT}),
        ({"duration": timedelta(hours=1)}, {"duration": timedelta(hours=1), "gpus": 8}),
    ],
)
def test_a_gpr_takes_what_it_leaves_out_from_its_template(given_fields, want):
    filled = fill(BIG, given_fields)
    assert {name: filled.get(name) for name in want} == want


def test_a_templates_nulls_leave_the_gprs_defaults():
    plain = GPRTemplate("plain", timedelta(hours=1), gpus=1)
    assert fill(plain, {"slice": "team"}) == {"slice": "team", "gpus": 1, "duration": timedelta(hours=1)}
    spec = parse_body(GPRCreate, {"slice": "team", "template": "plain"}).to_spec(plain)
    assert spec == GPRSpec(slice="team", duration=timedelta(hours=1), gpus=1, template="plain")


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "cluster": st.none() | st.text(max_size=3),
            "gpus": st.none() | st.integers(1, 9),
            "nodes": st.none() | st.integers(1, 9),
            "priority": st.integers(1, 300),
            "preemptible": st.booleans(),
            "duration": st.integers(1, 10**6).map(lambda s: timedelta(seconds=s)),
        },
    )
)
def test_given_fields_always_win_and_a_size_comes_whole_from_one_side(given_fields):
    filled = fill(BIG, given_fields)
    for name, value in given_fields.items():
        if name not in ("gpus", "nodes"):
            assert filled[name] == value
    for name in TEMPLATE_FIELDS:
        if name not in given_fields and name not in ("gpus", "nodes"):
            assert filled[name] == getattr(BIG, name)
    if any(given_fields.get(n) is not None for n in ("gpus", "nodes")):
        assert {n: filled.get(n) for n in ("gpus", "nodes")} == {n: given_fields.get(n) for n in ("gpus", "nodes")}
    else:
        assert filled["gpus"] == BIG.gpus


@pytest.mark.parametrize("cls", [GPRCreate, WaitTimeQuery])
def test_a_body_without_a_template_still_needs_its_duration_and_size(cls):
    with pytest.raises(InvalidRequest) as refused:
        parse_body(cls, {"slice": "team", "gpus": 1})
    assert refused.value.field == "duration"
    with pytest.raises(InvalidRequest) as refused:
        parse_body(cls, {"slice": "team", "duration": 60})
    assert refused.value.field == "gpus"
    # with a template both may be left out; the template then has to give them
    body = parse_body(cls, {"slice": "team", "template": "big"})
    assert body.to_spec(BIG).duration == timedelta(hours=8)
    with pytest.raises(InvalidRequest) as refused:
        parse_body(cls, {"slice": "team", "template": "big", "gpus": 1, "nodes": 1})
    assert refused.value.field == "gpus"


def test_template_bodies():
    made = parse_body(TemplateCreate, {"name": "small", "gpus": 1, "duration": "2h", "slice": "team"})
    assert made.to_template() == GPRTemplate("small", timedelta(hours=2), gpus=1, slice="team")
    for body, field in [
        ({"name": "x", "gpus": 1, "duration": 60, "slice": "a", "project": "b"}, "slice"),
        ({"name": "x", "duration": 60}, "gpus"),
        ({"name": "x", "gpus": 1, "nodes": 1, "duration": 60}, "gpus"),
        ({"name": "x", "gpus": 1}, "duration"),
        ({"name": "X y", "gpus": 1, "duration": 60}, "name"),
        ({"name": "x", "gpus": 1, "duration": 60, "priority": 301}, "priority"),
        ({"name": "x", "gpus": 1, "duration": 60, "colour": "red"}, "colour"),
    ]:
        with pytest.raises(InvalidRequest) as refused:
            parse_body(TemplateCreate, body)
        assert refused.value.field == field, body

    small = made.to_template()
    # nodes replaces gpus, a project replaces the slice; what is not given stays
    changed = parse_body(TemplateUpdate, {"nodes": 1, "project": "research"}).apply(small)
    assert (changed.gpus, changed.nodes, changed.slice, changed.project) == (None, 1, None, "research")
    assert changed.duration == small.duration
    with pytest.raises(InvalidRequest):
        parse_body(TemplateUpdate, {"gpus": None}).apply(small)
    with pytest.raises(InvalidRequest):
        check_template(GPRTemplate("x", timedelta(hours=1), gpus=1, project="a", slice="b"))
