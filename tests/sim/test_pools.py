"""Dynamic node pools in the simulator: the ``pools:`` YAML, the replay growing a pool after its delay and
giving idle nodes back (never below ``min``, never above ``max``, never one a GPR holds), the figures
(node-hours, scale-ups, give-backs, utilization over the GPUs present) and ``--json``."""

from __future__ import annotations

import json

import pytest

from egs_hub.cli import main
from egs_hub.core.node_pools import ASK_SLACK
from egs_hub.sim.cluster import Inventory, offered_load, read_inventory, scale_to_load
from egs_hub.sim.engine import POLICIES, Replay, replay
from egs_hub.sim.metrics import summarize
from egs_hub.sim.pools import ASK, GIVE_BACK, JOIN, MIN, sizes_over_time
from egs_hub.sim.report import table
from egs_hub.sim.trace import SimInputError

from .builders import inventory, pool, row, trace, with_pools, write_cluster, write_csv

POOL_KEYS = {
    "pool_node_hours",
    "pool_gpu_hours",
    "pool_scale_ups",
    "pool_nodes_added",
    "pool_give_backs",
    "pool_peak_nodes",
    "util_bound_present",
    "util_used_present",
    "capacity_max_gpus",
    "pools",
}
CLUSTER = """
shapes:
  h100: {model: H100, memory_gb: 80, gpus_per_node: 8}
  l4: {model: L4, memory_gb: 24, gpus_per_node: 4}
clusters:
  east: {h100: 2}
  west: {}
"""
POOL = "pools:\n  burst: {cluster: east, shape: h100, max: 4}\n"


def test_pools_yaml(tmp_path):
    text = CLUSTER + (
        "pools:\n"
        "  burst: {cluster: east, shape: h100, min: 1, max: 4, scale_up_delay: 10m, scale_down_idle: 1h30m}\n"
        "  spot: {cluster: west, shape: l4, max: 2, scale_up_delay: 90, scale_down_idle: 120.5}\n"
    )
    inv = read_inventory(write_cluster(tmp_path, text))
    burst, spot = inv.pools
    assert (burst.name, burst.cluster, burst.shape.name, burst.min_nodes, burst.max_nodes) == (
        "burst",
        "east",
        "H100-80GB x8",
        1,
        4,
    )
    assert (burst.scale_up_delay.total_seconds(), burst.scale_down_idle.total_seconds()) == (600, 5400)
    assert (spot.scale_up_delay.total_seconds(), spot.scale_down_idle.total_seconds()) == (90, 120.5)
    # The standing capacity: the node groups and the pools' min nodes; the pools' max on top.
    assert (inv.capacity, inv.node_count, inv.max_capacity) == (2 * 8 + 8, 3, 2 * 8 + 4 * 8 + 2 * 4)
    assert inv.describe() == (
        "2 x H100-80GB x8 in east, pool burst: 1-4 x H100-80GB x8 in east, "
        "pool spot: 0-2 x L4-24GB x4 in west (24 GPUs standing, up to 56)"
    )
    # Defaults: min 0, 10 minutes to join, 30 minutes idle.
    (only,) = read_inventory(write_cluster(tmp_path, CLUSTER + POOL)).pools
    assert (only.min_nodes, only.scale_up_delay.total_seconds(), only.scale_down_idle.total_seconds()) == (0, 600, 1800)


def bad(fields: str, name: str = "burst") -> str:
    return CLUSTER + f"pools:\n  {name}: {{{fields}}}\n"


BAD_POOLS = {
    "not a mapping": (CLUSTER + "pools: [burst]\n", "'pools' must map pool names to pools"),
    "unknown shape": (bad("cluster: east, shape: a100, max: 2"), "pools.burst.shape: no shape 'a100' under 'shapes'"),
    "unknown cluster": (bad("cluster: north, shape: h100, max: 2"), "pools.burst.cluster: no cluster 'north'"),
    "min above max": (bad("cluster: east, shape: h100, min: 3, max: 2"), "pools.burst.min (3) is above its max (2)"),
    "negative min": (bad("cluster: east, shape: h100, min: -1, max: 2"), "pools.burst.min must be a whole number"),
    "fractional max": (bad("cluster: east, shape: h100, max: 1.5"), "pools.burst.max must be a whole number"),
    "max of 0": (bad("cluster: east, shape: h100, max: 0"), "pools.burst.max must be at least 1"),
    "missing max": (bad("cluster: east, shape: h100"), "pools.burst.max is missing"),
    "negative delay": (
        bad("cluster: east, shape: h100, max: 2, scale_up_delay: -5"),
        "pools.burst.scale_up_delay must be a number of seconds above 0",
    ),
    "no delay": (bad("cluster: east, shape: h100, max: 2, scale_up_delay: 0"), "pools.burst.scale_up_delay must be"),
    "bad duration": (
        bad("cluster: east, shape: h100, max: 2, scale_down_idle: 5 minutes"),
        'pools.burst.scale_down_idle must be a number of seconds above 0 or a duration such as "10m"',
    ),
    "unknown field": (bad("cluster: east, shape: h100, max: 2, idle: 5"), "pools.burst.idle: unknown field"),
    "a name no label has": (bad("cluster: east, shape: h100, max: 2", name="'a+b'"), "pools.a+b: a pool's name"),
    "no node standing": (
        "shapes: {h: {memory_gb: 80, gpus_per_node: 8}}\nclusters: {e: {}}\n"
        "pools: {p: {cluster: e, shape: h, max: 2}}\n",
        "the clusters have no nodes: give a node group nodes, or a pool a min above 0",
    ),
}


@pytest.mark.parametrize(("text", "want"), BAD_POOLS.values(), ids=BAD_POOLS.keys())
def test_bad_pools_yaml(text, want, tmp_path):
    path = write_cluster(tmp_path, text)
    with pytest.raises(SimInputError) as e:
        read_inventory(path)
    assert str(e.value).startswith(f"{path}: ") and want in str(e.value)


def test_load_scales_the_node_groups_and_keeps_the_pools(tmp_path):
    # 10 jobs of 4 GPUs for 100 s, one every 100 s: 4,000 GPU-s over 1,000 s. At load 0.5 that is
    # 8 GPUs standing: the pool's min node gives 4, so the node group keeps 1 node of 4.
    tr = trace(tmp_path, [row(i * 100, gpus=4, duration=100) for i in range(10)])
    scaled = scale_to_load(with_pools(inventory(100, 4), pool(min_nodes=1, max_nodes=5)), tr, 0.5)
    assert (scaled.groups[0].count, scaled.pools) == (1, (pool(min_nodes=1, max_nodes=5),))
    assert offered_load(tr, scaled) == pytest.approx(0.5)
    # The largest job fits on the node group and what the pool may add.
    wide = trace(tmp_path, [row(0, nodes=4, duration=100)])
    assert scale_to_load(with_pools(inventory(1, 4), pool(max_nodes=3)), wide, 100.0).groups[0].count == 1
    assert scale_to_load(with_pools(inventory(1, 4), pool(max_nodes=2)), wide, 100.0).groups[0].count == 2
    with pytest.raises(SimInputError, match="--load scales the node groups"):
        scale_to_load(with_pools(Inventory(()), pool(min_nodes=1)), tr, 0.5)


def joins(run: Replay) -> dict[str, float]:
    return {e.node: e.time for e in run.pool_events if e.kind in (JOIN, MIN)}


def given_back(run: Replay) -> dict[str, float]:
    return {e.node: e.time for e in run.pool_events if e.kind == GIVE_BACK}


def check_invariants(run: Replay) -> None:
    """What must hold of any replay with pools."""
    limits = {p.name: p for p in run.inventory.pools}
    for name, steps in sizes_over_time(run.pool_events).items():
        assert all(limits[name].min_nodes <= n <= limits[name].max_nodes for _, n in steps), (name, steps)
    joined, back = joins(run), given_back(run)
    asked = sum(e.count for e in run.pool_events if e.kind == ASK)
    assert asked >= sum(1 for e in run.pool_events if e.kind == JOIN)
    for i, nodes in enumerate(run.placed):
        for node in nodes:
            if node in joined:  # a pool's node: the GPR starts after it joined, ends before it is given back
                assert run.start[i] >= joined[node]
                assert node not in back or run.bound_end[i] <= back[node]
            else:
                assert "+" not in node  # nothing is bound on a joining node


# A long queue on one node of 4 GPUs: 12 jobs of 4 GPUs for 1,000 s, a second apart.
LONG_QUEUE = [row(i, gpus=4, duration=1000) for i in range(12)]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_long_queue_grows_the_pool_to_its_max_after_the_delay(policy, tmp_path):
    run = replay(trace(tmp_path, LONG_QUEUE), with_pools(inventory(1, 4), pool(max_nodes=3, delay=600)), policy)
    check_invariants(run)
    asks = [e for e in run.pool_events if e.kind == ASK]
    joined = joins(run)
    # The first pass asks for a node for the second job; nodes join 600 s after they were asked for.
    assert asks[0].time == 1.0 and sum(e.count for e in asks) == 3 == len(joined)
    assert sorted(joined.values()) == sorted(e.time + 600 for e in asks for _ in range(e.count))
    on_pool = [i for i, nodes in enumerate(run.placed) if nodes[0].startswith("burst-")]
    assert run.start[on_pool[0]] == min(joined.values())
    assert max(n for _, n in sizes_over_time(run.pool_events)["burst"]) == 3
    figures = summarize(run)
    assert (figures["pool_peak_nodes"], figures["pool_scale_ups"], figures["pool_nodes_added"]) == (3, len(asks), 3)
    assert figures["started"] == 12


def test_idle_nodes_are_given_back_after_scale_down_idle_down_to_min(tmp_path):
    # Two bursts a day apart; the pool keeps one node, adds up to 3 and gives them back 30 min after they idle.
    rows = [*LONG_QUEUE, *(row(86400 + i, gpus=4, duration=1000, actual=500) for i in range(8))]
    run = replay(
        trace(tmp_path, rows), with_pools(inventory(1, 4), pool(min_nodes=1, max_nodes=4, idle=1800)), "planner"
    )
    check_invariants(run)
    back, joined = given_back(run), joins(run)
    assert [e.node for e in run.pool_events if e.kind == MIN] == ["burst-p0001"]
    assert len(back) == len(joined) - 1 > 0  # all but the one the pool keeps
    for node, time in back.items():
        idle_from = max([joined[node], *(run.bound_end[i] for i, n in enumerate(run.placed) if node in n)])
        assert time == pytest.approx(idle_from + 1800)
    steps = sizes_over_time(run.pool_events)["burst"]
    assert steps[-1][1] == 1  # back to min
    assert any(t > 86400 and n > 1 for t, n in steps)  # and grown again for the second burst


def test_a_window_later_than_the_delay_asks_in_time(tmp_path):
    """A 3-node job needs both nodes of the group (busy until 3,600 s) and one of the pool: the engine
    plans again when the pool must be asked so that the node joins by then, not at the start."""
    rows = [row(0, nodes=2, duration=3600), row(1, nodes=3, duration=1000)]
    run = replay(trace(tmp_path, rows), with_pools(inventory(2, 4), pool(max_nodes=2, delay=600)), "planner")
    check_invariants(run)
    (ask,) = [e for e in run.pool_events if e.kind == ASK]
    assert ask.time == 3600 - 600 - ASK_SLACK.total_seconds()
    assert run.start[1] == pytest.approx(3600, abs=1e-5)


# A (4 GPUs) holds the one node of 4 until 3,600 s; B (4 GPUs) and C (2 GPUs, releasing after 400 s) wait for it.
HAND_ROWS = [row(0, gpus=4, duration=3600), row(0, gpus=4, duration=1000), row(100, gpus=2, duration=500, actual=400)]


def test_figures_on_a_trace_checked_by_hand(tmp_path):
    # One node of 4 GPUs, held by A until 3,600 s. B (4 GPUs, 1,000 s) asks the pool at 0 and starts on its
    # node at 600; C (2 GPUs, releases after 400 s) asks at 100 and takes a whole node at 700. The nodes
    # idle from 1,600 and 1,100 are given back 30 min later, at 3,400 and 2,900: 2,800 + 2,200 node-s.
    tr = trace(tmp_path, HAND_ROWS)
    run = replay(tr, with_pools(inventory(1, 4), pool(max_nodes=2, delay=600, idle=1800)), "planner")
    assert run.start == [0, 600, 700] and run.placed[1:] == [("burst-p0001",), ("burst-p0002",)]
    assert given_back(run) == {"burst-p0002": 2900, "burst-p0001": 3400}
    f = summarize(run)
    assert f["pool_node_hours"] == pytest.approx(5000 / 3600) and f["pool_gpu_hours"] == pytest.approx(4 * 5000 / 3600)
    assert (f["pool_scale_ups"], f["pool_nodes_added"], f["pool_give_backs"], f["pool_peak_nodes"]) == (2, 2, 2, 2)
    assert f["wait_mean_s"] == pytest.approx((0 + 600 + 600) / 3)
    # Within the span (3,600 s): A 4 x 3,600, B 4 x 1,000, C 2 x 400 GPU-s bound, over the standing
    # 4 x 3,600 (comparable with the run without the pool) and over the GPUs present (the pool's 4 x 5,000).
    bound = 4 * 3600 + 4 * 1000 + 2 * 400
    assert f["util_bound"] == pytest.approx(bound / (4 * 3600))
    assert f["util_bound_present"] == pytest.approx(bound / (4 * 3600 + 4 * 5000))
    assert f["pools"]["burst"] == {
        "min": 0,
        "max": 2,
        "node_hours": pytest.approx(5000 / 3600),
        "gpu_hours": pytest.approx(20000 / 3600),
        "scale_ups": 2,
        "nodes_added": 2,
        "give_backs": 2,
        "peak_nodes": 2,
    }
    without = summarize(replay(tr, inventory(1, 4), "planner"))
    assert without["wait_mean_s"] > 2 * f["wait_mean_s"]
    assert without["pool_node_hours"] == 0 and without["pools"] == {}
    assert without["util_bound_present"] == without["util_bound"]


def test_waits_are_shorter_with_a_pool(tmp_path):
    rows = [row(i * 60, gpus=4 if i % 3 else 8, duration=1800, actual=900 + 30 * i) for i in range(20)]
    tr = trace(tmp_path, rows)
    base = inventory(1, 8)
    with_pool = summarize(replay(tr, with_pools(base, pool(max_nodes=4, gpus_per_node=8)), "planner"))
    without = summarize(replay(tr, base, "planner"))
    assert with_pool["started"] == without["started"] == 20
    assert with_pool["wait_mean_s"] < without["wait_mean_s"] / 2
    assert with_pool["wait_p95_s"] < without["wait_p95_s"]
    assert with_pool["pool_node_hours"] > 0 and with_pool["pool_peak_nodes"] <= 4


def test_simulate_with_a_pool_prints_and_writes_the_pool_figures(tmp_path, capsys):
    cluster = write_cluster(
        tmp_path,
        "shapes: {s: {model: H100, memory_gb: 80, gpus_per_node: 4}}\nclusters: {c: {s: 1}}\n"
        "pools: {burst: {cluster: c, shape: s, max: 2, scale_up_delay: 10m, scale_down_idle: 30m}}\n",
    )
    out = tmp_path / "out.json"
    args = ["--csv", str(write_csv(tmp_path, HAND_ROWS)), "--cluster", str(cluster), "--quiet", "--json", str(out)]
    assert main(["simulate", *args]) == 0
    printed = capsys.readouterr().out
    assert "pool burst: 0-2 x H100-80GB x4 in c (4 GPUs standing, up to 12)" in printed
    for label in ("pool node-hours", "pool scale-ups / nodes added", "pool give-backs", "GPUs present"):
        assert label in printed
    report = json.loads(out.read_text())
    assert list(report) == ["planner", "fifo", "easy"]
    for figures in report.values():
        assert set(figures) >= POOL_KEYS | {"wait_mean_s", "util_bound", "capacity_gpus", "nodes"}
        assert figures["pool_peak_nodes"] == 2 and figures["pool_node_hours"] == pytest.approx(5000 / 3600)
        assert set(figures["pools"]) == {"burst"}


def test_without_pools_the_report_is_as_before_and_the_keys_are_there(tmp_path):
    run = replay(trace(tmp_path, HAND_ROWS), inventory(1, 4), "planner")
    figures = summarize(run)
    assert set(figures) >= POOL_KEYS and figures["pool_scale_ups"] == figures["pool_peak_nodes"] == 0
    text = table({"planner": figures})
    assert "pool" not in text and "present" not in text and "utilization bound " in text
