"""GPU-hours a slice used in the rolling week, for its policy's ``max_gpu_hours``.

Vocabulary: the *rolling week* at ``now`` is [now - WEEK, now); a *use* (fairshare.Use)
is GPUs a slice held over an interval. A running GPR counts up to ``now`` only.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from .fairshare import Use

WEEK = timedelta(days=7)


def week_gpu_hours(uses: Iterable[Use], slice: str, now: datetime) -> float:
    """GPU-hours ``slice`` used in [now - WEEK, now), each use clipped to that range.

    A running GPR passes its window end as ``end``; only the part before ``now`` counts.
    """
    since = now - WEEK
    hours = 0.0
    for use in uses:
        if use.slice != slice:
            continue
        held = min(use.end, now) - max(use.start, since)
        if held > timedelta(0):
            hours += use.gpus * held / timedelta(hours=1)
    return hours
