"""Builders of simulator test data: CSV traces written to a temp dir, small inventories.

A job row is ``row(submit, gpus=..., duration=..., actual=...)`` so that a case's
table reads as the trace it is; ``pool(...)`` is a node pool of ``inventory()``'s
shape and cluster, ``with_pools(inventory(...), pool(...))`` an inventory with it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from egs_hub.core.model import Shape
from egs_hub.core.node_pools import NodePool
from egs_hub.sim.cluster import DEFAULT_SHAPE, Inventory, one_shape
from egs_hub.sim.trace import CSV_COLUMNS, Trace, read_csv

HEADER = ",".join(CSV_COLUMNS)


def row(
    submit: float,
    *,
    gpus: int | str = "",
    nodes: int | str = "",
    duration: float | str = 100,
    actual: float | str = "",
    slice: str = "team",
    priority: int | str = "",
) -> str:
    return f"{submit},{slice},{gpus},{nodes},{duration},{actual},{priority}"


def write_csv(directory: Path, rows: list[str], name: str = "trace.csv", header: str = HEADER) -> Path:
    path = directory / name
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def trace(directory: Path, rows: list[str]) -> Trace:
    return read_csv(write_csv(directory, rows))


def inventory(nodes: int = 1, gpus_per_node: int = 4) -> Inventory:
    return one_shape(nodes, gpus_per_node)


def pool(
    name: str = "burst",
    *,
    min_nodes: int = 0,
    max_nodes: int = 3,
    delay: float = 600,
    idle: float = 1800,
    gpus_per_node: int = 4,
    cluster: str = "sim",
) -> NodePool:
    """A pool of ``inventory()``'s shape (of ``gpus_per_node``) in its cluster; delays in seconds."""
    shape = Shape(*DEFAULT_SHAPE, gpus_per_node)
    return NodePool(cluster, name, shape, min_nodes, max_nodes, timedelta(seconds=delay), timedelta(seconds=idle))


def with_pools(base: Inventory, *pools: NodePool) -> Inventory:
    return replace(base, pools=pools)


def write_cluster(directory: Path, text: str, name: str = "cluster.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


# The hand-checked trace (one node of 4 GPUs, one slice, so fair share does not reorder;
# every job releases 1 s before its window ends, so no start waits on a window end):
#   A  t=0  3 GPUs  window 100 s  runs  99 s
#   B  t=1  2 GPUs  window 100 s  runs  99 s   (needs A gone)
#   E  t=2  2 GPUs  window 100 s  runs  99 s   (fits beside B once A is gone)
#   F  t=3  1 GPU   window 150 s  runs 149 s   (fits now on the free GPU, but would overlap E's window)
#   G  t=4  1 GPU   window  50 s  runs  49 s   (fits in the free GPU before E's window)
HAND_ROWS = [
    row(0, gpus=3, duration=100, actual=99),
    row(1, gpus=2, duration=100, actual=99),
    row(2, gpus=2, duration=100, actual=99),
    row(3, gpus=1, duration=150, actual=149),
    row(4, gpus=1, duration=50, actual=49),
]
