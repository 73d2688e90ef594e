"""replay(): GPR starts and estimates per policy on small traces checked by hand."""

from __future__ import annotations

import gc
from dataclasses import dataclass, replace

import pytest

from egs_hub.sim.engine import POLICIES, replay
from egs_hub.sim.metrics import summarize

from .builders import HAND_ROWS, inventory, row, trace

US = 1e-6  # the planner frees an ended window's GPUs just after the pass that ends it


@dataclass(frozen=True)
class Case:
    rows: list[str]
    policy: str
    nodes: int = 1
    gpus_per_node: int = 4
    want_starts: list[float | None] | None = None  # per job, seconds; None in it: never started
    want_estimates: list[float | None] | None = None  # start estimated at submit
    want_bound_gpus: list[int] | None = None  # GPUs each job held


CASES = {
    # A at 0; B and E when A releases at 99 (their estimate was A's window end, 100); G
    # backfills the free GPU at 4 (done by 54, before E's window); F would overlap E's
    # window, so it waits for B and E to release at 198.
    "planner: conservative backfill": Case(
        HAND_ROWS,
        "planner",
        want_starts=[0, 99, 99, 198, 4],
        want_estimates=[0, 100, 100, 200, 4],
    ),
    # The same, as promised at submit: G backfills at once, F gets the first window after E's.
    "planner: estimates at submit": Case(HAND_ROWS, "planner", want_estimates=[0, 100, 100, 200, 4]),
    # Nobody passes the GPR ahead: G waits for F although a GPU is free at 4.
    "fifo: strict order": Case(HAND_ROWS, "fifo", want_starts=[0, 99, 99, 198, 198]),
    # Only the head (B) holds a reservation: F takes the free GPU at 3 (it does not delay B),
    # so E, head once B starts at 99, waits for F's release at 152; G backfills at 99
    # (its window ends at 149, before E's reservation at 153).
    "easy: only the head holds a reservation": Case(HAND_ROWS, "easy", want_starts=[0, 99, 152, 3, 99]),
    # No early release: the window end is an event, its pass ends A, and B starts on the
    # pass that B's estimate (just after A's end) schedules.
    "a start can be due without another event": Case(
        [row(0, gpus=4, duration=100), row(0, gpus=4, duration=100)], "fifo", want_starts=[0, 100 + US]
    ),
    "a nodes GPR holds whole nodes": Case(
        [row(0, nodes=2, duration=100, actual=50), row(1, gpus=1, duration=10)],
        "planner",
        nodes=2,
        want_starts=[0, 50],
        want_bound_gpus=[8, 1],
    ),
    "a GPR larger than the inventory never starts and has no estimate": Case(
        [row(0, gpus=8, duration=10), row(1, gpus=1, duration=10)],
        "planner",
        want_starts=[None, 1],
        want_estimates=[None, 1],
    ),
    "higher priority goes first": Case(
        [
            row(0, gpus=4, duration=100, actual=99),
            row(1, gpus=4, duration=100, actual=99),
            row(2, gpus=4, duration=100, actual=99, priority=201),
        ],
        "fifo",
        want_starts=[0, 198, 99],
    ),
    # x and y ask at the same instant; x already used GPUs, so fair share puts y first.
    "fair share: the slice that used less goes first": Case(
        [
            row(0, gpus=4, duration=100, slice="x"),
            row(1, gpus=4, duration=100, slice="x"),
            row(1, gpus=4, duration=100, slice="y"),
        ],
        "planner",
        want_estimates=[0, 200, 100],
    ),
    # The same: y's promise (100, A's window end) is kept, so y runs before x.
    "a promise at a window end is kept": Case(
        [
            row(0, gpus=4, duration=100, slice="x"),
            row(1, gpus=4, duration=100, slice="x"),
            row(1, gpus=4, duration=100, slice="y"),
        ],
        "planner",
        want_starts=[0, 200 + 2 * US, 100 + US],
    ),
}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=name) for name, c in CASES.items()],
)
def test_replay(case: Case, tmp_path):
    run = replay(trace(tmp_path, case.rows), inventory(case.nodes, case.gpus_per_node), case.policy)
    if case.want_starts is not None:
        assert run.start == [pytest.approx(s, abs=1e-9) if s is not None else None for s in case.want_starts]
    if case.want_estimates is not None:
        assert run.estimate == [pytest.approx(e, abs=1e-9) if e is not None else None for e in case.want_estimates]
    if case.want_bound_gpus is not None:
        assert run.bound_gpus == case.want_bound_gpus
    capacity = case.nodes * case.gpus_per_node
    assert all(0 <= used <= bound <= capacity for _, _, bound, used in run.samples)
    assert run.samples[-1][1:] == (run.start.count(None), 0, 0)  # only unservable GPRs left, nothing held
    assert len(run.pass_s) == len(run.samples)


def test_the_objects_made_before_are_left_out_of_collections_during_the_replay_only(tmp_path):
    frozen_during = []
    before = gc.get_freeze_count()
    replay(
        trace(tmp_path, HAND_ROWS),
        inventory(),
        "planner",
        on_started=lambda _: frozen_during.append(gc.get_freeze_count()),
    )
    assert frozen_during and min(frozen_during) > before
    assert gc.get_freeze_count() == before


def test_objects_the_process_froze_stay_frozen(tmp_path):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        replay(trace(tmp_path, HAND_ROWS), inventory(), "planner")
        # Not unfrozen (0) and nothing more frozen (the replay's own objects would add thousands); a frozen
        # object the replay lets go of (another test's leftover) leaves the count, so it may fall a little.
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


# Figures of the hand-checked trace. Span: 152 s (F's submit + run); capacity 4 GPUs.
# Asked: 3*99 + 2*99 + 2*99 + 149 + 49 = 891 GPU-s, so the offered load is 891 / 608.
# The planner's bound GPU-s within the span: A 3*99 + B 2*53 + E 2*53 + G 49 = 558.
FIGURES = {
    "planner": {"wait_mean_s": (0 + 98 + 97 + 195 + 0) / 5, "estimate_kept_share": 1.0, "util_bound": 558 / 608},
    "fifo": {"wait_mean_s": (0 + 98 + 97 + 195 + 194) / 5, "wait_p50_s": 98},
    "easy": {"wait_mean_s": (0 + 98 + 150 + 0 + 95) / 5, "wait_p50_s": 95},
}


@pytest.mark.parametrize("policy", POLICIES)
def test_hand_figures(policy, tmp_path):
    figures = summarize(replay(trace(tmp_path, HAND_ROWS), inventory(), policy))
    assert figures["offered_load"] == pytest.approx(891 / 608)
    assert figures["gprs"] == figures["started"] == 5
    assert figures["jain"] == pytest.approx(1.0)  # one slice
    for key, want in FIGURES[policy].items():
        assert figures[key] == pytest.approx(want), key


def test_projects_share_first_and_waits_are_reported_per_project(tmp_path):
    """One node of 4 GPUs. Project x's slice a1 held it all first; then x's idle slice a2 and y's slice
    b ask at the same time: with projects, y goes first (x used its share through a1); with slices
    only, a2 (never used) would go first."""
    rows = [
        row(0, slice="a1", gpus=4, duration=100),
        row(1, slice="a2", gpus=4, duration=100),
        row(1, slice="b", gpus=4, duration=100),
    ]
    flat = replay(trace(tmp_path, rows), inventory(), "planner")
    assert flat.start == [0, 100 + US, 200 + 2 * US]
    projects = {"a1": "x", "a2": "x", "b": "y"}
    tree = replay(trace(tmp_path, rows), replace(inventory(), projects=projects), "planner")
    assert tree.start == [0, 200 + 2 * US, 100 + US]
    figures = summarize(tree)
    assert figures["projects"]["x"]["wait_mean_s"] == pytest.approx((0 + 199) / 2)
    assert figures["projects"]["y"]["wait_mean_s"] == pytest.approx(99)
    assert set(summarize(flat)["projects"]) == {"default"}


OVERTAKEN = [
    row(0, gpus=4, duration=100, slice="x"),
    row(1, gpus=4, duration=100, slice="x"),  # promised 100, when the first ends
    row(2, gpus=4, duration=100, slice="y"),  # y has used nothing: it goes ahead, and starts at 100
]


@pytest.mark.parametrize(("policy", "causes"), [("planner", {"overtaken": 1}), ("easy", {"unnamed": 1})])
def test_a_broken_estimate_is_counted_by_the_cause_that_moved_it(policy, causes, tmp_path):
    run = replay(trace(tmp_path, OVERTAKEN), inventory(), policy)
    assert run.estimate[1] == pytest.approx(100 + US) and run.start[1] == pytest.approx(200 + 2 * US)
    if policy == "planner":
        assert set(run.moved) == {1} and run.moved[1]["overtaken"] == pytest.approx(100)
    assert summarize(run)["estimate_broken_causes"] == causes
