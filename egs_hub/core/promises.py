"""Broken promises: when a queued GPR's estimate has moved too far past the start it was told,
and the event that tells its owner why (issue 21).

Vocabulary: the start a GPR was *told* is its first estimate, or the start its last
``estimate-moved`` event moved it to. Its estimate is *broken* when it is later than that by more
than ``planner.KEPT_SLACK``; the cause is the one the plans that moved it named last
(``Plan.moved``, ``planner.MOVED``). Pure: the service keeps what was told and writes the events.
"""

from __future__ import annotations

from datetime import datetime

from .lifecycle import PLANNER
from .model import Event
from .planner import KEPT_SLACK, MOVED
from .units import format_duration, format_time

ESTIMATE_MOVED = "estimate-moved"
UNRECORDED = "unrecorded"  # no plan that moved it named a cause (one made before a restart, say)
REORDERED = "reordered"  # an admin changed a priority in its band: the band was planned afresh
CAUSES = {**MOVED, REORDERED: "an admin changed priorities in its band, and the band was planned afresh"}


def broken(told: datetime, start: datetime | None) -> bool:
    """Whether an estimate of ``start`` breaks the promise of ``told``."""
    return start is not None and start > told + KEPT_SLACK


def moved_event(gpr_id: int, slice_name: str, told: datetime, start: datetime, cause: str, now: datetime) -> Event:
    """The event saying that the GPR's estimated start moved from ``told`` to ``start``, and why."""
    why = CAUSES.get(cause, "the plans that moved it named no cause")
    return Event(
        kind=ESTIMATE_MOVED,
        actor=PLANNER,
        reason=f"estimated start moved {format_duration(start - told)} later, to {format_time(start)}: {why}",
        time=now,
        gpr_id=gpr_id,
        slice=slice_name,
        data={
            "from": told.isoformat(),
            "to": start.isoformat(),
            "by_s": (start - told).total_seconds(),
            "cause": cause,
        },
    )
