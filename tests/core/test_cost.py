"""Cost arithmetic (core/cost.py) as tables: prices times windows, early and idle release, and
what falls within a period."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core import cost, lifecycle
from egs_hub.core.model import EndReason, GPRSpec

T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
H = timedelta(hours=1)
FOUR = ("g0", "g1", "g2", "g3")


def held(price: float | None, gpus=FOUR, duration=4 * H, start=T0):
    """A GPR of ``len(gpus)`` GPUs admitted at ``start`` for ``duration`` at ``price``."""
    spec = GPRSpec(slice="team", duration=duration, gpus=len(gpus))
    queued, _ = lifecycle.submit(1, spec, "ann", [], start - H)
    admitted, _ = lifecycle.admit(queued, gpus, ("n1",), start, price)
    return admitted


def ended(gpr, at: datetime, why: EndReason = EndReason.RELEASED_EARLY):
    provisioned, _ = lifecycle.mark_provisioned(gpr, "backend", gpr.window_start)
    releasing, _ = lifecycle.begin_release(provisioned, why, "ann", "", at)
    done, _ = lifecycle.complete(releasing, "backend", at)
    return done


@pytest.mark.parametrize(
    ("price", "gpus", "duration", "per_hour", "total"),
    [
        (2.5, 4, 2 * H, 10.0, 20.0),
        (2.5, 1, timedelta(minutes=30), 2.5, 1.25),
        (0.0, 8, H, 0.0, 0.0),  # free is a price: 0, not "no price"
        (None, 8, H, None, None),
    ],
)
def test_what_a_request_would_cost(price, gpus, duration, per_hour, total):
    assert cost.cost_per_hour(price, gpus) == per_hour
    estimated = cost.estimated_cost(price, gpus, duration)
    assert estimated is None if total is None else estimated == pytest.approx(total)


@pytest.mark.parametrize(
    ("gpr", "now", "reserved", "used"),
    [
        # held for the whole window, and past it
        (ended(held(3.0), T0 + 4 * H, EndReason.WINDOW_ENDED), T0 + 9 * H, 48.0, 48.0),
        # released early after 1 h: reserved the window, used an hour
        (ended(held(3.0), T0 + H), T0 + 9 * H, 48.0, 12.0),
        # released idle after 30 min
        (ended(held(3.0), T0 + H / 2, EndReason.IDLE_RELEASED), T0 + 9 * H, 48.0, 6.0),
        # still held: used until now
        (held(3.0), T0 + 2 * H, 48.0, 24.0),
        # no price: no cost, never 0
        (held(None), T0 + 2 * H, None, None),
    ],
    ids=["window", "early", "idle", "held", "no-price"],
)
def test_reserved_and_used_cost_of_a_gpr(gpr, now, reserved, used):
    assert cost.reserved_cost(gpr) == reserved
    assert cost.used_cost(gpr, now) == used


def test_a_gpr_that_never_held_gpus_costs_nothing_and_takes_its_price_at_admission():
    spec = GPRSpec(slice="team", duration=H, gpus=2)
    queued, _ = lifecycle.submit(1, spec, "ann", [], T0)
    assert cost.reserved_cost(queued) is None and cost.used_cost(queued, T0 + H) is None
    assert cost.used_gpu_hours(queued, T0, T0 + H, T0 + H) == 0.0
    admitted = held(4.0)
    assert admitted.price_per_gpu_hour == 4.0
    # requeued after an eviction, it waits with no price until its next window
    evicted = replace(admitted, end_reason=EndReason.EVICTED)
    requeued, _ = lifecycle.requeue(evicted, "planner", T0 + H)
    assert requeued.price_per_gpu_hour is None and requeued.window_start is None


@pytest.mark.parametrize(
    ("since", "until", "reserved", "used"),
    [
        (T0, T0 + 4 * H, 16.0, 8.0),  # the whole window; used until the early release at 2 h
        (T0 + H, T0 + 3 * H, 8.0, 4.0),  # the middle two hours
        (T0 - 5 * H, T0 + H, 4.0, 4.0),  # a period ending an hour in
        (T0 + 5 * H, T0 + 9 * H, 0.0, 0.0),  # after it
    ],
)
def test_gpu_hours_within_a_period(since, until, reserved, used):
    gpr = ended(held(1.0), T0 + 2 * H)
    assert cost.reserved_gpu_hours(gpr, since, until) == reserved
    assert cost.used_gpu_hours(gpr, since, until, T0 + 10 * H) == used
