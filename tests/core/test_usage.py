"""Usage per period and key (core/usage.py) against hand-computed figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core import lifecycle
from egs_hub.core.model import EndReason, GPRSpec
from egs_hub.core.samples import GpuSample
from egs_hub.core.usage import UsageRow, day_of, period_start, periods, reading_totals, usage_rows

H = timedelta(hours=1)
MON = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday


def gpr(gpr_id, slice_name, user, start, duration, gpus, price, released=None):
    spec = GPRSpec(slice=slice_name, duration=duration, gpus=gpus)
    g, _ = lifecycle.submit(gpr_id, spec, user, [], start - H)
    g, _ = lifecycle.admit(g, tuple(f"{gpr_id}-{i}" for i in range(gpus)), ("n",), start, price)
    if released is not None:
        g, _ = lifecycle.mark_provisioned(g, "b", start)
        g, _ = lifecycle.begin_release(g, EndReason.RELEASED_EARLY, user, "", released)
        g, _ = lifecycle.complete(g, "b", released)
    return g


@pytest.mark.parametrize(
    ("time", "period", "start"),
    [
        (datetime(2026, 11, 4, 15, tzinfo=UTC), "week", MON),
        (MON, "week", MON),
        (datetime(2026, 11, 30, 23, tzinfo=UTC), "month", datetime(2026, 11, 1, tzinfo=UTC)),
        (datetime(2026, 12, 31, 23, tzinfo=UTC), "month", datetime(2026, 12, 1, tzinfo=UTC)),
    ],
)
def test_period_start(time, period, start):
    assert period_start(time, period) == start


def test_periods_run_from_the_one_of_since_to_the_one_of_now():
    months = periods(datetime(2026, 11, 20, tzinfo=UTC), datetime(2027, 1, 3, tzinfo=UTC), "month")
    assert [start.month for start, _ in months] == [11, 12, 1]
    assert months[1] == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def test_rows_per_week_and_slice_against_hand_computed_figures():
    now = MON + timedelta(days=9)  # Wednesday of the second week
    gprs = [
        # 2 GPUs, Sunday 22:00 to Monday 02:00 of week 2, at 3/GPU-hour: 2 h in each week
        gpr(1, "a", "ann", MON + timedelta(days=6, hours=22), 4 * H, 2, 3.0, released=MON + timedelta(days=7, hours=2)),
        # 4 GPUs for 10 h from Tuesday of week 1, released after 5 h, no price
        gpr(2, "a", "bob", MON + timedelta(days=1), 10 * H, 4, None, released=MON + timedelta(days=1, hours=5)),
        # 1 GPU held since Tuesday of week 2 for 2 days, at 2/GPU-hour: 24 h used by now
        gpr(3, "b", "ann", MON + timedelta(days=8), 48 * H, 1, 2.0),
    ]
    readings = {
        (1, MON + timedelta(days=6)): (80.0, 2),
        (1, MON + timedelta(days=7)): (20.0, 2),
        (2, day_of(MON)): (5.0, 1),
    }
    rows = usage_rows(gprs, lambda g: g.spec.slice, readings, MON, now, "week")
    week2 = MON + timedelta(days=7)
    assert rows == [
        UsageRow(MON, "a", 4 + 40, 4 + 20, 12.0, 12.0, 20.0, (80 + 5) / 3),  # readings of GPRs 1 and 2
        UsageRow(week2, "a", 4.0, 4.0, 12.0, 12.0, 0.0, 10.0),
        UsageRow(week2, "b", 48.0, 24.0, 96.0, 48.0, 0.0, None),
    ]
    by_user = usage_rows(gprs, lambda g: g.requested_by, {}, week2, now, "week")
    assert [(r.key, r.gpu_hours_used, r.cost) for r in by_user] == [("ann", 28.0, 60.0)]


def test_reading_totals_count_the_bound_gpus_readings_only():
    at = MON
    samples = [
        GpuSample(uuid="g1", time=at, utilization=90.0),
        GpuSample(uuid="g2", time=at, utilization=None),
        GpuSample(uuid="g3", time=at, utilization=40.0),
        GpuSample(uuid="free", time=at, utilization=100.0),
    ]
    assert reading_totals(samples, {"g1": 7, "g2": 7, "g3": 8}) == {7: (90.0, 1), 8: (40.0, 1)}
