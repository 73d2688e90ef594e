"""Idle timeout decisions (core/idle.py) by table, over passes of a controllable clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core.idle import (
    IdleAction,
    IdleWatch,
    Watched,
    effective_idle_timeout,
    gpu_idle,
    watch_all,
)
from egs_hub.core.model import GPRSpec, SlicePolicy
from egs_hub.core.samples import GpuProcess, GpuSample

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
GPUS = ("g0", "g1")


def idle(uuid: str, **readings) -> GpuSample:
    return GpuSample(uuid=uuid, time=T0, **{"utilization": 0.0, "processes": (), **readings})


IDLE = {u: idle(u) for u in GPUS}
BUSY = {**IDLE, "g1": idle("g1", utilization=60.0)}
WITH_PROCESS = {**IDLE, "g1": idle("g1", processes=(GpuProcess(pid=7),))}
ONE_MISSING = {"g0": IDLE["g0"]}


@dataclass(frozen=True)
class Pass:
    minute: int  # minutes after T0
    samples: dict  # the fresh samples at that pass
    want: IdleAction | None = None  # what the pass decides for the GPR


@dataclass(frozen=True)
class Case:
    timeout: timedelta
    passes: list[Pass] = field(default_factory=list)


CASES = {
    "idle for the whole timeout: warned 10 minutes before, then released": Case(
        timedelta(minutes=30),
        [
            Pass(0, IDLE),
            Pass(19, IDLE),
            Pass(20, IDLE, want=IdleAction.WARN),
            Pass(25, IDLE),  # warned once per stretch
            Pass(30, IDLE, want=IdleAction.RELEASE),
        ],
    ),
    "one busy GPU ends the stretch; the next one starts over": Case(
        timedelta(minutes=30),
        [
            Pass(0, IDLE),
            Pass(21, IDLE, want=IdleAction.WARN),
            Pass(22, BUSY),
            Pass(30, IDLE),  # idle again from minute 30
            Pass(50, IDLE, want=IdleAction.WARN),  # a new stretch warns again
            Pass(60, IDLE, want=IdleAction.RELEASE),
        ],
    ),
    "a process on a GPU is not idle, even at 0% utilization": Case(
        timedelta(minutes=30), [Pass(0, IDLE), Pass(25, WITH_PROCESS), Pass(40, IDLE), Pass(59, IDLE)]
    ),
    "a GPU without a fresh sample is not known idle: nothing is released on missing data": Case(
        timedelta(minutes=30), [Pass(0, IDLE), Pass(25, ONE_MISSING), Pass(31, IDLE), Pass(45, IDLE)]
    ),
    "no metrics at all never releases": Case(timedelta(minutes=1), [Pass(0, {}), Pass(60, {})]),
    "a timeout shorter than the warning warns at the first idle pass": Case(
        timedelta(minutes=5),
        [Pass(0, IDLE, want=IdleAction.WARN), Pass(4, IDLE), Pass(5, IDLE, want=IdleAction.RELEASE)],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_idle_passes(case: Case):
    gpr = Watched(gpr_id=7, gpus=GPUS, timeout=case.timeout)
    watches: dict[int, IdleWatch] = {}
    for step in case.passes:
        now = T0 + timedelta(minutes=step.minute)
        watches, decisions = watch_all(watches, [gpr], step.samples, 5.0, now)
        assert [d.action for d in decisions] == ([step.want] if step.want else []), f"minute {step.minute}"
        for decision in decisions:
            assert decision.release_at == decision.since + case.timeout
            assert decision.since <= now


def test_gprs_no_longer_watched_are_forgotten_and_decisions_are_in_id_order():
    a, b = Watched(9, ("g0",), timedelta(minutes=1)), Watched(3, ("g1",), timedelta(minutes=1))
    watches, _ = watch_all({}, [a, b], IDLE, 5.0, T0)
    watches, decisions = watch_all(watches, [a, b], IDLE, 5.0, T0 + timedelta(minutes=1))
    assert [d.gpr_id for d in decisions] == [3, 9]
    watches, _ = watch_all(watches, [b], IDLE, 5.0, T0 + timedelta(minutes=2))
    assert set(watches) == {3}


GPU_IDLE_CASES = {
    "below the threshold, no process": (idle("g", utilization=4.9), True),
    "at the threshold": (idle("g", utilization=5.0), False),
    "utilization unknown, processes listed: none (an NVML MIG instance)": (idle("g", utilization=None), True),
    "utilization unknown, a process": (idle("g", utilization=None, processes=(GpuProcess(pid=1),)), False),
    "utilization and processes unknown": (idle("g", utilization=None, processes=None), False),
    "processes unknown (DCGM): utilization decides": (idle("g", processes=None), True),
    "a process": (idle("g", processes=(GpuProcess(pid=1),)), False),
}


@pytest.mark.parametrize(("sample", "want"), GPU_IDLE_CASES.values(), ids=GPU_IDLE_CASES.keys())
def test_gpu_idle(sample: GpuSample, want: bool):
    assert gpu_idle(sample, 5.0) is want


HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("asked", "policy", "want"),
    [
        (None, SlicePolicy(), None),
        (HOUR, SlicePolicy(), HOUR),
        (None, SlicePolicy(idle_timeout=2 * HOUR), 2 * HOUR),
        (HOUR, SlicePolicy(idle_timeout=2 * HOUR), HOUR),
        (None, SlicePolicy(max_idle_timeout=3 * HOUR), 3 * HOUR),  # the maximum binds GPRs that ask none
        (None, SlicePolicy(idle_timeout=HOUR, max_idle_timeout=3 * HOUR), HOUR),
    ],
)
def test_effective_idle_timeout(asked, policy, want):
    spec = GPRSpec(slice="s", duration=8 * HOUR, gpus=1, idle_timeout=asked)
    assert effective_idle_timeout(spec, policy) == want
