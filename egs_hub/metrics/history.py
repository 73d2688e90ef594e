"""The last hour of every GPU's readings and its last day of utilisation, in memory; longer
history is Prometheus's job. Both start empty when the service starts.

Vocabulary: a *point* is the numeric part of a sample (the series fields); a
*series* is a GPU's points from ``since``, averaged per *step* (one point per
step that has readings; a reading that is None in every sample of a step is
None). The newest full sample of each GPU is kept beside the points. A
*bucket* is five minutes (epoch-aligned) of one GPU's utilisation, or of all
GPUs': the sum and the number of its readings, so that means over longer steps
and over several GPUs stay exact (means of readings, not means of means).
"""

from __future__ import annotations

import math
from array import array
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


BUCKET = timedelta(minutes=5)
DAY = timedelta(hours=24)


class History:
    """The fine last hour (``keep``) of every reading, and the coarse last day (``day``) of utilisation."""

    def __init__(self, keep: timedelta = timedelta(hours=1)):
        self.keep = keep
        self.day = UtilizationDay()
        self._points: dict[str, deque[Point]] = {}
        self._latest: dict[str, GpuSample] = {}

    def add(self, samples: Iterable[GpuSample], now: datetime) -> None:
        """Record ``samples`` and drop every point older than ``keep`` before ``now``."""
        samples = list(samples)
        self.day.add(samples, now)
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


class _Ring:
    """Buckets: slot ``i % slots`` holds bucket ``i`` (-1: never written), its readings' sum and count."""

    __slots__ = ("count", "index", "newest", "total")

    def __init__(self, slots: int):
        self.index = array("q", [-1]) * slots
        self.total = array("d", [0.0]) * slots
        self.count = array("q", [0]) * slots
        self.newest = -1

    def add(self, index: int, value: float) -> bool:
        """Count ``value`` in bucket ``index``, which must not be older than its slot's; True if it was empty."""
        slot = index % len(self.index)
        if self.index[slot] < index:
            self.index[slot], self.total[slot], self.count[slot] = index, 0.0, 0
        self.total[slot] += value
        self.count[slot] += 1
        self.newest = max(self.newest, index)
        return self.count[slot] == 1

    def older(self, index: int) -> bool:
        """Whether bucket ``index`` is older than what its slot holds now."""
        return self.index[index % len(self.index)] > index

    def get(self, index: int) -> tuple[float, int]:
        """Bucket ``index``'s sum and count; (0.0, 0) if its slot holds another bucket."""
        slot = index % len(self.index)
        return (self.total[slot], self.count[slot]) if self.index[slot] == index else (0.0, 0)


class UtilizationDay:
    """Each GPU's utilisation over the last ``day`` (24 h) in ``bucket`` (5-minute) buckets.

    Memory is bounded: per GPU a ring of 289 buckets (24 h and the current one), three 8-byte
    numbers each, about 7 KB, and one more ring for all GPUs together (with how many GPUs had
    readings in each bucket), so that the answer for every GPU does not loop over the GPUs. A GPU
    without a reading for 24 h is forgotten. Readings older than the ring, or None, are not counted.
    """

    def __init__(self, day: timedelta = DAY, bucket: timedelta = BUCKET):
        self.day = day
        self.bucket = bucket
        self.slots = math.ceil(day / bucket) + 1
        self._width = bucket.total_seconds()
        self._rings: dict[str, _Ring] = {}
        self._all = _Ring(self.slots)
        self._all_gpus = array("q", [0]) * self.slots

    def _index(self, time: datetime) -> int:
        return math.floor(time.timestamp() / self._width)

    def _time(self, index: int) -> datetime:
        return datetime.fromtimestamp(index * self._width, UTC)

    def floor(self, time: datetime) -> datetime:
        """The start of the bucket ``time`` falls in."""
        return self._time(self._index(time))

    def oldest(self, now: datetime) -> datetime:
        """The start of the oldest bucket kept at ``now``."""
        return self._time(self._index(now) - self.slots + 1)

    def gpus(self) -> set[str]:
        return set(self._rings)

    def add(self, samples: Iterable[GpuSample], now: datetime) -> None:
        """Count each sample's utilisation in its bucket; forget GPUs without a bucket left at ``now``."""
        oldest = self._index(now) - self.slots + 1
        for sample in samples:
            index = self._index(sample.time)
            if sample.utilization is None or index < oldest or self._all.older(index):
                continue
            ring = self._rings.setdefault(sample.uuid, _Ring(self.slots))
            if ring.older(index):
                continue
            if self._all.add(index, sample.utilization):
                self._all_gpus[index % self.slots] = 0
            if ring.add(index, sample.utilization):
                self._all_gpus[index % self.slots] += 1
        for uuid in [uuid for uuid, ring in self._rings.items() if ring.newest < oldest]:
            del self._rings[uuid]

    def used(self, uuids: Iterable[str] | None, since: datetime, step: timedelta, now: datetime) -> list[dict]:
        """One point per ``step`` from ``since`` up to ``now``: its ``time``, ``utilization`` (the mean of
        the readings of the GPUs ``uuids`` in the step, None without any; ``uuids`` None: every GPU) and
        ``gpus`` (the most GPUs with readings in one bucket of the step).

        ``since`` must be a bucket boundary within the day kept, and ``step`` a multiple of the bucket.
        Every GPU: one pass over the buckets; some GPUs: one pass per GPU.
        """
        first, last = self._index(since), self._index(now)
        if since != self._time(first) or first < last - self.slots + 1 or step % self.bucket:
            raise ValueError(
                f"since {since} must be a bucket of the day kept and step {step} a multiple of {self.bucket}"
            )
        per_step = step // self.bucket
        steps = max(0, -(-(last - first + 1) // per_step))
        totals, counts, gpus = [0.0] * steps, [0] * steps, [0] * steps
        buckets = range(first, last + 1)
        if uuids is None:
            per_bucket = [(*self._all.get(i), self._all_gpus[i % self.slots]) for i in buckets]
        else:
            per_bucket = [(0.0, 0, 0)] * len(buckets)
            for ring in [self._rings[uuid] for uuid in set(uuids) if uuid in self._rings]:
                for n, index in enumerate(buckets):
                    total, count = ring.get(index)
                    if count:
                        kept = per_bucket[n]
                        per_bucket[n] = (kept[0] + total, kept[1] + count, kept[2] + 1)
        for n, (total, count, with_readings) in enumerate(per_bucket):
            k = n // per_step
            totals[k] += total
            counts[k] += count
            gpus[k] = max(gpus[k], with_readings)
        return [
            {
                "time": since + k * step,
                "utilization": totals[k] / counts[k] if counts[k] else None,
                "gpus": gpus[k],
            }
            for k in range(steps)
        ]


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
