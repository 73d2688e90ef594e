"""JSON bodies and URL arguments into values, or InvalidRequest naming the part at fault (issue 25)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core.decoding import decode_argument, decode_json
from egs_hub.core.errors import InvalidRequest


def nested(depth: int, leaf: bytes = b"1") -> bytes:
    """A JSON value ``depth`` arrays deep around ``leaf``."""
    return b"[" * depth + leaf + b"]" * depth


def nested_list(depth: int) -> list:
    value: list = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


@dataclass(frozen=True)
class Body:
    raw: bytes
    want: object = None  # the decoded value when accepted
    want_field: str | None = None  # the field InvalidRequest names; None when accepted
    want_message: str = ""  # a piece of the refusal's message


BODIES = {
    "an object": Body(b'{"slice": "a", "gpus": 1}', want={"slice": "a", "gpus": 1}),
    "non-ASCII text": Body('{"name": "Zoë 🚀"}'.encode(), want={"name": "Zoë 🚀"}),
    "an escaped pair of surrogates is one character": Body(b'{"name": "\\ud83d\\ude80"}', want={"name": "🚀"}),
    "32 deep is the most": Body(nested(32), want=nested_list(32)),
    "33 deep": Body(nested(33), want_field="body", want_message="the body nests deeper than 32 levels"),
    "100000 deep": Body(nested(100_000), want_field="body", want_message="nests deeper than 32 levels"),
    "a field too deep": Body(b'{"quota": {"max_gpus": ' + nested(31) + b"}}", want_field="quota.max_gpus"),
    "empty containers count too": Body(b'{"a": ' + nested(32, b"") + b"}", want_field="a"),
    "a lone high surrogate": Body(
        b'{"name": "a\\ud800"}',
        want_field="name",
        want_message="name contains text that is not valid Unicode (a lone surrogate)",
    ),
    "a lone low surrogate in a list": Body(b'{"members": ["bob", "\\udfff"]}', want_field="members"),
    "a lone surrogate in a nested field": Body(b'{"policy": {"eviction": "\\ud800"}}', want_field="policy.eviction"),
    "a lone surrogate as the whole body": Body(b'"\\ud800"', want_field="body"),
    "a lone surrogate in a field name": Body(
        b'{"\\ud800": 1}', want_field="body", want_message="a field name in the body contains text that is not valid"
    ),
    "a lone surrogate in a nested field name": Body(b'{"quota": {"\\ud800": 1}}', want_field="quota"),
    "bytes that are not UTF-8": Body(b'{"name": "\xff"}', want_field="body", want_message="not valid UTF-8"),
    "a surrogate encoded as UTF-8 bytes": Body(b'{"name": "\xed\xa0\x80"}', want_field="body", want_message="UTF-8"),
    "not JSON": Body(b"{gpus: 1", want_field="body", want_message="not valid JSON"),
}


@pytest.mark.parametrize("case", BODIES.values(), ids=BODIES.keys())
def test_decode_json(case: Body):
    if case.want_field is None:
        assert decode_json(case.raw) == case.want
        return
    with pytest.raises(InvalidRequest) as refused:
        decode_json(case.raw)
    assert refused.value.field == case.want_field
    assert case.want_message in str(refused.value)


def test_the_depth_limit_is_a_parameter():
    assert decode_json(nested(40), max_depth=64) is not None
    with pytest.raises(InvalidRequest, match="deeper than 64 levels"):
        decode_json(nested(65), max_depth=64)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda inner: st.lists(inner, max_size=3)))
def test_any_value_within_the_limit_comes_back_unchanged(value):
    assert decode_json(json.dumps(value).encode()) == value


ARGUMENTS = {
    "plain": (b"team-a", "slice", "team-a", ""),
    "non-ASCII": ("zoë".encode(), "path", "zoë", ""),
    "a surrogate encoded as UTF-8 bytes": (
        b"\xed\xa0\x80",
        "path",
        None,
        "the URL path is not valid UTF-8 (%ED%A0%80 is no text)",
    ),
    "a stray byte in a query argument": (b"a\xff", "slice", None, "slice is not valid UTF-8 (a%FF is no text)"),
    "NUL": (b"a\x00b", "path", None, "the URL path contains a NUL character (%00)"),
}


@pytest.mark.parametrize("case", ARGUMENTS.values(), ids=ARGUMENTS.keys())
def test_decode_argument(case):
    raw, field, want, want_message = case  # want: the text, or None when refused
    if want is not None:
        assert decode_argument(raw, field) == want
        return
    with pytest.raises(InvalidRequest) as refused:
        decode_argument(raw, field)
    assert refused.value.field == field
    assert want_message in str(refused.value)
