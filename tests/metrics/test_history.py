"""The in-memory last hour of GPU readings (metrics/history.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from egs_hub.core.samples import GpuSample
from egs_hub.metrics.history import History

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
