"""MIG in the simulator (issue 23): a ``gpus`` cell below 1 asks for that part of a GPU, a
shape's ``mig`` layout splits its nodes' GPUs into instances as the service plans them, and a
replay with fractional jobs on MIG nodes is made again with the GPUs whole to show what
sharing changed."""

from __future__ import annotations

import json

import pytest

from egs_hub.cli import main
from egs_hub.core.model import Shape
from egs_hub.sim.cluster import read_inventory
from egs_hub.sim.engine import instance_for, replay
from egs_hub.sim.metrics import summarize
from egs_hub.sim.runner import run_policies
from egs_hub.sim.trace import SimInputError

from .builders import row, trace, write_cluster, write_csv

CLUSTER = """
shapes:
  h100: {model: H100, memory_gb: 80, gpus_per_node: 4}
  h100-mig: {model: H100, memory_gb: 80, gpus_per_node: 2, mig: {3g.40gb: 1, 1g.10gb: 4}}
clusters:
  c: {h100: 1, h100-mig: 1}
"""
# Forty jobs of a seventh of a GPU and four of half a GPU, an hour each, in the first ten minutes,
# and two jobs of a whole GPU.
ROWS = [row(15 * i, gpus="0.14", duration=3600) for i in range(40)]
ROWS += [row(60 * i, gpus="0.5", duration=3600) for i in range(4)]
ROWS += [row(30, gpus=2, duration=3600), row(90, gpus=2, duration=3600)]


def test_a_mig_layout_makes_one_planning_node_per_profile(tmp_path):
    inventory = read_inventory(write_cluster(tmp_path, CLUSTER))
    nodes = inventory.nodes()

    assert [(n.name, n.shape.name, len(n.gpus)) for n in nodes] == [
        ("c-n0000", "H100-80GB x4", 4),
        ("c-n0001:3g.40gb", "H100-80GB 3g.40gb x2", 2),
        ("c-n0001:1g.10gb", "H100-80GB 1g.10gb x8", 8),
    ]
    assert inventory.capacity == 6  # GPUs: an instance is a part of one
    assert [s.profile for s in inventory.instance_shapes()] == ["1g.10gb", "3g.40gb"]
    assert "1 x H100-80GB x2 (MIG 1 x 3g.40gb + 4 x 1g.10gb) in c" in inventory.describe()
    assert inventory.without_mig().instance_shapes() == []


@pytest.mark.parametrize(
    ("share", "want"),
    [(0.1, "H100-80GB 1g.10gb"), (1 / 7, "H100-80GB 1g.10gb"), (0.2, "H100-80GB 3g.40gb"), (0.5, None)],
)
def test_a_part_of_a_gpu_asks_for_the_smallest_instance_at_least_that_part(share, want):
    instances = [Shape("H100", 80, 8, "1g.10gb"), Shape("H100", 80, 2, "3g.40gb")]
    assert instance_for(share, instances) == want
    assert instance_for(share, []) is None  # no MIG: a whole GPU


def test_fractional_jobs_share_gpus_and_the_report_says_what_that_changed(tmp_path):
    inventory = read_inventory(write_cluster(tmp_path, CLUSTER))
    jobs = trace(tmp_path, ROWS)
    assert (jobs.jobs[0].share, jobs.jobs[0].gpus) == (0.14, 1)

    report, runs = run_policies(jobs, inventory, ["planner"])
    figures, whole = report["planner"], report["planner"]["without_mig"]

    assert figures["started"] == whole["started"] == len(ROWS)
    # On whole GPUs the 44 small jobs queue for 6 GPUs; on instances, 12 of them run at once.
    assert figures["wait_mean_s"] < whole["wait_mean_s"] / 2
    # Utilization counts GPU-equivalents: what jobs use is the same work, done sooner; what they
    # hold is an instance (1/7 or 3/7 of a GPU), not a whole GPU.
    assert figures["util_bound"] < whole["util_bound"]
    started = runs[0]
    small = [round(started.bound_gpus[i], 6) for i, job in enumerate(jobs.jobs) if job.share == 0.14]
    assert small == [round(1 / 7, 6)] * 40  # each holds a 1g.10gb instance


def test_fractional_jobs_without_mig_hold_whole_gpus_and_nothing_is_replayed_again(tmp_path):
    inventory = read_inventory(write_cluster(tmp_path, CLUSTER)).without_mig()
    report, _ = run_policies(trace(tmp_path, ROWS), inventory, ["planner"])
    assert "without_mig" not in report["planner"]
    assert summarize(replay(trace(tmp_path, ROWS), inventory, "planner"))["started"] == len(ROWS)


def test_simulate_prints_and_writes_the_figures_without_mig(tmp_path, capsys):
    out = tmp_path / "out.json"
    args = ["--csv", str(write_csv(tmp_path, ROWS)), "--cluster", str(write_cluster(tmp_path, CLUSTER))]
    assert main(["simulate", *args, "--policy", "planner", "--quiet", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for label in ("without MIG: wait mean", "without MIG: utilization bound", "without MIG: utilization used"):
        assert label in printed
    assert set(json.loads(out.read_text())["planner"]["without_mig"]) == {
        "started",
        "wait_mean_s",
        "wait_p50_s",
        "wait_p95_s",
        "util_bound",
        "util_used",
    }


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (CLUSTER.replace("1g.10gb: 4", "1g.10gb: 5"), "shapes.h100-mig.mig: the instances take 8 compute slices"),
        (CLUSTER.replace("{3g.40gb: 1, 1g.10gb: 4}", "[1g.10gb]"), "shapes.h100-mig.mig must map MIG profiles"),
        (
            CLUSTER + "pools:\n  burst: {cluster: c, shape: h100-mig, max: 2}\n",
            "pools.burst.shape has a MIG layout; a pool's nodes are whole GPUs",
        ),
    ],
)
def test_bad_mig_layouts_are_refused_naming_the_field(tmp_path, text, want):
    with pytest.raises(SimInputError, match=want):
        read_inventory(write_cluster(tmp_path, text))


@pytest.mark.parametrize("gpus", ["1.5", "-0.5", "0.0", "nan", "half"])
def test_a_gpus_cell_that_is_neither_a_count_nor_a_part_is_refused(tmp_path, gpus):
    with pytest.raises(SimInputError, match="gpus must be a positive whole number or a part of a GPU between 0 and 1"):
        trace(tmp_path, [row(0, gpus=gpus)])
