"""Two-level fair share (core/fairshare.py tree_factors): projects first, then slices within a
project; as rule tables, and as a week of hourly allocations in which every project with demand
gets its share whatever its slices do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core import fairshare
from egs_hub.core.model import GPRSpec, Project, SlicePolicy
from egs_hub.core.queue import PriorityQueue
from egs_hub.core.snapshot import Request

P = SlicePolicy()
T0 = datetime(2026, 11, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("usage", "projects", "project_policies", "want"),
    [
        # nothing used: everything 1
        ({}, {"a": "x", "b": "y"}, {}, {"a": (1.0, 1.0), "b": (1.0, 1.0)}),
        # one project used everything: its factor is its share's formula, the other's is 1
        ({"a": 10.0}, {"a": "x", "b": "y"}, {}, {"a": (0.25, 0.5), "b": (1.0, 1.0)}),
        # a heavy slice and an idle one in project x; project y used as much as x in total
        (
            {"a1": 9.0, "a2": 1.0, "b": 10.0},
            {"a1": "x", "a2": "x", "b": "y"},
            {},
            {"a1": (0.5, 2**-1.8), "a2": (0.5, 2**-0.2), "b": (0.5, 0.5)},
        ),
        # a project's share: x weighs 3, y 1 (its max_gpus); same use, x is further below its share
        (
            {"a": 5.0, "b": 5.0},
            {"a": "x", "b": "y"},
            {"x": Project("x", share=3), "y": Project("y", max_gpus=1)},
            {"a": (2 ** (-0.5 / 0.75), 0.5), "b": (2 ** (-0.5 / 0.25), 0.5)},
        ),
        # a slice with no project is in the default one
        ({"a": 1.0}, {}, {}, {"a": (0.5, 0.5)}),
    ],
    ids=["unused", "one-used-all", "heavy-slice", "project-shares", "default-project"],
)
def test_tree_factors(usage, projects, project_policies, want):
    policies = dict.fromkeys(want, P)
    made = fairshare.tree_factors(usage, policies, projects, project_policies)
    assert made.keys() == want.keys()
    for name, (project, own) in want.items():
        assert made[name] == (pytest.approx(project), pytest.approx(own)), name


def test_a_heavy_slice_of_one_project_does_not_starve_another_project():
    # x's slice a used a lot, x's slice a2 nothing; y used a little: y's request goes first, even
    # before a2's, whose own factor is 1.
    made = fairshare.tree_factors({"a": 50.0, "b": 5.0}, {"a": P, "a2": P, "b": P}, {"a": "x", "a2": "x", "b": "y"}, {})
    queue = PriorityQueue(
        [
            Request(1, GPRSpec(slice="a2", duration=timedelta(hours=1), gpus=1), T0),
            Request(2, GPRSpec(slice="b", duration=timedelta(hours=1), gpus=1), T0 + timedelta(minutes=1)),
        ],
        made,
    )
    assert [r.gpr_id for r in queue] == [2, 1]


HOUR = timedelta(hours=1)


@settings(max_examples=40, deadline=None)
@given(
    slices_per_project=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    weights=st.lists(st.integers(1, 4), min_size=4, max_size=4),
    capacity=st.integers(2, 8),
    heavy=st.integers(0, 3),
)
def test_every_project_with_demand_gets_its_share_over_a_week(slices_per_project, weights, capacity, heavy):
    """Every slice always has demand; each hour the queue's order hands out ``capacity`` GPUs, one per
    request, from the decayed usage at the hour's start. Over a week each project gets at least its
    share of the GPU-hours, less the hour's slack (one hour of the whole capacity), however many
    slices it has; a ``heavy`` project's first slice asks for GPUs first in every hour."""
    projects = {f"p{i}": Project(f"p{i}", share=weights[i]) for i in range(len(slices_per_project))}
    slice_project = {f"p{i}s{j}": f"p{i}" for i, n in enumerate(slices_per_project) for j in range(n)}
    policies = dict.fromkeys(slice_project, P)
    shares = fairshare.project_shares(projects)
    usage: dict[str, float] = {}
    got = dict.fromkeys(projects, 0)
    hours = 7 * 24
    for hour in range(hours):
        now = T0 + hour * HOUR
        factors = fairshare.tree_factors(usage, policies, slice_project, projects)
        heavy_slice = f"p{heavy % len(projects)}s0"
        requests = [
            # the heavy slice's requests were submitted earlier: they win every tie
            Request(
                i * 100 + k,
                GPRSpec(slice=name, duration=HOUR, gpus=1),
                now - (HOUR if name == heavy_slice else timedelta(0)),
            )
            for i, name in enumerate(sorted(slice_project))
            for k in range(capacity)
        ]
        served = list(PriorityQueue(requests, factors))[:capacity]
        uses = [fairshare.Use(r.spec.slice, 1, now, now + HOUR) for r in served]
        usage = fairshare.decay(usage, HOUR)
        for name, used in fairshare.decayed_usage(uses, now + HOUR).items():
            usage[name] = usage.get(name, 0.0) + used
        for r in served:
            got[slice_project[r.spec.slice]] += 1
    total = hours * capacity
    for project, share in shares.items():
        assert got[project] >= share * total - 2 * capacity, (project, got, shares)
