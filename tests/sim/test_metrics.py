"""Metric functions: percentiles, Jain's index, estimate kept share, overlap."""

from __future__ import annotations

import pytest

from egs_hub.sim.metrics import broken_by, jain, kept_share, overlap, percentile

PERCENTILES = {
    "empty": ([], 50, None),
    "one value": ([7.0], 99, 7.0),
    "median of odd count": ([3, 1, 2], 50, 2),
    "median of even count interpolates": ([1, 2, 3, 4], 50, 2.5),
    "p0 is the minimum": ([5, 1, 9], 0, 1),
    "p100 is the maximum": ([5, 1, 9], 100, 9),
    "p95 of 0..100": (list(range(101)), 95, 95),
    "p99 of 1..10 interpolates": (list(range(1, 11)), 99, 9.91),
}


@pytest.mark.parametrize("values,p,want", PERCENTILES.values(), ids=PERCENTILES.keys())
def test_percentile(values, p, want):
    got = percentile(values, p)
    assert got == (pytest.approx(want) if want is not None else None)


JAIN = {
    "empty": ([], None),
    "all equal": ([0.5, 0.5, 0.5], 1.0),
    "all zero is equal": ([0, 0], 1.0),
    "one gets all of n=4": ([1, 0, 0, 0], 0.25),
    "two of four": ([1, 1, 0, 0], 0.5),
    "1 and 2": ([1, 2], 9 / 10),  # (1 + 2)^2 / (2 * (1 + 4))
}


@pytest.mark.parametrize("values,want", JAIN.values(), ids=JAIN.keys())
def test_jain(values, want):
    got = jain(values)
    assert got == (pytest.approx(want) if want is not None else None)


KEPT = {
    "none started": ([], [], None),
    "on time": ([10.0], [10.0], 1.0),
    "earlier than estimated": ([10.0], [2.0], 1.0),
    "within the 60 s slack": ([10.0], [70.0], 1.0),
    "past the slack": ([10.0], [70.5], 0.0),
    "no estimate is not kept": ([None, 5.0], [3.0, 5.0], 0.5),
    "three of four": ([0, 0, 0, 0], [0, 30, 60, 61], 0.75),
}


@pytest.mark.parametrize("estimates,starts,want", KEPT.values(), ids=KEPT.keys())
def test_kept_share(estimates, starts, want):
    assert kept_share(estimates, starts) == want


BROKEN = {
    "none started": ([], [], []),
    "kept ones do not count": ([10.0, 10.0], [10.0, 70.0], []),
    "by how late it started": ([10.0, 0.0], [70.5, 200.0], [60.5, 200.0]),
    "no estimate is not counted": ([None], [500.0], []),
}


@pytest.mark.parametrize("estimates,starts,want", BROKEN.values(), ids=BROKEN.keys())
def test_broken_by(estimates, starts, want):
    assert broken_by(estimates, starts) == want


OVERLAP = {
    "inside": ((2, 5, 0, 10), 3),
    "straddles the end": ((8, 15, 0, 10), 2),
    "before": ((-5, -1, 0, 10), 0),
    "after": ((12, 15, 0, 10), 0),
    "covers": ((-1, 11, 0, 10), 10),
}


@pytest.mark.parametrize("args,want", OVERLAP.values(), ids=OVERLAP.keys())
def test_overlap(args, want):
    assert overlap(*args) == want
