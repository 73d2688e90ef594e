"""Rolling-week GPU-hours: each use clipped to [now - WEEK, now)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core.fairshare import Use
from egs_hub.core.quota import WEEK, week_gpu_hours

from .builders import NOW, SLICE, at

WEEK_HOURS = WEEK.total_seconds() / 3600


def use(gpus: int, since: float, until: float, slice_: str = SLICE) -> Use:
    """``gpus`` GPUs held from ``since`` to ``until`` (hours from NOW)."""
    return Use(slice_, gpus, at(since), at(until))


@dataclass(frozen=True)
class WeekCase:
    uses: list[Use]
    want: float  # GPU-hours of SLICE in the week before NOW


WEEKS = {
    "nothing used": WeekCase([], want=0),
    "inside the week": WeekCase([use(2, -5, -2)], want=6),
    "the whole week": WeekCase([use(3, -WEEK_HOURS, 0)], want=3 * WEEK_HOURS),
    "started before the week: only the part inside": WeekCase([use(2, -8 * 24, -6 * 24)], want=2 * 24),
    "ended before the week": WeekCase([use(8, -9 * 24, -WEEK_HOURS)], want=0),
    "running GPR: only the part before now": WeekCase([use(4, -1, 2)], want=4),
    "starts later": WeekCase([use(4, 1, 2)], want=0),
    "other slices do not count": WeekCase([use(1, -2, 0), use(5, -2, 0, slice_="other")], want=2),
    "uses add up": WeekCase([use(1, -3, -2), use(2, -1.5, -1)], want=2),
}


@pytest.mark.parametrize("case", WEEKS.values(), ids=WEEKS.keys())
def test_week_gpu_hours(case: WeekCase):
    assert week_gpu_hours(case.uses, SLICE, NOW) == pytest.approx(case.want, rel=1e-12)


HOURS = st.integers(min_value=-10 * 24, max_value=3 * 24)


@given(st.integers(min_value=1, max_value=8), HOURS, HOURS, HOURS)
def test_splitting_a_use_changes_nothing(gpus: int, a: int, b: int, c: int):
    """A use split at any point counts the same, and never more than the week holds."""
    start, middle, end = sorted((a, b, c))
    whole = week_gpu_hours([use(gpus, start, end)], SLICE, NOW)
    split = week_gpu_hours([use(gpus, start, middle), use(gpus, middle, end)], SLICE, NOW)
    assert split == pytest.approx(whole, rel=1e-12)
    assert 0 <= whole <= gpus * min(end - start, WEEK_HOURS)
