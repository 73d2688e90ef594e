"""Traces: the jobs a replay submits, read from the simulator's CSV format.

Vocabulary: a *trace* is a list of *jobs* in submit order plus its *span*, the
stretch of time its submits describe (metrics that divide by time, such as
utilization and offered load, use it). A job asks for ``gpus`` or whole
``nodes`` for a reserved ``duration_s`` (its window) and really runs
``actual_s`` of it; it is released early at the end of ``actual_s``.

CSV format (one header line, then one job a line)::

    submit_s,slice,gpus,nodes,duration_s,actual_s,priority

``submit_s`` counts seconds from the trace's start; exactly one of ``gpus`` and
``nodes`` is set; ``gpus`` below 1 (``0.14``, ``0.5``) asks for that part of a GPU
(``Job.share``); ``actual_s`` empty means the job uses its whole window (a
longer one is cut at the window's end); ``priority`` empty means 101. A CSV's
span runs from 0 to the end of its last job if none waited: the file does not
say over which window its jobs were drawn.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.model import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN

CSV_COLUMNS = ("submit_s", "slice", "gpus", "nodes", "duration_s", "actual_s", "priority")


class SimInputError(Exception):
    """Bad simulator input; the message names the file, line and field, and is shown as is."""


@dataclass(frozen=True)
class Job:
    """One GPR to submit. ``used_gpus``: GPUs the job really computes on, when it differs
    from what it holds (a Philly job of 12 GPUs holds 2 whole nodes); None = all it holds."""

    submit_s: float
    slice: str
    duration_s: float
    actual_s: float
    gpus: int | None = None
    nodes: int | None = None
    priority: int = PRIORITY_DEFAULT
    used_gpus: int | None = None
    shape: str | None = None  # the GPR's shape and cluster, when it asked for one (a service's history)
    cluster: str | None = None
    # A part of a GPU (0 < share < 1; ``gpus`` is then 1): the job holds one MIG instance, the smallest
    # of at least that part that the inventory has (core/sharing.py), else a whole GPU.
    share: float | None = None


@dataclass(frozen=True)
class Trace:
    """``shares``: each slice's fair-share weight (empty: every slice weighs 1).
    ``windowed``: the span is the window the submits were drawn from (Philly), not
    the end of the last job."""

    name: str
    jobs: tuple[Job, ...]
    span_s: float
    shares: dict[str, float]
    windowed: bool = False

    @property
    def slices(self) -> list[str]:
        return sorted(set(self.shares) | {j.slice for j in self.jobs})

    def asked_gpu_seconds(self, gpus_per_node: int) -> float:
        """GPU-seconds (GPU-equivalents) the jobs really use: the numerator of the offered load."""
        return sum(asked_gpus(j, gpus_per_node) * j.actual_s for j in self.jobs)

    def limited(self, limit: int | None = None, days: float | None = None) -> Trace:
        """The prefix submitted in the first ``days`` days, then its first ``limit`` jobs."""
        jobs, span = self.jobs, self.span_s
        if days is not None:
            span = min(span, days * 86400.0)
            jobs = tuple(j for j in jobs if j.submit_s < span)
        if limit is not None and limit < len(jobs):
            jobs = jobs[:limit]
            span = min(span, max(jobs[-1].submit_s, 1.0)) if jobs else 1.0
        if not jobs:
            raise SimInputError(f"{self.name}: no jobs left after --days/--limit")
        if not self.windowed:
            span = _end_without_waits(jobs)
        return Trace(self.name, jobs, span, self.shares, self.windowed)


def asked_gpus(job: Job, gpus_per_node: int) -> float:
    """GPUs a job computes on (for nodes jobs without ``used_gpus``: the whole nodes; a part of a
    GPU: that part)."""
    if job.share is not None:
        return job.share
    if job.used_gpus is not None:
        return job.used_gpus
    return job.gpus if job.gpus is not None else (job.nodes or 0) * gpus_per_node


def read_csv(path: str | Path) -> Trace:
    """Read a trace in the simulator's CSV format; bad input raises ``SimInputError``."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return _parse(path, csv.reader(f))
    except FileNotFoundError:
        raise SimInputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SimInputError(f"{path}: cannot read the trace: {e}") from None


def _parse(path: Path, rows: Iterable[list[str]]) -> Trace:
    rows = iter(rows)
    header = next(rows, None)
    if header is None or tuple(h.strip() for h in header) != CSV_COLUMNS:
        got = ",".join(header) if header else "an empty file"
        raise SimInputError(f"{path}:1: the header must be {','.join(CSV_COLUMNS)} (got {got})")
    jobs = []
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(CSV_COLUMNS):
            raise SimInputError(f"{path}:{line}: expected {len(CSV_COLUMNS)} fields, got {len(row)}")
        jobs.append(_job(path, line, dict(zip(CSV_COLUMNS, (c.strip() for c in row), strict=True))))
    if not jobs:
        raise SimInputError(f"{path}: the trace has no jobs")
    jobs.sort(key=lambda j: j.submit_s)  # stable: equal submits keep file order
    return Trace(path.name, tuple(jobs), _end_without_waits(jobs), {})


def _end_without_waits(jobs: Iterable[Job]) -> float:
    return max(j.submit_s + j.actual_s for j in jobs)


def _job(path: Path, line: int, cells: dict[str, str]) -> Job:
    def number(field: str, *, positive: bool) -> float:
        text = cells[field]
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            what = "a positive" if positive else "a non-negative"
            raise SimInputError(f"{path}:{line}: {field} must be {what} number of seconds, got {text!r}")
        return value

    def count(field: str) -> int | None:
        text = cells[field]
        if text == "":
            return None
        if not text.isdigit() or int(text) == 0:
            raise SimInputError(f"{path}:{line}: {field} must be a positive whole number, got {text!r}")
        return int(text)

    if not cells["slice"]:
        raise SimInputError(f"{path}:{line}: slice is empty")
    share = _share(path, line, cells["gpus"])
    gpus, nodes = (1 if share is not None else count("gpus")), count("nodes")
    if (gpus is None) == (nodes is None):
        raise SimInputError(f"{path}:{line}: set exactly one of gpus and nodes")
    duration = number("duration_s", positive=True)
    actual = duration if cells["actual_s"] == "" else min(number("actual_s", positive=True), duration)
    priority = PRIORITY_DEFAULT
    if cells["priority"] != "":
        text = cells["priority"]
        if not text.isdigit() or not PRIORITY_MIN <= int(text) <= PRIORITY_MAX:
            raise SimInputError(
                f"{path}:{line}: priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, got {text!r}"
            )
        priority = int(text)
    return Job(
        submit_s=number("submit_s", positive=False),
        slice=cells["slice"],
        duration_s=duration,
        actual_s=actual,
        gpus=gpus,
        nodes=nodes,
        priority=priority,
        share=share,
    )


def _share(path: Path, line: int, text: str) -> float | None:
    """A ``gpus`` cell below 1 ("0.25"): that part of a GPU; None for a whole number or an empty cell."""
    if text == "" or text.isdigit():
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < 1):
        raise SimInputError(
            f"{path}:{line}: gpus must be a positive whole number or a part of a GPU between 0 and 1, got {text!r}"
        )
    return value
