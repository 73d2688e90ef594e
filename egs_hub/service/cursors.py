"""Cursor pagination of the list endpoints (/gprs, /events, /queue, /alerts, /workloads).

Vocabulary: a list has one *order*, a sort key that ends with a unique tie-break (an
id), so that every item has a distinct *key*. A *page* is at most ``limit`` items in
that order after a *cursor*: the opaque text (urlsafe base64 of JSON) of the key of
the last item of the page before, tagged with the list it belongs to. An answer
carries ``next_cursor``, the cursor of its last item, or null on the last page. Pages
are keyset pages: each starts after a key, not at an offset, so items added or
removed between two calls neither repeat nor shift the rest.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..core.errors import InvalidRequest
from ..core.units import format_time, parse_time

T = TypeVar("T")

# The types a key's parts may have: "int", "str", "time" (aware UTC), "bool".
PART_TYPES = ("int", "str", "time", "bool")


@dataclass(frozen=True)
class Listing:
    """One list endpoint: its name (in cursors), page sizes and key parts."""

    name: str
    default_limit: int
    max_limit: int
    parts: tuple[str, ...]  # the key's part types, in order

    def __post_init__(self) -> None:
        if not 1 <= self.default_limit <= self.max_limit:
            raise ValueError(f"{self.name}: default_limit must be from 1 to max_limit")
        if not self.parts or any(p not in PART_TYPES for p in self.parts):
            raise ValueError(f"{self.name}: key parts must be some of {PART_TYPES}")

    def limit(self, value: str | None) -> int:
        """The page size asked for (``limit``), or the default; 400 naming ``limit`` when bad."""
        if value is None:
            return self.default_limit
        try:
            number = int(value)
        except ValueError:
            raise InvalidRequest("limit", f"limit must be a whole number, not {value!r}") from None
        if not 1 <= number <= self.max_limit:
            raise InvalidRequest("limit", f"limit must be from 1 to {self.max_limit}, not {number}")
        return number

    def after(self, value: str | None) -> tuple | None:
        """The key a cursor names (None: from the start); 400 naming ``cursor`` when it is not one
        this list gave."""
        if value is None:
            return None
        bad = InvalidRequest(
            "cursor",
            f"cursor is not one that GET /{self.name} gave; use its next_cursor as is, or start again without it",
        )
        try:
            decoded = json.loads(base64.urlsafe_b64decode(value.encode("ascii") + b"=" * (-len(value) % 4)))
        except (ValueError, UnicodeError, binascii.Error):
            raise bad from None
        if not isinstance(decoded, dict) or decoded.get("list") != self.name:
            raise bad
        key = decoded.get("after")
        if not isinstance(key, list) or len(key) != len(self.parts):
            raise bad
        try:
            return tuple(_part(kind, v) for kind, v in zip(self.parts, key, strict=True))
        except (TypeError, ValueError, InvalidRequest):
            raise bad from None

    def cursor(self, key: Sequence) -> str:
        """The cursor of an item's key (the inverse of ``after``)."""
        parts = [format_time(v) if kind == "time" else v for kind, v in zip(self.parts, key, strict=True)]
        text = json.dumps({"list": self.name, "after": parts}, separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode("ascii").rstrip("=")

    def page(self, items: Sequence[T], limit: int, key: Callable[[T], Sequence]) -> tuple[list[T], str | None]:
        """The first ``limit`` of ``items`` (fetched as ``limit + 1``, already after the cursor and
        in order) and the next cursor: None when nothing follows them."""
        shown = list(items[:limit])
        if len(items) <= limit:
            return shown, None
        return shown, self.cursor(key(shown[-1]))


def _part(kind: str, value: object) -> object:
    if kind == "int":
        if type(value) is not int:
            raise TypeError(kind)
        return value
    if kind == "bool":
        if type(value) is not bool:
            raise TypeError(kind)
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(kind)
        return value
    return parse_time(value, "cursor")


GPRS = Listing("gprs", default_limit=100, max_limit=1000, parts=("int",))
EVENTS = Listing("events", default_limit=500, max_limit=5000, parts=("time", "int"))
QUEUE = Listing("queue", default_limit=100, max_limit=1000, parts=("bool", "int", "int"))
ALERTS = Listing("alerts", default_limit=100, max_limit=1000, parts=("time", "int"))
WORKLOADS = Listing("workloads", default_limit=100, max_limit=1000, parts=("str", "int", "str", "str"))
