"""Fair share, two levels deep: between projects, then between the slices of a project, after
Slurm's classic multifactor formula applied to its account tree (Fair Tree's order).

Vocabulary: a *use* is GPUs a slice held over an interval; a slice's *usage*
is its decayed GPU-seconds: every GPU-second counts ``2 ** (-age / half_life)``,
so last week's work weighs half of today's; a project's usage is its slices'.
A *share* is a normalized weight (shares sum to 1: a project's among projects,
a slice's among its project's slices); a *factor* is
``2 ** (-(usage / total usage) / share)`` in (0, 1]: 1 for what used nothing,
1/2 for what used exactly its share, smaller the more it used. A slice's *tree
factor* is its project's factor, then its own within the project: the queue
orders requests within a priority band by it (queue.py), so a project that used
less than its share is served before one that used more, whatever its slices did,
and within a project the same holds between its slices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .model import DEFAULT_PROJECT, Project, SlicePolicy

HALF_LIFE = timedelta(days=7)


@dataclass(frozen=True)
class Use:
    """``gpus`` GPUs (GPU-equivalents: a MIG instance is a part of one) that ``slice`` held over [start, end)."""

    slice: str
    gpus: float
    start: datetime
    end: datetime


def _decayed_seconds(gpus: float, age_end: float, age_start: float, half_life: float) -> float:
    """The integral of ``gpus * 2 ** (-age / half_life)`` over ages [age_end, age_start] (seconds)."""
    rate = math.log(2) / half_life
    return gpus / rate * (math.exp(-rate * age_end) - math.exp(-rate * age_start))


def decayed_usage(uses: Iterable[Use], now: datetime, half_life: timedelta = HALF_LIFE) -> dict[str, float]:
    """Each slice's decayed GPU-seconds at ``now``; only the part of a use before ``now`` counts.

    Every slice named by a use has an entry (0.0 when all its uses start after ``now``).
    """
    seconds = half_life.total_seconds()
    usage: dict[str, float] = {}
    for use in uses:
        end = min(use.end, now)
        used = 0.0
        if use.start < end:
            used = _decayed_seconds(use.gpus, (now - end).total_seconds(), (now - use.start).total_seconds(), seconds)
        usage[use.slice] = usage.get(use.slice, 0.0) + used
    return usage


def decay(usage: Mapping[str, float], elapsed: timedelta, half_life: timedelta = HALF_LIFE) -> dict[str, float]:
    """The same usage ``elapsed`` later, with nothing used meanwhile.

    For accumulators: ``decay(decayed_usage(uses, t), now - t)`` is ``decayed_usage(uses, now)``
    when every use ended by ``t``.
    """
    if elapsed < timedelta(0):
        raise ValueError(f"elapsed {elapsed} is negative; usage only decays forward in time")
    scale = 2 ** (-elapsed / half_life)
    return {name: used * scale for name, used in usage.items()}


def accrue(
    usage: Mapping[str, float], slice: str, gpus: int, elapsed: timedelta, half_life: timedelta = HALF_LIFE
) -> dict[str, float]:
    """Usage after ``elapsed`` more time in which ``slice`` held ``gpus`` GPUs.

    Decays every slice's usage and adds the new use's decayed GPU-seconds. One slice per
    step: when several slices held GPUs over the same step, ``decay`` the usage and add
    ``decayed_usage`` of the step's uses.
    """
    accrued = decay(usage, elapsed, half_life)
    used = _decayed_seconds(gpus, 0.0, elapsed.total_seconds(), half_life.total_seconds())
    accrued[slice] = accrued.get(slice, 0.0) + used
    return accrued


def shares(policies: Mapping[str, SlicePolicy]) -> dict[str, float]:
    """Each slice's normalized share (they sum to 1).

    A slice's weight is its policy's ``share``, else its ``max_gpus``, else 1, so that by
    default slices share in proportion to their quotas, and unlimited slices equally.
    """
    weights = {}
    for name, policy in policies.items():
        weight = policy.share if policy.share is not None else policy.max_gpus
        weight = 1 if weight is None else weight
        if weight < 0:
            raise ValueError(f"slice {name!r} has a negative fair-share weight {weight}")
        weights[name] = weight
    total = sum(weights.values()) or 1
    return {name: weight / total for name, weight in weights.items()}


def factors(usage: Mapping[str, float], shares: Mapping[str, float]) -> dict[str, float]:
    """Each slice's fair-share factor: ``2 ** (-(usage / total usage) / share)``.

    Total usage is over the slices in ``shares``, the same set the shares are normalized
    over, so a slice that used exactly its share gets 1/2. Every factor is 1.0 while the
    total is 0; a slice with no usage entry used nothing. A slice with share 0 gets 1.0
    until it uses anything, then 0.0 (the formula's limit).
    """
    used = {name: usage.get(name, 0.0) for name in shares}
    total = sum(used.values())
    if total <= 0:
        return dict.fromkeys(shares, 1.0)
    made = {}
    for name, share in shares.items():
        fraction = used[name] / total
        if share > 0:
            made[name] = 2 ** (-fraction / share)
        else:
            made[name] = 1.0 if fraction == 0 else 0.0
    return made


TreeFactor = tuple[float, float]  # (the project's factor, the slice's within its project)
UNUSED: TreeFactor = (1.0, 1.0)


def project_shares(projects: Mapping[str, Project | None]) -> dict[str, float]:
    """Each project's normalized share: its ``share``, else its ``max_gpus``, else 1 (None: a project
    with no record, weight 1)."""
    weights = {}
    for name, project in projects.items():
        weight = None if project is None else project.share if project.share is not None else project.max_gpus
        weights[name] = 1 if weight is None else weight
    total = sum(weights.values()) or 1
    return {name: weight / total for name, weight in weights.items()}


def tree_factors(
    usage: Mapping[str, float],
    policies: Mapping[str, SlicePolicy],
    projects: Mapping[str, str],
    project_policies: Mapping[str, Project],
) -> dict[str, TreeFactor]:
    """Each slice's tree factor: its project's factor among the projects of ``policies``' slices
    (``projects`` maps a slice to its project; missing: the default project), then its own among
    its project's slices."""
    members: dict[str, dict[str, SlicePolicy]] = {}
    for name, policy in policies.items():
        members.setdefault(projects.get(name, DEFAULT_PROJECT), {})[name] = policy
    project_usage = {p: sum(usage.get(s, 0.0) for s in slices) for p, slices in members.items()}
    outer = factors(project_usage, project_shares({p: project_policies.get(p) for p in members}))
    made = {}
    for project, slices in members.items():
        inner = factors(usage, shares(slices))
        made.update({name: (outer[project], inner[name]) for name in slices})
    return made
