"""Durations and times: parse_duration, format_duration, parse_time, format_time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.units import (
    EARLIEST_TIME,
    LATEST_TIME,
    MAX_DURATION_SECONDS,
    format_duration,
    format_time,
    parse_duration,
    parse_time,
)

TEN_YEARS = timedelta(days=3650)


@dataclass(frozen=True)
class DurationCase:
    value: object
    want: timedelta | None = None  # the parsed duration; None when it must be refused
    want_message: str = ""  # a piece of the refusal's message


DURATIONS = {
    "int seconds": DurationCase(90, want=timedelta(seconds=90)),
    "float seconds": DurationCase(1.5, want_message="whole seconds"),
    "digit string": DurationCase("3600", want=timedelta(hours=1)),
    "digit string with spaces": DurationCase(" 60 ", want_message="not a duration"),
    "days hours minutes": DurationCase("1d2h30m", want=timedelta(days=1, hours=2, minutes=30)),
    "minutes": DurationCase("45m", want=timedelta(minutes=45)),
    "seconds unit": DurationCase("90s", want=timedelta(seconds=90)),
    "week": DurationCase("1w", want=timedelta(weeks=1)),
    "every unit": DurationCase("1w1d1h1m1s", want=timedelta(weeks=1, days=1, hours=1, minutes=1, seconds=1)),
    "upper case": DurationCase("2H", want_message="not a duration"),
    "unit over its range": DurationCase("90m", want=timedelta(minutes=90)),
    "exactly ten years": DurationCase("3650d", want=TEN_YEARS),
    "zero int": DurationCase(0, want_message="longer than zero"),
    "zero string": DurationCase("0", want_message="not a duration"),
    "zero with units": DurationCase("0h0m", want_message="not a duration"),
    "negative int": DurationCase(-5, want_message="longer than zero"),
    "negative string": DurationCase("-5", want_message="not a duration"),
    "negative float": DurationCase(-0.5, want_message="whole seconds"),
    "trailing newline": DurationCase("1h\n", want_message="not a duration"),
    "over ten years": DurationCase(3651 * 86400, want_message="ten years"),
    "over ten years in units": DurationCase("522w", want_message="ten years"),
    "huge int": DurationCase(10**300, want_message="ten years"),
    "more digits than the pattern allows": DurationCase("9" * 5000, want_message="not a duration"),
    "weeks beyond ten years": DurationCase("9999w", want_message="ten years"),
    "true": DurationCase(True, want_message="must be a duration"),
    "false": DurationCase(False, want_message="must be a duration"),
    "nan": DurationCase(float("nan"), want_message="whole seconds"),
    "inf": DurationCase(float("inf"), want_message="whole seconds"),
    "minus inf": DurationCase(float("-inf"), want_message="whole seconds"),
    "none": DurationCase(None, want_message="must be a duration"),
    "list": DurationCase([60], want_message="must be a duration"),
    "empty": DurationCase("", want_message="not a duration"),
    "blank": DurationCase("   ", want_message="not a duration"),
    "garbage": DurationCase("soon", want_message="not a duration"),
    "units smallest first": DurationCase("30m2h", want_message="not a duration"),
    "unit without number": DurationCase("h", want_message="not a duration"),
    "fraction with unit": DurationCase("1.5h", want_message="not a duration"),
    "spaces between units": DurationCase("1h 30m", want_message="not a duration"),
    "superscript digit": DurationCase("²", want_message="not a duration"),
    "arabic-indic digits": DurationCase("١٢", want_message="not a duration"),
}


@pytest.mark.parametrize("case", DURATIONS.values(), ids=DURATIONS.keys())
def test_parse_duration(case: DurationCase):
    if case.want is not None:
        assert parse_duration(case.value, "duration") == case.want
        return
    with pytest.raises(InvalidRequest) as raised:
        parse_duration(case.value, "policy.max_duration")
    assert raised.value.field == "policy.max_duration"
    assert "policy.max_duration" in str(raised.value)
    assert case.want_message in str(raised.value)


@pytest.mark.parametrize(
    ("duration", "want"),
    [
        (timedelta(hours=26), "1d2h"),
        (timedelta(days=7), "7d"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(seconds=59), "59s"),
        (timedelta(seconds=0.5), "0s"),
        (timedelta(0), "0s"),
        (timedelta(seconds=-5), "0s"),
    ],
)
def test_format_duration(duration: timedelta, want: str):
    assert format_duration(duration) == want


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=10 * 365 * 86400))
def test_format_duration_round_trips(seconds: int):
    duration = timedelta(seconds=seconds)
    assert parse_duration(format_duration(duration), "duration") == duration


@settings(max_examples=200)
@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.none(), st.booleans()))
def test_parse_duration_refuses_only_with_invalid_request(value: object):
    try:
        parsed = parse_duration(value, "duration")
    except InvalidRequest as error:
        assert error.field == "duration"
    else:
        assert timedelta(0) < parsed <= TEN_YEARS


@dataclass(frozen=True)
class TimeCase:
    value: object
    want: datetime | None = None  # the parsed time, in UTC; None when it must be refused
    want_message: str = ""  # a piece of the refusal's message
    latest: datetime | None = LATEST_TIME  # parse_time's upper bound


TIMES = {
    "Z": TimeCase("2026-11-22T14:00:00Z", want=datetime(2026, 11, 22, 14, tzinfo=UTC)),
    "lower-case z": TimeCase("2026-11-22T14:00:00z", want=datetime(2026, 11, 22, 14, tzinfo=UTC)),
    "offset is converted to UTC": TimeCase(
        "2026-11-22T16:30:00+02:00", want=datetime(2026, 11, 22, 14, 30, tzinfo=UTC)
    ),
    "surrounding spaces": TimeCase(" 2026-11-22T14:00:00+00:00 ", want=datetime(2026, 11, 22, 14, tzinfo=UTC)),
    "naive": TimeCase("2026-11-22T14:00:00", want_message="no time zone"),
    "date only": TimeCase("2026-11-22", want_message="no time zone"),
    "garbage": TimeCase("tomorrow", want_message="not an ISO-8601 time"),
    "empty": TimeCase("", want_message="not an ISO-8601 time"),
    "number": TimeCase(1764000000, want_message="must be an ISO-8601 time"),
    "none": TimeCase(None, want_message="must be an ISO-8601 time"),
    "before year 1 in UTC": TimeCase("0001-01-01T00:00:00+01:00", want_message="out of range"),
    "after year 9999 in UTC": TimeCase("9999-12-31T23:59:59-01:00", want_message="out of range"),
    "the earliest time": TimeCase("1970-01-01T00:00:00Z", want=EARLIEST_TIME),
    "the latest time": TimeCase("9000-01-01T01:00:00+01:00", want=LATEST_TIME),
    "before the earliest time": TimeCase(
        "1969-12-31T23:59:59Z",
        want_message="start_after must be from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z, not 1969-12-31T23:59:59Z",
    ),
    "year 1": TimeCase("0001-01-01T00:00:00Z", want_message="must be from 1970-01-01T00:00:00Z to 9000"),
    "after the latest time": TimeCase(
        "9999-12-31T23:59:59Z",
        want_message="start_after must be from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z, not 9999-12-31T23:59:59Z",
    ),
    "no upper bound: the caller checks a nearer one": TimeCase(
        "9999-12-31T23:59:59Z", want=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), latest=None
    ),
    "no upper bound, still the lower one": TimeCase(
        "1900-01-01T00:00:00Z", want_message="must be from 1970-01-01T00:00:00Z on, not 1900", latest=None
    ),
    "a nearer upper bound": TimeCase(
        "2031-01-01T00:00:00Z", want_message="to 2030-01-01T00:00:00Z", latest=datetime(2030, 1, 1, tzinfo=UTC)
    ),
}


@pytest.mark.parametrize("case", TIMES.values(), ids=TIMES.keys())
def test_parse_time(case: TimeCase):
    if case.want is not None:
        parsed = parse_time(case.value, "start_after", latest=case.latest)
        assert parsed == case.want
        assert parsed.tzinfo is UTC
        return
    with pytest.raises(InvalidRequest) as raised:
        parse_time(case.value, "start_after", latest=case.latest)
    assert raised.value.field == "start_after"
    assert case.want_message in str(raised.value)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (datetime(2026, 11, 22, 14, tzinfo=UTC), "2026-11-22T14:00:00Z"),
        (datetime(2026, 11, 22, 16, tzinfo=timezone(timedelta(hours=2))), "2026-11-22T14:00:00Z"),
        (datetime(2026, 11, 22, 14), "2026-11-22T14:00:00Z"),  # naive is taken as UTC
        (datetime(2026, 11, 22, 14, 0, 0, 500, tzinfo=UTC), "2026-11-22T14:00:00.000500Z"),
        (None, None),
    ],
)
def test_format_time(value: datetime | None, want: str | None):
    assert format_time(value) == want


@settings(max_examples=100)
@given(st.datetimes(timezones=st.just(UTC), min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1)))
def test_format_time_round_trips(value: datetime):
    text = format_time(value)
    assert text.endswith("Z")
    assert parse_time(text, "time") == value


def test_the_latest_time_plus_the_longest_duration_is_a_time():
    """Nothing egs-hub adds to a time it takes can overflow (issue 25)."""
    assert LATEST_TIME + 10 * timedelta(seconds=MAX_DURATION_SECONDS) < datetime.max.replace(tzinfo=UTC)
    assert EARLIEST_TIME - 10 * timedelta(seconds=MAX_DURATION_SECONDS) > datetime.min.replace(tzinfo=UTC)
