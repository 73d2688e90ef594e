"""The telemetry loop with a controllable clock, on both databases: idle warnings and idle
releases through the reconcile loop, alerts recorded as rows and events and posted to a real
local Slack webhook, and what a failing metric source does (nothing rash).

The metric source is a scripted double of the MetricSource interface (the real sources have
their own tests in tests/metrics); the store, the reconcile loop and the webhook are real.
"""

# ruff: noqa: F811  (the fixtures world and slack are imported from the modules that define them)
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from egs_hub.core import model as core
from egs_hub.core.samples import GpuProcess, GpuSample
from egs_hub.metrics import MetricsUnavailable
from egs_hub.service.notify import SlackNotifier
from egs_hub.service.telemetry import Telemetry
from egs_hub.store import queries
from egs_hub.store.models import AlertRow, EventRow

from .test_notify import slack  # noqa: F401
from .test_reconcile import NODE, kinds, set_policy, settle, status, submit_spec, world  # noqa: F401


@dataclass
class ScriptedSource:
    """Answers ``readings`` per GPU (utilization 0 and no process unless set), stamped with the
    pass's time; ``error`` makes it unavailable."""

    readings: dict[str, dict] = field(default_factory=lambda: {uuid: {} for uuid in NODE.gpus})
    error: str | None = None
    name: str = "scripted"

    async def sample(self, now: datetime) -> list[GpuSample]:
        if self.error:
            raise MetricsUnavailable(self.error)
        return [
            GpuSample(uuid=uuid, time=now, node=NODE.name, **{"utilization": 0.0, "processes": (), **values})
            for uuid, values in self.readings.items()
        ]


def telemetry(world, source: ScriptedSource, **kw) -> Telemetry:
    sessions, clock, _, reconciler = world
    return Telemetry(source, sessions, clock, interval=60, on_release=reconciler.wake, **kw)


async def provision(world, **spec) -> int:
    sessions, clock, _, reconciler = world
    gpr_id = submit_spec(sessions, core.GPRSpec(slice="a", duration=timedelta(hours=4), **spec), clock.now)
    await settle(reconciler)
    assert status(sessions, gpr_id).status is core.Status.PROVISIONED
    return gpr_id


def events(sessions, kind: str) -> list[EventRow]:
    with sessions() as session:
        return list(session.query(EventRow).filter_by(kind=kind).order_by(EventRow.id))


async def test_an_idle_gpr_is_warned_then_released_with_reason_idle(world):
    sessions, clock, _, reconciler = world
    gpr_id = await provision(world, gpus=2, idle_timeout=timedelta(minutes=15))
    loop = telemetry(world, ScriptedSource())

    await loop.tick()  # idle from now
    clock.advance(minutes=4)
    await loop.tick()
    assert events(sessions, "idle-warning") == []
    clock.advance(minutes=1)
    await loop.tick()
    (warning,) = events(sessions, "idle-warning")
    assert warning.gpr_id == gpr_id and warning.actor == "idle-monitor"
    assert warning.data["release_at"] == "2026-11-22T12:15:00Z"
    clock.advance(minutes=9)
    await loop.tick()
    assert status(sessions, gpr_id).status is core.Status.PROVISIONED
    clock.advance(minutes=1)
    await loop.tick()

    gpr = status(sessions, gpr_id)
    assert gpr.status is core.Status.RELEASING and gpr.end_reason is core.EndReason.IDLE_RELEASED
    assert "idle (below 5% utilization, no process) for 15m" in gpr.status_reason
    await settle(reconciler)
    assert status(sessions, gpr_id).status is core.Status.COMPLETE
    assert kinds(sessions, gpr_id)[-3:] == ["idle-warning", "idle-released", "complete"]


async def test_work_on_any_gpu_or_a_gpr_without_timeout_is_never_released(world):
    sessions, clock, _, _ = world
    set_policy(sessions, "a", max_active_gprs=3)
    busy = await provision(world, gpus=1, idle_timeout=timedelta(minutes=5))
    with_process = await provision(world, gpus=1, idle_timeout=timedelta(minutes=5))
    no_timeout = await provision(world, gpus=1)
    with sessions() as session:
        gpu_of = {g: queries.get_gpr_row(session, g).allocations[0].gpu_uuid for g in (busy, with_process)}
    source = ScriptedSource()
    source.readings[gpu_of[busy]] = {"utilization": 40.0}
    source.readings[gpu_of[with_process]] = {"processes": (GpuProcess(pid=99),)}
    loop = telemetry(world, source)

    for _ in range(3):
        await loop.tick()
        clock.advance(minutes=10)

    assert {status(sessions, g).status for g in (busy, with_process, no_timeout)} == {core.Status.PROVISIONED}


async def test_the_slice_default_idle_timeout_applies_to_gprs_that_ask_none(world):
    sessions, clock, _, _ = world
    set_policy(sessions, "a", idle_timeout=timedelta(minutes=20))
    gpr_id = await provision(world, gpus=1)
    loop = telemetry(world, ScriptedSource())

    await loop.tick()
    clock.advance(minutes=20)
    await loop.tick()

    assert status(sessions, gpr_id).end_reason is core.EndReason.IDLE_RELEASED


async def test_an_unavailable_source_releases_nothing_and_raises_no_alert(world):
    sessions, clock, _, _ = world
    gpr_id = await provision(world, gpus=1, idle_timeout=timedelta(minutes=5))
    source = ScriptedSource()
    loop = telemetry(world, source)
    await loop.tick()

    source.error = "Prometheus at http://prom:9090 could not be reached"
    for _ in range(3):
        clock.advance(minutes=5)
        await loop.tick()

    assert loop.source_error == source.error
    assert status(sessions, gpr_id).status is core.Status.PROVISIONED
    with sessions() as session:
        assert session.query(AlertRow).count() == 0
    source.error = None
    await loop.tick()
    assert loop.source_error is None and loop.sampled_at == clock.now


async def test_alerts_are_rows_and_events_of_the_holder_and_reach_slack(world, slack):
    sessions, clock, _, _ = world
    gpr_id = await provision(world, gpus=1)
    with sessions() as session:
        hot = queries.get_gpr_row(session, gpr_id).allocations[0].gpu_uuid
    source = ScriptedSource()
    loop = telemetry(world, source, notifier=SlackNotifier(slack.url("ok")))

    source.readings[hot] = {"temperature_c": 91.0}
    await loop.tick()
    clock.advance(minutes=1)
    await loop.tick()  # still hot: raised once
    source.readings[hot] = {"temperature_c": 70.0}
    clock.advance(minutes=1)
    await loop.tick()

    with sessions() as session:
        (row,) = session.query(AlertRow).all()
        assert (row.kind, row.gpu_uuid, row.slice, row.gpr_id, row.value) == ("temperature", hot, "a", gpr_id, 91.0)
        assert row.cleared_at == clock.now
    raised, cleared = events(sessions, "alert"), events(sessions, "alert-cleared")
    assert [(e.gpr_id, e.slice, e.data["alert"]) for e in raised + cleared] == [(gpr_id, "a", row.id)] * 2
    posted = [body["text"] for _, body in slack.received]
    assert len(posted) == 2 and ":red_circle:" in posted[0] and ":white_check_mark:" in posted[1]
    assert f"GPR {gpr_id}" in posted[0]


async def test_a_restarted_loop_clears_the_alerts_left_active_instead_of_raising_them_again(world):
    sessions, clock, _, _ = world
    source = ScriptedSource()
    source.readings[NODE.gpus[0]] = {"temperature_c": 95.0}
    await telemetry(world, source).tick()

    again = telemetry(world, source)
    clock.advance(minutes=1)
    await again.tick()
    source.readings[NODE.gpus[0]] = {"temperature_c": 60.0}
    clock.advance(minutes=1)
    await again.tick()

    with sessions() as session:
        (row,) = session.query(AlertRow).all()
        assert row.slice is None and row.cleared_at == clock.now  # nobody held the GPU
    assert len(events(sessions, "alert")) == 1 and len(events(sessions, "alert-cleared")) == 1


async def test_a_gpu_that_stops_reporting_is_lost(world):
    sessions, clock, _, _ = world
    source = ScriptedSource()
    loop = telemetry(world, source)
    await loop.tick()
    del source.readings[NODE.gpus[3]]
    clock.advance(minutes=2)
    await loop.tick()

    with sessions() as session:
        assert [(r.kind, r.gpu_uuid, r.cluster) for r in session.query(AlertRow)] == [
            ("gpu-lost", NODE.gpus[3], "local")
        ]


async def test_the_bound_gpus_readings_add_up_per_gpr_and_day(world):
    sessions, clock, _, _ = world
    gpr_id = await provision(world, gpus=2)
    with sessions() as session:
        bound = queries.to_gpr(queries.get_gpr_row(session, gpr_id)).bound_gpus
    readings = {uuid: {"utilization": 10.0} for uuid in NODE.gpus}
    readings[bound[0]], readings[bound[1]] = {"utilization": 80.0}, {"utilization": None}
    loop = telemetry(world, ScriptedSource(readings))
    await loop.tick()
    await loop.tick()
    since, until = clock.now - timedelta(days=1), clock.now + timedelta(days=1)
    with sessions() as session:
        found = queries.readings(session, [gpr_id], since, until)
    # Two passes of one reading each (the other bound GPU gave none; free GPUs count for nobody).
    assert list(found.values()) == [(160.0, 2)]
    (day,) = (d for _, d in found)
    assert day == clock.now.replace(hour=0, minute=0, second=0, microsecond=0)


async def test_checks_waiting_together_share_one_pass_that_began_after_they_did(world):
    _, clock, _, _ = world
    source = ScriptedSource(readings={NODE.gpus[0]: {"temperature_c": 40.0}})
    passes = []
    sample = source.sample

    async def counted(now):
        passes.append(now)
        await asyncio.sleep(0)  # the others arrive while it samples
        return await sample(now)

    source.sample = counted
    loop = telemetry(world, source)
    asked = clock()
    answers = await asyncio.gather(*(loop.read_now(asked) for _ in range(5)))
    assert len(passes) == 1 and all(samples[NODE.gpus[0]].temperature_c == 40.0 for samples, _ in answers)
    clock.advance(seconds=1)
    await loop.read_now(clock())  # asked after that pass: a new one
    assert len(passes) == 2
