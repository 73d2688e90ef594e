"""Durations and times as the API writes them.

A *duration* is seconds (an integer, or a string of digits) or a compact
string of units, largest first: ``"1d2h30m"``, ``"45m"``, ``"90s"``, ``"1w"``.
A *time* is ISO-8601 with a time zone; the API answers in UTC with ``Z``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import InvalidRequest

_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_RE = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", re.ASCII)
_DURATION_HELP = 'use seconds or units largest first, like "1d2h30m", "45m" or "90s"'


def parse_duration(value: object, field: str) -> timedelta:
    """Return the positive duration ``value`` names, or raise InvalidRequest."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidRequest(field, f"{field} must be a duration: {_DURATION_HELP}")
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            # ASCII digits only, as DURATION_SCHEMA's pattern: int() refuses "²" though isdigit() is true.
            if text.isascii() and text.isdigit():
                seconds = int(text)
            else:
                match = _DURATION_RE.fullmatch(text)
                if not text or match is None:
                    raise InvalidRequest(field, f"{field} {value!r} is not a duration: {_DURATION_HELP}")
                seconds = sum(
                    int(part) * scale
                    for part, scale in zip(match.groups(), _UNIT_SECONDS.values(), strict=True)
                    if part
                )
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
            raise InvalidRequest(field, f"{field} must be at most ten years") from None
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidRequest(field, f"{field} must be a finite number of seconds")
        seconds = value
    if seconds <= 0:
        raise InvalidRequest(field, f"{field} must be longer than zero")
    if seconds > 10 * 365 * 86400:
        raise InvalidRequest(field, f"{field} must be at most ten years")
    duration = timedelta(seconds=seconds)
    if not duration:  # a float under half a microsecond rounds to zero
        raise InvalidRequest(field, f"{field} must be longer than zero")
    return duration


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


def parse_time(value: object, field: str) -> datetime:
    """Return an aware UTC datetime from ISO-8601 text, or raise InvalidRequest."""
    if not isinstance(value, str):
        raise InvalidRequest(field, f"{field} must be an ISO-8601 time like 2026-11-22T14:00:00Z")
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise InvalidRequest(
            field, f"{field} {value!r} is not an ISO-8601 time like 2026-11-22T14:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise InvalidRequest(field, f"{field} {value!r} has no time zone; add one, e.g. 'Z' for UTC")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise InvalidRequest(field, f"{field} {value!r} is out of range in UTC") from None


def format_time(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with ``Z``; naive datetimes are taken to be UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
