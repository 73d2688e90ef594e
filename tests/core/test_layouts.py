"""Re-partitioning a node (core/layouts.py): its planning nodes and layout, the default mig-parted
config names, and when a change may be made."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core import layouts, sharing
from egs_hub.core.errors import Conflict, PolicyViolation
from egs_hub.core.model import GPU, Node, Shape
from egs_hub.core.sharing import check_layout, profile_memory_gb, profile_slices

from .builders import NOW

WHOLE = [Node("h1", "c1", Shape("H100", 80, 2), ("GPU-0", "GPU-1"))]
SPLIT = [
    Node("m1:1g.10gb", "c1", Shape("H100", 80, 4, "1g.10gb"), tuple(f"MIG-a{k}" for k in range(4))),
    Node("m1:3g.40gb", "c1", Shape("H100", 80, 2, "3g.40gb"), ("MIG-b0", "MIG-b1")),
]
SPLIT_GPUS = [
    GPU(f"MIG-a{k}", k, "m1:1g.10gb", "c1", "H100", 10240, parent=f"GPU-{k // 2}", profile="1g.10gb") for k in range(4)
] + [GPU(f"MIG-b{k}", k, "m1:3g.40gb", "c1", "H100", 40960, parent=f"GPU-{k}", profile="3g.40gb") for k in range(2)]
SHARED = [Node("t1:shared", "c1", Shape("H100", 80, 8, replicas=4), tuple(f"GPU-0::{k}" for k in range(8)))]
PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


def test_a_planning_node_is_on_its_machine():
    assert [sharing.host_of(n) for n in ("h1", "m1:1g.10gb", "t1:shared")] == ["h1", "m1", "t1"]
    assert layouts.planning_nodes("m1", {"1g.10gb": 2, "3g.40gb": 1}) == ["m1:1g.10gb", "m1:3g.40gb"]
    assert layouts.planning_nodes("h1", None) == ["h1"]


def test_the_layout_of_a_machine_is_its_instances_per_gpu():
    assert layouts.current_layout(WHOLE, []) is None
    assert layouts.current_layout(SPLIT, SPLIT_GPUS) == {"1g.10gb": 2, "3g.40gb": 1}
    assert layouts.instances(SPLIT) == {"1g.10gb": 4, "3g.40gb": 2}
    # Kubernetes does not say which GPU an instance is on: the last change done says, when it has those profiles.
    unplaced = [dataclasses.replace(g, parent=None) for g in SPLIT_GPUS]
    assert layouts.current_layout(SPLIT, unplaced) is layouts.UNKNOWN
    assert layouts.current_layout(SPLIT, unplaced, {"1g.10gb": 2, "3g.40gb": 1}) == {"1g.10gb": 2, "3g.40gb": 1}
    assert layouts.current_layout(SPLIT, unplaced, {"1g.10gb": 7}) is layouts.UNKNOWN
    assert layouts.describe(layouts.UNKNOWN) == "MIG instances (how many per GPU is not known)"
    layouts.check_change("m1", SPLIT, layouts.UNKNOWN, None, ())  # not known: never "the same"
    assert layouts.describe({"1g.10gb": 2, "3g.40gb": 1}) == "2 x 1g.10gb, 1 x 3g.40gb per GPU"
    assert layouts.describe(None) == "whole GPUs"


@pytest.mark.parametrize(
    ("layout", "want"),
    [
        (None, "all-disabled"),
        ({"1g.10gb": 7}, "all-1g.10gb"),
        ({"2g.20gb": 3}, "all-2g.20gb"),
        ({"3g.40gb": 2}, "all-3g.40gb"),
        ({"1g.20gb": 4}, "all-1g.20gb"),
        ({"7g.80gb": 1}, "all-7g.80gb"),
        ({"1g.10gb": 6}, None),  # fewer than a GPU holds: no default config gives it
        ({"1g.10gb": 3, "2g.20gb": 2}, None),
    ],
)
def test_the_default_mig_parted_configs_are_named_for_the_layouts_they_give(layout, want):
    assert layouts.default_mig_config("H100", 80, layout) == want


@given(st.sampled_from(PROFILES))
def test_all_of_a_profile_is_the_most_instances_that_fit_one_gpu(profile):
    most = layouts.all_of("H100", 80, profile)
    check_layout("H100", 80, {profile: most})
    over = (most + 1) * profile_slices(profile) > 7 or (most + 1) * profile_memory_gb(profile) > 80
    assert most >= 1 and over


CHANGES = {
    "whole to instances": (WHOLE, None, {"1g.10gb": 7}, (), None),
    "instances to whole": (SPLIT, {"1g.10gb": 2, "3g.40gb": 1}, None, (), None),
    "held": (WHOLE, None, {"1g.10gb": 7}, (4, 3, 4), (Conflict, r"held by GPR\(s\) 3, 4")),
    "the same": (SPLIT, {"1g.10gb": 2, "3g.40gb": 1}, {"3g.40gb": 1, "1g.10gb": 2}, (), (Conflict, "already")),
    "too many slices": (WHOLE, None, {"3g.40gb": 3}, (), (PolicyViolation, "9 compute slices")),
    "too much memory": (WHOLE, None, {"1g.20gb": 5}, (), (PolicyViolation, "100 GB")),
    "time-sliced": (SHARED, None, {"1g.10gb": 7}, (), (Conflict, "time-sliced")),
}


@pytest.mark.parametrize("case", CHANGES.values(), ids=CHANGES.keys())
def test_a_change_is_made_only_to_a_free_machine_into_a_layout_that_fits(case):
    nodes, current, layout, holders, refused = case
    if refused is None:
        layouts.check_change("m", nodes, current, layout, holders)
        return
    error, said = refused
    with pytest.raises(error, match=said):
        layouts.check_change("m", nodes, current, layout, holders)


def test_a_change_is_ready_after_the_configured_time():
    assert layouts.ready_by(NOW, 300) == NOW + timedelta(minutes=5)


# Layout targets

SEVEN = {"1g.10gb": 7}
H100 = "H100-80GB"


def machine(host: str, layout=None, free=True, gpu_type=H100, cluster="c1") -> layouts.Machine:
    return layouts.Machine(cluster, host, gpu_type, layout, free)


@pytest.mark.parametrize(
    ("targets", "machines", "moves"),
    [
        pytest.param(
            [layouts.Target(H100, SEVEN, 2)],
            [machine("a"), machine("b"), machine("c")],
            [("a", SEVEN), ("b", SEVEN)],
            id="short: the first free ones",
        ),
        pytest.param([layouts.Target(H100, SEVEN, 1)], [machine("a"), machine("b", SEVEN)], [], id="met: nothing"),
        pytest.param(
            [layouts.Target(H100, SEVEN, 2)], [machine("a", free=False), machine("b")], [("b", SEVEN)], id="held stay"
        ),
        pytest.param([layouts.Target(H100, SEVEN, 1)], [machine("a", gpu_type="A100-80GB")], [], id="another GPU type"),
        pytest.param([layouts.Target(H100, SEVEN, 1, cluster="c2")], [machine("a")], [], id="another cluster"),
        pytest.param(
            [layouts.Target(H100, SEVEN, 1)], [machine("a", layouts.UNKNOWN)], [("a", SEVEN)], id="an unknown layout"
        ),
        pytest.param(
            [layouts.Target(H100, SEVEN, 1), layouts.Target(H100, None, 1)],
            [machine("a", SEVEN), machine("b", SEVEN)],
            [("b", None)],
            id="a target's extra machine goes to another",
        ),
        pytest.param(
            [layouts.Target(H100, SEVEN, 1), layouts.Target(H100, None, 1)],
            [machine("a", SEVEN)],
            [],
            id="a kept machine never moves",
        ),
        pytest.param(
            [layouts.Target(H100, SEVEN, 1), layouts.Target(H100, {"3g.40gb": 2}, 1)],
            [machine("a", {"3g.40gb": 2}), machine("b", {"2g.20gb": 3})],
            [("b", SEVEN)],
            id="machines no target wants go first",
        ),
        pytest.param(
            [layouts.Target(H100, SEVEN, 1), layouts.Target(H100, None, 1)],
            [machine("a")],
            [],
            id="the first target does not take the second's machine",
        ),
    ],
)  # fmt: skip
def test_layout_targets_move_free_machines_toward_them(targets, machines, moves):
    assert [(m.host, t.layout) for m, t in layouts.target_moves(targets, machines)] == moves


LAYOUT_CHOICES = [None, SEVEN, {"3g.40gb": 2}, layouts.UNKNOWN]
machines_strategy = st.lists(
    st.builds(
        machine,
        host=st.sampled_from("abcdefgh"),
        layout=st.sampled_from(LAYOUT_CHOICES),
        free=st.booleans(),
        gpu_type=st.sampled_from([H100, "A100-40GB"]),
        cluster=st.sampled_from(["c1", "c2"]),
    ),
    max_size=10,
    unique_by=lambda m: (m.cluster, m.host),
)
targets_strategy = st.lists(
    st.builds(
        layouts.Target,
        gpu_type=st.sampled_from([H100, "A100-40GB"]),
        layout=st.sampled_from(LAYOUT_CHOICES[:3]),
        nodes=st.integers(0, 4),
        cluster=st.sampled_from([None, "c1", "c2"]),
    ),
    max_size=3,
)


@given(targets_strategy, machines_strategy)
def test_layout_target_moves_are_free_kept_apart_and_settle(targets, machines):
    moves = layouts.target_moves(targets, machines)
    moved = [(m.cluster, m.host) for m, _ in moves]
    assert len(moved) == len(set(moved))
    for m, target in moves:
        assert m.free and target.covers(m) and not target.holds(m)
    for target in targets:  # a target never loses a machine it needs
        holding = [m for m in machines if target.holds(m)]
        lost = [m for m, t in moves if t is not target and target.holds(m)]
        assert len(holding) - len(lost) >= min(target.nodes, len(holding))
    after = {(m.cluster, m.host): m for m in machines}
    for m, target in moves:
        after[(m.cluster, m.host)] = dataclasses.replace(m, layout=target.layout, free=False)
    assert layouts.target_moves(targets, list(after.values())) == []
