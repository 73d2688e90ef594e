"""Reading traces and inventories: the CSV format, the Philly scenario, cluster YAML, --load."""

from __future__ import annotations

import math

import pytest

from egs_hub.sim.cluster import offered_load, one_shape, read_inventory, scale_to_load
from egs_hub.sim.philly import read_philly
from egs_hub.sim.trace import SimInputError, read_csv

from .builders import row, write_csv


def test_csv_defaults_and_order(tmp_path):
    path = write_csv(
        tmp_path,
        [
            row(5, gpus=2, duration=60, actual=30, priority=150),
            row(1, nodes=1, duration=60),
            row(1, gpus=1, duration=60, actual=600),  # longer than its window: cut at the end
        ],
    )
    trace = read_csv(path)
    assert [(j.submit_s, j.gpus, j.nodes) for j in trace.jobs] == [(1, None, 1), (1, 1, None), (5, 2, None)]
    assert [j.actual_s for j in trace.jobs] == [60, 60, 30]
    assert [j.priority for j in trace.jobs] == [101, 101, 150]
    assert trace.span_s == 61  # the end of the last job if none waited
    assert trace.slices == ["team"]


BAD_CSV = {
    "wrong header": (["submit,slice"], "trace.csv:1: the header must be submit_s,slice,gpus,nodes"),
    "both gpus and nodes": ([row(0, gpus=1, nodes=1)], "trace.csv:2: set exactly one of gpus and nodes"),
    "neither gpus nor nodes": ([row(0)], "trace.csv:2: set exactly one of gpus and nodes"),
    "negative submit": ([row(-1, gpus=1)], "trace.csv:2: submit_s must be a non-negative number"),
    "negative duration": ([row(0, gpus=1), row(0, gpus=1, duration=-5)], "trace.csv:3: duration_s must be a positive"),
    "zero gpus": ([row(0, gpus=0)], "trace.csv:2: gpus must be a positive whole number, got '0'"),
    "fractional nodes": ([row(0, nodes="1.5")], "trace.csv:2: nodes must be a positive whole number"),
    "not a number": ([row(0, gpus=1, actual="soon")], "trace.csv:2: actual_s must be a positive number"),
    "priority out of range": ([row(0, gpus=1, priority=301)], "trace.csv:2: priority must be a whole number from 1"),
    "empty slice": ([row(0, gpus=1, slice="")], "trace.csv:2: slice is empty"),
    "short row": (["0,team,1"], "trace.csv:2: expected 7 fields, got 3"),
    "no jobs": ([], "trace.csv: the trace has no jobs"),
}


@pytest.mark.parametrize("rows,want", BAD_CSV.values(), ids=BAD_CSV.keys())
def test_bad_csv(rows, want, tmp_path):
    header = rows.pop(0) if rows and rows[0].startswith("submit,") else None
    path = write_csv(tmp_path, rows, **({"header": header} if header else {}))
    with pytest.raises(SimInputError) as e:
        read_csv(path)
    assert str(e.value).startswith(f"{tmp_path}/") and want in str(e.value)


def test_missing_csv(tmp_path):
    with pytest.raises(SimInputError, match=r"nope\.csv: no such file"):
        read_csv(tmp_path / "nope.csv")


PHILLY_ROWS = [
    "timestamp,duration,num_gpus,gpu_time,cluster",
    "2017-10-01 00:00:10,3600.0,1,3600.0,6214e9",  # whole hour: reserves exactly 1 h
    "2017-09-30 23:59:59,10.0,1,10.0,6214e9",  # before the window
    "2017-10-02 00:00:00,3601.0,12,43212.0,103959",  # more than 8 GPUs: 2 whole nodes for 2 h
    ",66.0,1,66.0,6214e9",  # no timestamp
    "2017-10-01 00:00:05,66.0,1,66.0,23dbec",  # not one of the 11 VCs
    "2017-12-01 00:00:00,66.0,1,66.0,6214e9",  # after the window
    "",
]


def test_philly_scenario(tmp_path):
    path = tmp_path / "philly.csv"
    path.write_text("\n".join(PHILLY_ROWS))
    trace = read_philly(path)
    jobs = [(j.submit_s, j.slice, j.gpus, j.nodes, j.duration_s, j.actual_s, j.used_gpus) for j in trace.jobs]
    assert jobs == [(10, "6214e9", 1, None, 3600, 3600, 1), (86400, "103959", None, 2, 7200, 3601, 12)]
    assert trace.span_s == 61 * 86400
    assert trace.shares["6214e9"] == 512 and len(trace.shares) == 11
    assert trace.limited(days=1).jobs == trace.jobs[:1]


def test_philly_missing(tmp_path):
    with pytest.raises(SimInputError, match=r"the Philly trace is not at .*: pass --trace-file PATH"):
        read_philly(tmp_path / "philly.csv")


def test_scale_to_load(tmp_path):
    # 10 jobs of 4 GPUs for 100 s, one every 100 s: 4,000 GPU-s over a 1,000 s span; at
    # load 0.5 that is 8 GPUs of capacity: 2 nodes of 4.
    rows = [row(i * 100, gpus=4, duration=100) for i in range(10)]
    trace = read_csv(write_csv(tmp_path, rows))
    assert trace.span_s == 1000
    scaled = scale_to_load(one_shape(100, 4), trace, 0.5)
    assert scaled.node_count == 2
    assert offered_load(trace, scaled) == pytest.approx(0.5)
    # The largest job still fits however high the load.
    assert scale_to_load(one_shape(1, 2), trace, 1000.0).node_count == 2


CLUSTER_YAML = """
shapes:
  big: {model: H100, memory_gb: 80, gpus_per_node: 8}
  small: {model: L4, memory_gb: 24, gpus_per_node: 4}
clusters:
  east: {big: 2, small: 1}
  west: {small: 3}
slices: {team-a: 2}
"""


def test_cluster_yaml(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER_YAML)
    inventory = read_inventory(path)
    assert inventory.capacity == 2 * 8 + 4 * 4 and inventory.node_count == 6
    nodes = inventory.nodes()
    assert [(n.cluster, n.shape.name) for n in nodes][:3] == [
        ("east", "H100-80GB x8"),
        ("east", "H100-80GB x8"),
        ("east", "L4-24GB x4"),
    ]
    assert nodes[0].gpus[0] == f"{nodes[0].name}-g0" and len({g for n in nodes for g in n.gpus}) == 32
    assert inventory.shares == {"team-a": 2.0}
    assert inventory.projects == {} and inventory.project_of("team-a") == "default"


def test_cluster_yaml_with_projects(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        CLUSTER_YAML + "projects:\n  research: {share: 3, slices: [team-a, team-b]}\n  ops: {slices: [c]}\n"
    )
    inventory = read_inventory(path)
    assert inventory.projects == {"team-a": "research", "team-b": "research", "c": "ops"}
    assert {p.name: p.share for p in inventory.project_policies.values()} == {"research": 3.0, "ops": 1.0}


BAD_YAML = {
    "not a mapping": ("- 1\n", "expected mappings 'shapes' and 'clusters'"),
    "unknown shape": ("shapes: {}\nclusters: {east: {big: 1}}\n", "clusters.east.big: no shape 'big'"),
    "negative count": (CLUSTER_YAML.replace("small: 3", "small: -3"), "clusters.west.small must be a whole number"),
    "bad gpus_per_node": (CLUSTER_YAML.replace("gpus_per_node: 4", "gpus_per_node: 0"), "shapes.small.gpus_per_node"),
    "no nodes": (
        "shapes: {a: {memory_gb: 1, gpus_per_node: 1}}\nclusters: {e: {a: 0}}\n",
        "the clusters have no nodes",
    ),
    "not YAML": ("shapes: [\n", "cannot read the cluster file"),
    "projects not a mapping": (CLUSTER_YAML + "projects: [a]\n", "'projects' must map project names"),
    "project without slices list": (CLUSTER_YAML + "projects: {r: {slices: a}}\n", "projects.r must have 'slices'"),
    "project share": (CLUSTER_YAML + "projects: {r: {share: -1, slices: []}}\n", "projects.r.share must be"),
    "slice in two projects": (
        CLUSTER_YAML + "projects: {r: {slices: [a]}, s: {slices: [a]}}\n",
        "slice 'a' is in projects r and s",
    ),
}


@pytest.mark.parametrize("text,want", BAD_YAML.values(), ids=BAD_YAML.keys())
def test_bad_cluster_yaml(text, want, tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(SimInputError) as e:
        read_inventory(path)
    assert want in str(e.value) and str(path) in str(e.value)


def test_one_shape_needs_positive_sizes():
    with pytest.raises(SimInputError, match="at least 1"):
        one_shape(0, 8)
    assert math.isclose(one_shape(3, 8).capacity, 24)
