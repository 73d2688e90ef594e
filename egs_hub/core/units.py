"""Durations and times as the API writes them.

A *duration* is seconds (an integer, or a string of digits) or a compact
string of units, largest first: ``"1d2h30m"``, ``"45m"``, ``"90s"``, ``"1w"``.
A *time* is ISO-8601 with a time zone; the API answers in UTC with ``Z``.
Every time the API takes lies from ``EARLIEST_TIME`` to ``LATEST_TIME``, and the
planner plans no window past ``LATEST_TIME``: far from datetime's own limits (the
years 1 and 9999), so that nothing egs-hub adds to such a time can overflow
(issue 25). A GPR's ``start_after`` has a nearer bound, the service's
``max_start_after`` from now (requests.check_start_after).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import InvalidRequest

_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
MAX_DURATION_SECONDS = 10 * 365 * 86400
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(9000, 1, 1, tzinfo=UTC)
# One pattern for the parser and the OpenAPI schema: digits, or units largest first,
# with at least one non-zero digit.
DURATION_PATTERN = (
    r"^(?=.*[1-9])(?:([0-9]{1,10})|(?=[0-9])(?:([0-9]{1,4})w)?(?:([0-9]{1,5})d)?"
    r"(?:([0-9]{1,6})h)?(?:([0-9]{1,7})m)?(?:([0-9]{1,9})s)?)$"
)
_DURATION_RE = re.compile(DURATION_PATTERN, re.ASCII)
_DURATION_HELP = 'use whole seconds, or units largest first like "1d2h30m", "45m" or "90s"'


def parse_duration(value: object, field: str) -> timedelta:
    """Return the positive duration ``value`` names, or raise InvalidRequest.

    Exactly what the API's schema allows: an integer of seconds, or a string
    matching ``DURATION_PATTERN``; at most ten years.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidRequest(field, f"{field} must be a duration: {_DURATION_HELP}")
    if isinstance(value, int):
        seconds = value
    else:
        match = _DURATION_RE.fullmatch(value)
        if match is None:
            raise InvalidRequest(field, f"{field} {value[:40]!r} is not a duration: {_DURATION_HELP}")
        plain, *units = match.groups()
        if plain is not None:
            seconds = int(plain)
        else:
            seconds = sum(int(n) * scale for n, scale in zip(units, _UNIT_SECONDS.values(), strict=True) if n)
    if seconds <= 0:
        raise InvalidRequest(field, f"{field} must be longer than zero")
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidRequest(field, f"{field} must be at most ten years")
    return timedelta(seconds=seconds)


def format_duration(duration: timedelta) -> str:
    """The compact form ``parse_duration`` reads: ``timedelta(hours=26)`` is ``"1d2h"``."""
    seconds = int(duration.total_seconds())
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, scale in _UNIT_SECONDS.items():
        if unit == "w":
            continue
        count, seconds = divmod(seconds, scale)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def parse_time(
    value: object, field: str, *, latest: datetime | None = LATEST_TIME, clamp_earliest: bool = False
) -> datetime:
    """Return an aware UTC datetime from ISO-8601 text, or raise InvalidRequest.

    The time must be from ``EARLIEST_TIME`` to ``latest``; ``latest=None`` leaves the
    upper bound to the caller, who checks a nearer one (a GPR's ``start_after``), and
    ``clamp_earliest`` reads an earlier time as ``EARLIEST_TIME`` (for a bound that any
    past time meets alike: "not before").
    """
    if not isinstance(value, str):
        raise InvalidRequest(field, f"{field} must be an ISO-8601 time like 2026-11-22T14:00:00Z")
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise InvalidRequest(field, f"{field} {value!r} is not an ISO-8601 time like 2026-11-22T14:00:00Z") from None
    if parsed.tzinfo is None:
        raise InvalidRequest(field, f"{field} {value!r} has no time zone; add one, e.g. 'Z' for UTC")
    try:
        parsed = parsed.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise InvalidRequest(field, f"{field} {value!r} is out of range in UTC") from None
    if clamp_earliest and parsed < EARLIEST_TIME:
        return EARLIEST_TIME
    if parsed < EARLIEST_TIME or (latest is not None and parsed > latest):
        until = f"to {format_time(latest)}" if latest is not None else "on"
        raise InvalidRequest(field, f"{field} must be from {format_time(EARLIEST_TIME)} {until}, not {text}")
    return parsed


def format_time(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with ``Z``; naive datetimes are taken to be UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
