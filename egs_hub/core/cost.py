"""Cost: prices per GPU-hour, and what a request or a GPR costs at them.

Vocabulary: a *price* is money per GPU-hour of one shape on one cluster, set by an
admin (``PUT /clusters/{name}/prices``); none set is "no price" and every cost
built on it is None, never 0. A GPR takes its price when its window starts (the
price of the cluster and shape of its nodes then), so a later change of prices
does not rewrite what was charged. Its *reserved* cost is its GPUs over its whole
window; its *used* cost is its GPUs over the time they were bound: from the
window's start until they were released (early, idle, evicted or at the window's
end), or until now while they are held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from .model import GPR

HOUR = timedelta(hours=1)
Prices = Mapping[tuple[str, str], float]  # (cluster, shape name as /inventory names it) -> price per GPU-hour


def hours(span: timedelta) -> float:
    return max(span, timedelta(0)) / HOUR


def cost_per_hour(price: float | None, gpus: int) -> float | None:
    """What ``gpus`` GPUs at ``price`` cost an hour; None without a price."""
    return None if price is None else price * gpus


def estimated_cost(price: float | None, gpus: int, duration: timedelta) -> float | None:
    """What ``gpus`` GPUs at ``price`` cost over ``duration``; None without a price."""
    per_hour = cost_per_hour(price, gpus)
    return None if per_hour is None else per_hour * hours(duration)


def bound_until(gpr: GPR, now: datetime) -> datetime | None:
    """Until when ``gpr`` held (or holds) its GPUs: when it ended, else now; None when it never held any."""
    if gpr.window_start is None or not gpr.bound_gpus:
        return None
    return gpr.ended_at or now


def overlap(start: datetime, end: datetime, since: datetime, until: datetime) -> timedelta:
    """How much of [start, end) falls in [since, until)."""
    return max(min(end, until) - max(start, since), timedelta(0))


def reserved_gpu_hours(gpr: GPR, since: datetime, until: datetime) -> float:
    """GPU-hours of ``gpr``'s window (all of its GPUs, whole window) within [since, until)."""
    if gpr.window_start is None or gpr.window_end is None:
        return 0.0
    return len(gpr.bound_gpus) * hours(overlap(gpr.window_start, gpr.window_end, since, until))


def used_gpu_hours(gpr: GPR, since: datetime, until: datetime, now: datetime) -> float:
    """GPU-hours ``gpr`` held its GPUs within [since, until)."""
    end = bound_until(gpr, now)
    if end is None or gpr.window_start is None:  # bound_until is None when window_start is
        return 0.0
    return len(gpr.bound_gpus) * hours(overlap(gpr.window_start, end, since, until))


def reserved_cost_between(gprs: Iterable[GPR], since: datetime, until: datetime) -> float:
    """What the priced windows of ``gprs`` within [since, until) cost (a budget's spend)."""
    return sum(
        g.price_per_gpu_hour * reserved_gpu_hours(g, since, until) for g in gprs if g.price_per_gpu_hour is not None
    )


def reserved_cost(gpr: GPR) -> float | None:
    if gpr.price_per_gpu_hour is None or gpr.window_start is None or gpr.window_end is None:
        return None
    return gpr.price_per_gpu_hour * reserved_gpu_hours(gpr, gpr.window_start, gpr.window_end)


def used_cost(gpr: GPR, now: datetime) -> float | None:
    if gpr.price_per_gpu_hour is None or gpr.window_start is None:
        return None
    return gpr.price_per_gpu_hour * used_gpu_hours(gpr, gpr.window_start, now, now)
