"""Trait types for egs-hub's configuration: a unit gets its own type, not a comment.

``Duration`` is a length of time as the API writes it (core/units.py): whole
seconds, or units largest first (``"365d"``, ``"1d2h30m"``); a ``timedelta`` is
taken as it is. The value is always a ``timedelta``.
"""

from __future__ import annotations

from datetime import timedelta

from traitlets import TraitError, TraitType

from .core.errors import InvalidRequest
from .core.units import MAX_DURATION_SECONDS, format_duration, parse_duration


class Duration(TraitType):
    """A positive length of time, at most ``maximum`` (default: ten years, as the API's durations)."""

    info_text = 'a duration: whole seconds, or units largest first like "365d" or "1d2h30m"'

    def __init__(self, default_value: timedelta, *, maximum: timedelta = timedelta(seconds=MAX_DURATION_SECONDS), **kw):
        self.maximum = maximum
        super().__init__(default_value, **kw)

    def validate(self, obj, value) -> timedelta:
        if isinstance(value, timedelta):
            duration = value
        else:
            try:
                duration = parse_duration(value, self.name)
            except InvalidRequest as e:
                raise TraitError(str(e)) from None
        if not timedelta(0) < duration <= self.maximum:
            shown = format_duration(duration) if duration > timedelta(0) else str(duration)
            raise TraitError(
                f"{self.name} must be longer than zero and at most {format_duration(self.maximum)}, not {shown}"
            )
        return duration
