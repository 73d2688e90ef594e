"""GPU usage and cost per project, slice or user, per week or month (GET /usage): chargeback.

Vocabulary: a *period* is a calendar week (from Monday 00:00 UTC) or month (from the
1st, 00:00 UTC); a *key* is what rows are grouped by (a project, slice or user
name). Per period and key: the GPU-hours *reserved* (the GPRs' windows) and *used*
(while their GPUs were bound), their cost at each GPR's price (core/cost.py; GPU-hours
without a price are counted apart, never as free), and the *mean utilisation* of the
bound GPUs: the mean of every utilisation reading taken of them (per UTC day in the
store, ``Readings``), so that a long job and a short one weigh by how long they ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from . import cost
from .model import GPR
from .samples import GpuSample

PERIODS = ("week", "month")
GROUPS = ("project", "slice", "user")
DAY = timedelta(days=1)
Readings = Mapping[tuple[int, datetime], tuple[float, int]]  # (GPR id, UTC day) -> (sum of readings, count)


@dataclass(frozen=True)
class UsageRow:
    period_start: datetime
    key: str
    gpu_hours_reserved: float
    gpu_hours_used: float
    reserved_cost: float | None  # None: none of its GPU-hours had a price
    cost: float | None  # of the GPU-hours used
    unpriced_gpu_hours: float  # used without a price
    mean_utilization: float | None  # percent; None: no reading


def period_start(time: datetime, period: str) -> datetime:
    """The start of the week or month ``time`` is in (UTC)."""
    day = time.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def next_period(start: datetime, period: str) -> datetime:
    if period == "week":
        return start + timedelta(days=7)
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)


def periods(since: datetime, now: datetime, period: str) -> list[tuple[datetime, datetime]]:
    """The periods from the one ``since`` is in to the one ``now`` is in, as [start, end)."""
    spans, start = [], period_start(since, period)
    while start <= now:
        end = next_period(start, period)
        spans.append((start, end))
        start = end
    return spans


def day_of(time: datetime) -> datetime:
    return time.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def reading_totals(samples: Iterable[GpuSample], holders: Mapping[str, int]) -> dict[int, tuple[float, int]]:
    """Per GPR holding a sampled GPU (``holders``: GPU UUID -> GPR id), the sum and count of its
    GPUs' utilisation readings in ``samples`` (a reading of None is no reading)."""
    totals: dict[int, tuple[float, int]] = {}
    for sample in samples:
        gpr_id = holders.get(sample.uuid)
        if gpr_id is None or sample.utilization is None:
            continue
        total, count = totals.get(gpr_id, (0.0, 0))
        totals[gpr_id] = (total + sample.utilization, count + 1)
    return totals


@dataclass
class _Sums:
    reserved: float = 0.0
    used: float = 0.0
    reserved_cost: float | None = None
    cost: float | None = None
    unpriced: float = 0.0
    readings: float = 0.0
    count: int = 0


def _add(value: float | None, amount: float) -> float:
    return amount if value is None else value + amount


def usage_rows(
    gprs: Iterable[GPR],
    key_of: Callable[[GPR], str],
    readings: Readings,
    since: datetime,
    now: datetime,
    period: str,
) -> list[UsageRow]:
    """The usage of ``gprs`` (those whose windows started before ``now`` and had not ended by
    ``since``) per period and key, by period then key; a period and key with no GPU-hours has no row."""
    spans = periods(since, now, period)
    sums: dict[tuple[datetime, str], _Sums] = {}
    gprs = list(gprs)
    for gpr in gprs:
        key = key_of(gpr)
        price = gpr.price_per_gpu_hour
        for start, end in spans:
            # Reserved: the windows within the period, the part still ahead included (it is held
            # for them); used: until now.
            low = max(start, since)
            reserved = cost.reserved_gpu_hours(gpr, low, end)
            used = cost.used_gpu_hours(gpr, low, min(end, now), now)
            if not (reserved or used):
                continue
            into = sums.setdefault((start, key), _Sums())
            into.reserved += reserved
            into.used += used
            if price is None:
                into.unpriced += used
            else:
                into.reserved_cost = _add(into.reserved_cost, price * reserved)
                into.cost = _add(into.cost, price * used)
    start_of = {start: start for start, _ in spans}
    keys = {gpr.id: key_of(gpr) for gpr in gprs}
    for (gpr_id, day), (total, count) in readings.items():
        if gpr_id not in keys or day + DAY <= since or day >= now:
            continue
        read_in = start_of.get(period_start(day, period))
        sum_of = sums.get((read_in, keys[gpr_id])) if read_in is not None else None
        if sum_of is not None:
            sum_of.readings += total
            sum_of.count += count
    return [
        UsageRow(
            period_start=start,
            key=key,
            gpu_hours_reserved=s.reserved,
            gpu_hours_used=s.used,
            reserved_cost=s.reserved_cost,
            cost=s.cost,
            unpriced_gpu_hours=s.unpriced,
            mean_utilization=s.readings / s.count if s.count else None,
        )
        for (start, key), s in sorted(sums.items())
    ]
