"""The Philly scenario: Microsoft's Philly GPU job trace as our benchmarks replay it.

Vocabulary: a *VC* (virtual cluster) is one Philly team; it becomes one slice,
and its GPUs in the real cluster become the slice's fair-share weight. The
scenario (shared/traces/philly/README.md): jobs submitted 2017-10-01 00:00 ..
2017-11-30 23:59 in the 11 VCs below; a job of ``num_gpus`` asks for that many
GPUs, more than 8 as whole 8-GPU nodes; it reserves its duration rounded up to
the next whole hour and is released early when its real duration has passed;
priority 101 for all. The span is the submit window (61 days).
"""

from __future__ import annotations

import csv
import math
from datetime import datetime, timedelta
from pathlib import Path

from .trace import Job, SimInputError, Trace

GPUS_PER_NODE = 8
START = datetime(2017, 10, 1)
END = datetime(2017, 12, 1)  # exclusive: the last submits are on 2017-11-30 23:59
# VC -> nodes of 8 GPUs (the Helios study's sizes): 352 nodes, 2,816 GPUs.
VC_NODES = {
    "6214e9": 64,
    "7f04ca": 32,
    "11cb48": 16,
    "b436b2": 64,
    "ee9e8c": 64,
    "e13805": 16,
    "6c71a0": 32,
    "2869ce": 16,
    "ed69ec": 8,
    "103959": 8,
    "0e4a51": 32,
}
COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
HOUR = 3600.0


def default_path() -> Path:
    """``shared/traces/philly/philly.csv`` beside the checkout that holds this package."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "philly" / "philly.csv"


def read_philly(path: str | Path | None = None) -> Trace:
    """The scenario's jobs from the Philly extract at ``path`` (default: ``default_path()``)."""
    path = Path(path) if path is not None else default_path()
    if not path.is_file():
        raise SimInputError(f"the Philly trace is not at {path}: pass --trace-file PATH")
    jobs = []
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None or tuple(h.strip() for h in header) != COLUMNS:
                raise SimInputError(f"{path}:1: the header must be {','.join(COLUMNS)} (got {header})")
            for line, row in enumerate(reader, start=2):
                job = _job(path, line, row)
                if job is not None:
                    jobs.append((job, line))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SimInputError(f"{path}: cannot read the trace: {e}") from None
    jobs.sort(key=lambda pair: (pair[0].submit_s, pair[1]))
    shares = {vc: float(nodes * GPUS_PER_NODE) for vc, nodes in VC_NODES.items()}
    return Trace("philly", tuple(j for j, _ in jobs), (END - START).total_seconds(), shares, windowed=True)


def _job(path: Path, line: int, row: list[str]) -> Job | None:
    """The row's job, or None when it is outside the scenario (or has no timestamp)."""
    if not any(cell.strip() for cell in row):
        return None
    if len(row) != len(COLUMNS):
        raise SimInputError(f"{path}:{line}: expected {len(COLUMNS)} fields, got {len(row)}")
    stamp, duration, num_gpus, _, vc = (c.strip() for c in row)
    if not stamp or vc not in VC_NODES:
        return None
    try:
        submitted = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise SimInputError(f"{path}:{line}: timestamp {stamp!r} is not YYYY-MM-DD HH:MM:SS") from None
    if not START <= submitted < END:
        return None
    try:
        seconds, gpus = float(duration), int(num_gpus)
    except ValueError:
        raise SimInputError(
            f"{path}:{line}: duration and num_gpus must be numbers, got {duration!r}, {num_gpus!r}"
        ) from None
    if not (math.isfinite(seconds) and seconds > 0 and gpus > 0):
        raise SimInputError(f"{path}:{line}: duration and num_gpus must be positive, got {duration!r}, {num_gpus!r}")
    reserved = math.ceil(seconds / HOUR) * HOUR
    whole_nodes = gpus > GPUS_PER_NODE
    return Job(
        submit_s=(submitted - START) / timedelta(seconds=1),
        slice=vc,
        duration_s=reserved,
        actual_s=seconds,
        gpus=None if whole_nodes else gpus,
        nodes=math.ceil(gpus / GPUS_PER_NODE) if whole_nodes else None,
        used_gpus=gpus,
    )
