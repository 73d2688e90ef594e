"""A step function of time: the planner's record of how much of something is in use.

Times are float seconds from the plan's ``now`` (0.0); the last step lasts
forever. A node's profile counts its free GPUs; a slice's profiles count its
active GPRs and the GPUs they hold. Small and flat on purpose: a node rarely
has more than a few dozen steps, and lists beat trees at that size.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

INF = math.inf


def end_of(start: float, duration: float) -> float:
    """When a window of ``duration`` seconds that starts at ``start`` ends, on the microsecond
    grid of the times it comes from and goes back to (datetimes): a float sum can land a hair
    after the microsecond, and a window planned to start when this one ends would then not
    fit when it is held again on the next pass."""
    return round(start + duration, 6)


class Profile:
    """``values[k]`` holds on ``[times[k], times[k + 1])``; ``times[0]`` is 0.0."""

    __slots__ = ("times", "values")

    def __init__(self, value: int):
        self.times: list[float] = [0.0]
        self.values: list[int] = [value]

    def copy(self) -> Profile:
        clone = Profile.__new__(Profile)
        clone.times = self.times.copy()
        clone.values = self.values.copy()
        return clone

    def at(self, t: float) -> int:
        return self.values[bisect_right(self.times, t) - 1]

    def add(self, start: float, end: float, delta: int) -> None:
        """Add ``delta`` on ``[start, end)``; ``end`` may be ``INF``."""
        times, values = self.times, self.values
        i = self._split(start)
        j = len(times) if end == INF else self._split(end)
        values[i:j] = [v + delta for v in values[i:j]]
        if j < len(times) and values[j] == values[j - 1]:
            del times[j], values[j]
        if i > 0 and values[i] == values[i - 1]:
            del times[i], values[i]

    def add_many(self, changes: list[tuple[float, float, int]]) -> None:
        """``add`` of every ``(start, end, delta)`` at once: one pass over the steps, not one each."""
        if not changes:
            return
        jumps: dict[float, int] = {}
        for start, end, delta in changes:
            jumps[start] = jumps.get(start, 0) + delta
            if end != INF:
                jumps[end] = jumps.get(end, 0) - delta
        old_times, old_values = self.times, self.values
        times: list[float] = []
        values: list[int] = []
        k, shift = 0, 0
        for t in sorted({*old_times, *jumps}):
            while k + 1 < len(old_times) and old_times[k + 1] <= t:
                k += 1
            shift += jumps.get(t, 0)
            value = old_values[k] + shift
            if not values or value != values[-1]:
                times.append(t)
                values.append(value)
        self.times, self.values = times, values

    def _split(self, t: float) -> int:
        """Index of the step starting at ``t``, splitting the step that contains it."""
        times = self.times
        k = bisect_right(times, t) - 1
        if times[k] == t:
            return k
        times.insert(k + 1, t)
        self.values.insert(k + 1, self.values[k])
        return k + 1

    def minimum(self, start: float, end: float) -> int:
        """The lowest value on ``[start, end)`` (at ``start`` when the range is empty)."""
        return min(self.values[self._steps(start, end)])

    def maximum(self, start: float, end: float) -> int:
        """The highest value on ``[start, end)`` (at ``start`` when the range is empty)."""
        return max(self.values[self._steps(start, end)])

    def _steps(self, start: float, end: float) -> slice:
        """The steps that hold on some of ``[start, end)``: at least the one holding at ``start``."""
        times = self.times
        first = bisect_right(times, start) - 1
        return slice(first, max(first + 1, bisect_left(times, end, first + 1)))

    def earliest_at_least(self, need: int, duration: float, lower: float) -> float:
        """Earliest ``t >= lower`` with values ``>= need`` on all of ``[t, t + duration)``; INF if none."""
        times, values = self.times, self.values
        last = len(times) - 1
        run = INF
        for k in range(bisect_right(times, lower) - 1, last + 1):
            if values[k] >= need:
                if run == INF:
                    run = max(times[k], lower)
                if k == last or times[k + 1] - run >= duration:
                    return run
            else:
                run = INF
        return INF

    def earliest_at_most(self, limit: int, duration: float, lower: float) -> float:
        """Earliest ``t >= lower`` with values ``<= limit`` on all of ``[t, t + duration)``; INF if none."""
        times, values = self.times, self.values
        last = len(times) - 1
        run = INF
        for k in range(bisect_right(times, lower) - 1, last + 1):
            if values[k] <= limit:
                if run == INF:
                    run = max(times[k], lower)
                if k == last or times[k + 1] - run >= duration:
                    return run
            else:
                run = INF
        return INF

    def runs_at_least(self, need: int, duration: float, lower: float, upper: float) -> list[float]:
        """Starts (clipped to ``lower``) of the runs with values ``>= need`` lasting ``duration``
        that begin before ``upper``."""
        times, values = self.times, self.values
        last = len(times) - 1
        starts = []
        run = INF
        for k in range(bisect_right(times, lower) - 1, last + 1):
            if values[k] >= need:
                if run == INF:
                    run = max(times[k], lower)
                    if run >= upper:
                        break
                if k == last or values[k + 1] < need:
                    end = INF if k == last else times[k + 1]
                    if end - run >= duration:
                        starts.append(run)
            else:
                run = INF
        return starts
