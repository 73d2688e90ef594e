"""Synthetic traces in the simulator's CSV format, for benchmarks that must not tune the planner to one
real trace: seeded, so a figure can be reproduced.

- ``bursty``: working-day bursts, 160 jobs a day between 9:00 and 17:00 in three teams, 1 to 8 GPUs for
  1 to 4 hours, each using 30 to 100 % of its window;
- ``small-jobs``: many one- and two-GPU jobs of 15 minutes to 2 hours arriving around the clock;
- ``huge-jobs``: a stream of small jobs with a few huge ones (4 whole nodes for 6 to 12 hours, one a day);
- ``skewed-teams``: one team submits 70 % of the jobs, and larger ones (about 85 % of the GPU-hours); four
  others share the rest;
- ``identical-jobs``: 345 one-GPU jobs a day around the clock in three teams, each exactly one hour and
  using all of it. Every policy that leaves no GPU idle while a job waits gives them the same mean wait
  (the jobs are interchangeable, so the order changes who waits, not how much in all): no scheduler
  beats another's mean there.

Each takes ``days`` and a ``seed``; the load comes from the inventory the caller builds for it
(``--load`` scales the node count).

``notebooks`` (issue 23, not among ``TRACES``: it asks for parts of GPUs, which only an inventory with
MIG layouts serves as parts): working-day notebook sessions of a tenth to half a GPU (300 a day, 1 to 4
hours, each using 30 to 100 % of its window) in four teams, and 30 training jobs a day of 1 to 4 whole
GPUs.
"""

from __future__ import annotations

import random
from collections.abc import Callable

HEADER = "submit_s,slice,gpus,nodes,duration_s,actual_s,priority"
DAY = 86400


def _csv(rows: list[tuple[int, str, float | None, int | None, int, int]]) -> str:
    lines = [HEADER]
    for submit, team, gpus, nodes, window, actual in sorted(rows):
        size = f"{'' if gpus is None else gpus},{'' if nodes is None else nodes}"
        lines.append(f"{submit},{team},{size},{window},{actual},")
    return "\n".join(lines) + "\n"


def _used(rng: random.Random, window: int, low: float = 0.3) -> int:
    return max(1, round(window * rng.uniform(low, 1.0)))


def bursty(days: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = []
    for day in range(days):
        for _ in range(160):
            submit = day * DAY + 9 * 3600 + rng.uniform(0, 8 * 3600)
            gpus, window = rng.choice([1, 2, 4, 8, 8]), rng.choice([3600, 7200, 14400])
            rows.append((round(submit), f"team-{rng.choice('abc')}", gpus, None, window, _used(rng, window)))
    return _csv(rows)


def _small(rng: random.Random, days: int, per_day: int) -> list:
    rows = []
    for _ in range(days * per_day):
        window = rng.choice([900, 1800, 3600, 7200])
        submit, team, gpus = round(rng.uniform(0, days * DAY)), f"team-{rng.choice('abcd')}", rng.choice([1, 1, 1, 2])
        rows.append((submit, team, gpus, None, window, _used(rng, window)))
    return rows


def small_jobs(days: int, seed: int) -> str:
    return _csv(_small(random.Random(seed), days, 400))


def huge_jobs(days: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = _small(rng, days, 600)
    for _ in range(days):
        window = rng.choice([6, 9, 12]) * 3600
        rows.append((round(rng.uniform(0, days * DAY)), "team-big", None, 4, window, _used(rng, window, 0.8)))
    return _csv(rows)


def skewed_teams(days: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = []
    for _ in range(days * 200):
        heavy = rng.random() < 0.7
        team = "team-heavy" if heavy else f"team-{rng.choice('abcd')}"
        gpus = rng.choice([4, 8]) if heavy else rng.choice([1, 2, 4])
        window = rng.choice([3600, 7200, 14400])
        rows.append((round(rng.uniform(0, days * DAY)), team, gpus, None, window, _used(rng, window)))
    return _csv(rows)


def identical_jobs(days: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = [
        (round(rng.uniform(0, days * DAY)), f"team-{rng.choice('abc')}", 1, None, 3600, 3600) for _ in range(days * 345)
    ]
    return _csv(rows)


def notebooks(days: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = []
    for day in range(days):
        for _ in range(300):
            submit = round(day * DAY + 9 * 3600 + rng.uniform(0, 8 * 3600))
            part, window = rng.choice([0.1, 0.14, 0.14, 0.25, 0.4, 0.5]), rng.choice([3600, 7200, 14400])
            rows.append((submit, f"team-{rng.choice('abcd')}", part, None, window, _used(rng, window)))
        for _ in range(30):
            submit, window = round(day * DAY + rng.uniform(0, DAY)), rng.choice([7200, 14400, 28800])
            rows.append((submit, "team-train", rng.choice([1, 2, 4]), None, window, _used(rng, window, 0.8)))
    return _csv(rows)


TRACES: dict[str, Callable[[int, int], str]] = {
    "bursty": bursty,
    "small-jobs": small_jobs,
    "huge-jobs": huge_jobs,
    "skewed-teams": skewed_teams,
    "identical-jobs": identical_jobs,
}
