"""Query parameter models: what a handler reads is what the document lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.requests import SLICE_NAME_PATTERN
from egs_hub.service import cursors
from egs_hub.service.parameters import AlertsQuery, GPRsQuery, KubeconfigQuery, UtilizationQuery, documented, read


def request(**arguments: str) -> SimpleNamespace:
    """What ``read`` uses of a Tornado handler: the query arguments and get_query_argument (which strips)."""
    return SimpleNamespace(
        request=SimpleNamespace(query_arguments={k: [v.encode()] for k, v in arguments.items()}),
        get_query_argument=lambda name: arguments[name].strip(),
    )


def test_left_out_arguments_take_their_defaults_and_unknown_ones_are_ignored():
    query = read(GPRsQuery, request(_="1700000000"))
    assert (query.slice, query.status, query.limit, query.cursor) == (None, None, 100, None)


def test_given_arguments_are_parsed():
    cursor = cursors.ALERTS.cursor((datetime(2026, 11, 26, tzinfo=UTC), 7))
    query = read(AlertsQuery, request(slice="ml", active="false", since="2026-11-25T10:00:00Z", cursor=cursor))
    assert (query.slice, query.active, query.since) == ("ml", False, datetime(2026, 11, 25, 10, tzinfo=UTC))
    assert query.cursor == (datetime(2026, 11, 26, tzinfo=UTC), 7)
    assert read(UtilizationQuery, request(step="15m")).step == timedelta(minutes=15)


@pytest.mark.parametrize(
    ("cls", "arguments", "field", "message"),
    [
        (GPRsQuery, {"limit": "0"}, "limit", "limit must be from 1 to 1000, not 0"),
        (GPRsQuery, {"limit": "all"}, "limit", "limit must be a whole number, not 'all'"),
        (GPRsQuery, {"status": "done"}, "status", "status must be one of pending-approval, "),
        (GPRsQuery, {"cursor": "e30"}, "cursor", "cursor is not one that GET /gprs gave"),
        (AlertsQuery, {"active": "yes"}, "active", "active must be one of true, false, not 'yes'"),
        (UtilizationQuery, {"since": "yesterday"}, "since", "since 'yesterday' is not an ISO-8601 time"),
        (KubeconfigQuery, {}, "cluster", "cluster is required"),
        (KubeconfigQuery, {"cluster": "kc", "expiration": "599"}, "expiration", "from 600 (10 minutes)"),
    ],
)
def test_a_bad_argument_is_refused_naming_it(cls, arguments, field, message):
    with pytest.raises(InvalidRequest) as refused:
        read(cls, request(**arguments))
    assert refused.value.field == field and message in str(refused.value)


def test_the_document_lists_each_argument_with_its_schema():
    listed = {p["name"]: p for p in documented(KubeconfigQuery)}
    assert listed["cluster"]["required"] is True
    assert listed["cluster"]["schema"] == {"type": "string", "pattern": SLICE_NAME_PATTERN, "maxLength": 63}
    assert listed["expiration"]["required"] is False
    assert listed["expiration"]["schema"] == {"type": "integer", "minimum": 600, "maximum": 604800}
    assert [p["name"] for p in documented(GPRsQuery)] == ["slice", "status", "limit", "cursor"]
    assert all(p["in"] == "query" and p["description"] for p in documented(GPRsQuery))
