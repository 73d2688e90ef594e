"""The last hour of every GPU's readings, in memory; longer history is Prometheus's job.

Vocabulary: a *point* is the numeric part of a sample (the series fields); a
*series* is a GPU's points from ``since``, averaged per *step* (one point per
step that has readings; a reading that is None in every sample of a step is
None). The newest full sample of each GPU is kept beside the points.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from ..core.samples import GpuSample

SERIES_FIELDS = (
    "utilization",
    "memory_utilization",
    "memory_used_mib",
    "temperature_c",
    "power_w",
    "sm_clock_mhz",
)

Point = tuple[float, ...]  # (epoch seconds, *SERIES_FIELDS)


class History:
    def __init__(self, keep: timedelta = timedelta(hours=1)):
        self.keep = keep
        self._points: dict[str, deque[Point]] = {}
        self._latest: dict[str, GpuSample] = {}

    def add(self, samples: Iterable[GpuSample], now: datetime) -> None:
        """Record ``samples`` and drop every point older than ``keep`` before ``now``."""
        for sample in samples:
            self._latest[sample.uuid] = sample
            self._points.setdefault(sample.uuid, deque()).append(
                (sample.time.timestamp(), *(getattr(sample, name) for name in SERIES_FIELDS))
            )
        oldest = (now - self.keep).timestamp()
        for uuid in list(self._points):
            points = self._points[uuid]
            while points and points[0][0] < oldest:
                points.popleft()
            if not points:
                del self._points[uuid]
                del self._latest[uuid]

    def latest(self) -> dict[str, GpuSample]:
        return dict(self._latest)

    def fresh(self, now: datetime, within: timedelta) -> dict[str, GpuSample]:
        """The newest sample of each GPU, if it was taken within ``within`` of ``now``."""
        return {uuid: s for uuid, s in self._latest.items() if now - s.time <= within}

    def series(self, uuid: str, since: datetime, step: timedelta) -> list[dict]:
        """The GPU's readings from ``since``, one averaged point per ``step``; [] for an unknown GPU."""
        start, width = since.timestamp(), step.total_seconds()
        buckets: dict[int, list[Point]] = {}
        for point in self._points.get(uuid, ()):
            if point[0] >= start:
                buckets.setdefault(int((point[0] - start) // width), []).append(point)
        return [
            {
                "time": datetime.fromtimestamp(start + k * width, UTC),
                **{name: _mean(p[i + 1] for p in points) for i, name in enumerate(SERIES_FIELDS)},
            }
            for k, points in sorted(buckets.items())
        ]


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
