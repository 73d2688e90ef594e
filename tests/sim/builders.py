"""Builders of simulator test data: CSV traces written to a temp dir, small inventories.

A job row is ``row(submit, gpus=..., duration=..., actual=...)`` so that a case's
table reads as the trace it is.
"""

from __future__ import annotations

from pathlib import Path

from egs_hub.sim.cluster import Inventory, one_shape
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
