"""The in-memory last hour of GPU readings and last day of utilisation (metrics/history.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core.samples import GpuSample
from egs_hub.metrics.history import History, UtilizationDay

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def at(seconds: float, uuid: str = "g0", **readings) -> GpuSample:
    return GpuSample(uuid=uuid, time=T0 + timedelta(seconds=seconds), **readings)


def test_series_averages_each_step_and_skips_missing_readings():
    history = History()
    for t, util, temp in [(0, 10.0, 50.0), (5, 30.0, None), (10, 50.0, 60.0), (25, 70.0, 70.0)]:
        history.add([at(t, utilization=util, temperature_c=temp)], T0 + timedelta(seconds=t))

    points = history.series("g0", T0, timedelta(seconds=10))

    assert [(p["time"], p["utilization"], p["temperature_c"], p["power_w"]) for p in points] == [
        (T0, 20.0, 50.0, None),
        (T0 + timedelta(seconds=10), 50.0, 60.0, None),
        (T0 + timedelta(seconds=20), 70.0, 70.0, None),  # no point for an empty step
    ]
    assert history.series("g0", T0 + timedelta(seconds=11), timedelta(seconds=60))[0]["utilization"] == 70.0
    assert history.series("unknown", T0, timedelta(seconds=10)) == []


def test_keeps_the_last_hour_and_forgets_gpus_gone_quiet_for_longer():
    history = History(keep=timedelta(hours=1))
    history.add([at(0), at(0, "g1")], T0)
    history.add([at(1800)], T0 + timedelta(seconds=1800))
    history.add([at(3700)], T0 + timedelta(seconds=3700))

    assert [p["time"] for p in history.series("g0", T0, timedelta(seconds=1))] == [
        T0 + timedelta(seconds=1800),
        T0 + timedelta(seconds=3700),
    ]
    assert set(history.latest()) == {"g0"}


def test_fresh_holds_only_recent_latest_samples():
    history = History()
    history.add([at(0, "old"), at(50, "new")], T0 + timedelta(seconds=50))

    assert set(history.fresh(T0 + timedelta(seconds=60), timedelta(seconds=30))) == {"new"}
    assert history.latest()["old"].time == T0


# The last day of utilisation in 5-minute buckets (T0 is a bucket boundary).
MINUTE = timedelta(minutes=1)


def test_used_utilization_is_the_mean_of_the_readings_per_step():
    day = UtilizationDay()
    for minute, g0, g1 in [(0, 10.0, 90.0), (1, 30.0, None), (4, 50.0, 70.0), (6, 80.0, None), (16, 40.0, None)]:
        now = T0 + minute * MINUTE
        day.add([at(minute * 60, "g0", utilization=g0), at(minute * 60, "g1", utilization=g1)], now)

    five = day.used(None, T0, 5 * MINUTE, T0 + 16 * MINUTE)
    assert [(p["time"], p["utilization"], p["gpus"]) for p in five] == [
        (T0, (10.0 + 30.0 + 50.0 + 90.0 + 70.0) / 5, 2),
        (T0 + 5 * MINUTE, 80.0, 1),
        (T0 + 10 * MINUTE, None, 0),
        (T0 + 15 * MINUTE, 40.0, 1),  # the current bucket, up to now
    ]
    # A 10-minute step: every reading of its two buckets; the most GPUs with readings in one of them.
    ten = day.used(None, T0, 10 * MINUTE, T0 + 16 * MINUTE)
    assert [(p["utilization"], p["gpus"]) for p in ten] == [
        ((10.0 + 30.0 + 50.0 + 80.0 + 90.0 + 70.0) / 6, 2),
        (40.0, 1),
    ]
    # Some GPUs: the same answer from their own buckets; unknown ones count for nothing.
    assert day.used(["g0", "g1", "unknown"], T0, 10 * MINUTE, T0 + 16 * MINUTE) == ten
    assert [(p["utilization"], p["gpus"]) for p in day.used(["g1"], T0, 5 * MINUTE, T0 + 6 * MINUTE)] == [
        (80.0, 1),
        (None, 0),
    ]
    assert day.used([], T0, 5 * MINUTE, T0 + 6 * MINUTE) == [
        {"time": T0, "utilization": None, "gpus": 0},
        {"time": T0 + 5 * MINUTE, "utilization": None, "gpus": 0},
    ]
    assert day.used(None, T0 + MINUTE * 20, 5 * MINUTE, T0) == []  # since after now
    for since, step in [(T0, 7 * MINUTE), (T0 + MINUTE, 5 * MINUTE), (T0 - timedelta(hours=25), 5 * MINUTE)]:
        with pytest.raises(ValueError, match="bucket of the day kept and step"):
            day.used(None, since, step, T0 + MINUTE)


def test_keeps_24_hours_in_a_bounded_ring_and_forgets_gpus_quiet_for_a_day():
    day = UtilizationDay()
    assert day.slots == 289 and day.floor(T0 + 7 * MINUTE) == T0 + 5 * MINUTE
    start = T0
    # Two days of a reading every minute: the ring never grows past its 289 buckets.
    for minute in range(0, 48 * 60, 1):
        now = start + minute * MINUTE
        day.add([at(minute * 60, "g0", utilization=float(minute // 5 % 2 * 100))], now)
        if minute == 60:
            day.add([at(minute * 60, "quiet", utilization=50.0)], now)
    now = start + (48 * 60 - 1) * MINUTE
    for ring in (day._rings["g0"], day._all):
        assert len(ring.index) == len(ring.total) == len(ring.count) == 289
    assert day.oldest(now) == now - timedelta(hours=24) - 4 * MINUTE  # the bucket holding now - 24 h
    points = day.used(None, day.oldest(now), 5 * MINUTE, now)
    assert len(points) == 289 and all(p["gpus"] == 1 for p in points)
    assert day.used(["g0", "quiet"], day.oldest(now), 5 * MINUTE, now) == points
    assert {p["utilization"] for p in points} == {0.0, 100.0}  # every bucket holds only its own 5 minutes
    assert day.gpus() == {"g0"}  # "quiet" had its one reading 47 h ago

    # A late reading older than the ring, or one without utilisation, is not counted.
    day.add([at(0, "g0", utilization=100.0), at(48 * 3600, "new", utilization=None)], now)
    assert day.gpus() == {"g0"}
    assert day.used(None, day.oldest(now), 5 * MINUTE, now) == points


def test_history_feeds_the_day_with_every_sample():
    history = History()
    history.add([at(0, utilization=20.0), at(0, "g1", utilization=None)], T0)
    history.add([at(10, utilization=40.0)], T0 + timedelta(seconds=10))

    assert history.day.used(None, T0, 5 * MINUTE, T0 + timedelta(seconds=10)) == [
        {"time": T0, "utilization": 30.0, "gpus": 1}
    ]
