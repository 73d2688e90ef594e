"""The telemetry loop: sample the GPUs, keep the last hour, raise alerts, release idle GPRs.

Vocabulary: a *pass* takes samples from the metric source, a snapshot of the
store (which GPUs exist, who holds them, which provisioned GPRs have an idle
timeout), decides with core/alerts.py and core/idle.py, then records what
changed: alert rows and events, Slack messages, idle warnings and idle
releases (the reconcile loop then unbinds); on a Kubernetes cluster an alert
raised or cleared is also an Event on the GPU's Node (kube_events.py). When the source cannot be read the
pass records nothing about alerts (a Prometheus outage is not every GPU lost)
and no GPR counts as idle; ``source_error`` says why until a read succeeds.
Idle stretches are kept in memory: a restarted service starts them again,
which can only release later, never sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from ..core import lifecycle
from ..core.alerts import Alert, AlertChange, AlertKind, AlertState, AlertThresholds, evaluate
from ..core.idle import IdleAction, IdleDecision, IdleWatch, Watched, effective_idle_timeout, watch_all
from ..core.model import EndReason, Event, Status
from ..core.samples import GpuSample
from ..core.units import format_duration, format_time
from ..core.usage import day_of, reading_totals
from ..metrics import MetricSource, MetricsUnavailable
from ..metrics.history import History
from ..store import queries
from ..store.db import transaction
from . import kube_events as notices
from .kube_events import KubeEvents
from .notify import NotifyError, SlackNotifier, format_alert

log = logging.getLogger(__name__)

ACTOR = "metrics"
IDLE_ACTOR = "idle-monitor"


async def _nothing() -> None:
    pass


class Telemetry:
    def __init__(
        self,
        source: MetricSource | None,
        sessions: sessionmaker[Session],
        clock: Callable[[], datetime],
        *,
        interval: float = 10.0,
        idle_threshold: float = 5.0,
        thresholds: AlertThresholds | None = None,
        notifier: SlackNotifier | None = None,
        on_release: Callable[[], None] = lambda: None,
        kube_events: KubeEvents | None = None,
    ):
        self.source = source
        self.sessions = sessions
        self.clock = clock
        self.interval = interval
        self.idle_threshold = idle_threshold
        self.thresholds = thresholds or AlertThresholds()
        self.notifier = notifier
        self.on_release = on_release
        self.kube_events = kube_events
        self.history = History()
        self.source_error: str | None = None if source else "no metric source is configured"
        self.sampled_at: datetime | None = None
        self._alerts = AlertState(active=self._active_alerts())
        self._watches: dict[int, IdleWatch] = {}
        self._seen: set[str] = set()
        self._runner: asyncio.Task | None = None
        self._passing = asyncio.Lock()  # one pass at a time: the loop's, or one a check asked for
        self.after_pass: Callable[[], Awaitable[None]] = _nothing  # after each of the loop's passes (remediation)

    @property
    def fresh_within(self) -> timedelta:
        """A sample older than this (three intervals) is not current."""
        return timedelta(seconds=3 * self.interval)

    def fresh(self) -> dict[str, GpuSample]:
        return self.history.fresh(self.clock(), self.fresh_within)

    def _active_alerts(self) -> dict[tuple[str, AlertKind], Alert]:
        """Alerts left active by a previous run, so they are cleared, not raised twice."""
        with self.sessions() as session:
            rows = queries.active_alert_rows(session)
        return {
            (r.gpu_uuid, AlertKind(r.kind)): Alert(
                kind=AlertKind(r.kind),
                uuid=r.gpu_uuid,
                node=r.node,
                value=r.value,
                threshold=r.threshold,
                message=r.message,
                raised_at=r.raised_at,
            )
            for r in rows
        }

    def start(self) -> None:
        if self.source is not None:
            self._runner = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner

    async def read_now(self, since: datetime) -> tuple[dict[str, GpuSample], dict[str, frozenset[str]]]:
        """``health`` after a pass that sampled at ``since`` or later, when a source is set (core/checks.py
        judges gpu-health with it): checks that wait together share the pass one of them made."""
        if self.source is not None:
            async with self._passing:
                if self.sampled_at is None or self.sampled_at < since:
                    await self._pass()
        return self.health()

    def health(self) -> tuple[dict[str, GpuSample], dict[str, frozenset[str]]]:
        """The GPUs' latest fresh readings, and the kinds of alert active on each, by the sample's UUID."""
        kinds: dict[str, set[str]] = {}
        for uuid, kind in self._alerts.active:
            kinds.setdefault(uuid, set()).add(kind.value)
        return self.fresh(), {uuid: frozenset(found) for uuid, found in kinds.items()}

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
                await self.after_pass()
            except Exception:
                log.exception("telemetry pass failed; trying again in %.0f s", self.interval)
            await asyncio.sleep(self.interval)

    async def tick(self) -> None:
        """One pass: sample, snapshot, decide, act."""
        async with self._passing:
            await self._pass()

    async def _pass(self) -> None:
        # 1. sample
        now = self.clock()
        samples = await self._sample(now)
        # 2. snapshot
        with self.sessions() as session:
            inventory = {g.uuid: (node.name, cluster.name) for cluster, node, g in queries.present_gpus(session)}
            holders = queries.gpu_holders(session)
            watched = _watched_gprs(session)
        # 3. decide
        changes: list[AlertChange] = []
        if samples is not None:
            self._seen.update(s.uuid for s in samples)
            expected = [(uuid, inventory[uuid][0]) for uuid in sorted(self._seen & inventory.keys())]
            self._alerts, changes = evaluate(self._alerts, samples, expected, self.thresholds, now)
        fresh = self.history.fresh(now, self.fresh_within) if samples is not None else {}
        self._watches, decisions = watch_all(self._watches, watched, fresh, self.idle_threshold, now)
        # 4. act
        if samples:
            self._record_readings(samples, holders, now)
        await self._record_alerts(changes, inventory, holders, now)
        self._act_on_idle(decisions, now)

    def _record_readings(self, samples: list[GpuSample], holders: dict[str, tuple[str, int]], now: datetime) -> None:
        """Add the bound GPUs' utilisation readings to their GPRs' totals of the day (GET /usage)."""
        totals = reading_totals(samples, {uuid: gpr_id for uuid, (_, gpr_id) in holders.items()})
        if totals:
            with transaction(self.sessions) as session:
                queries.add_readings(session, totals, day_of(now))

    async def _sample(self, now: datetime) -> list[GpuSample] | None:
        try:
            samples = await self.source.sample(now)
        except MetricsUnavailable as e:
            if self.source_error != str(e):
                log.warning("GPU metrics unavailable: %s", e)
            self.source_error = str(e)
            return None
        if self.source_error:
            log.info("GPU metrics from %s again", self.source.name)
        self.source_error = None
        self.sampled_at = now
        self.history.add(samples, now)
        return samples

    async def _record_alerts(
        self,
        changes: list[AlertChange],
        inventory: dict[str, tuple[str, str]],
        holders: dict[str, tuple[str, int]],
        now: datetime,
    ) -> None:
        messages = []
        with transaction(self.sessions) as session:
            for change in changes:
                alert = change.alert
                if change.raised:
                    holder = holders.get(alert.uuid)
                    cluster = inventory.get(alert.uuid, (None, None))[1]
                    row = queries.add_alert(session, alert, cluster, holder)
                else:
                    row = queries.clear_alert(session, alert, now)
                    if row is None:
                        continue
                queries.add_event(
                    session,
                    Event(
                        kind="alert" if change.raised else "alert-cleared",
                        actor=ACTOR,
                        reason=alert.message if change.raised else f"cleared: {alert.message}",
                        time=change.time,
                        gpr_id=row.gpr_id,
                        slice=row.slice,
                        data={"alert": row.id, "alert_kind": alert.kind.value, "gpu": alert.uuid, "node": alert.node},
                    ),
                )
                messages.append(format_alert(change, slice=row.slice, gpr_id=row.gpr_id))
                if self.kube_events is not None and alert.node:
                    text = alert.message if change.raised else f"cleared: {alert.message}"
                    self.kube_events.about_node(row.cluster, alert.node, notices.alert(change.raised, text))
        if self.notifier is not None:
            for message in messages:
                try:
                    await self.notifier.send(message)
                except NotifyError as e:
                    log.warning("alert not sent to Slack: %s", e)

    def _act_on_idle(self, decisions: list[IdleDecision], now: datetime) -> None:
        released = False
        for decision in decisions:
            with transaction(self.sessions) as session:
                row = queries.get_gpr_row(session, decision.gpr_id, lock=True)
                if row is None or row.status != Status.PROVISIONED:
                    continue
                gpr = queries.to_gpr(row)
                if decision.action is IdleAction.WARN:
                    queries.add_event(
                        session,
                        Event(
                            kind="idle-warning",
                            actor=IDLE_ACTOR,
                            reason=f"its GPUs have been idle since {format_time(decision.since)}; it is released "
                            f"at {format_time(decision.release_at)} unless they are used",
                            time=now,
                            gpr_id=gpr.id,
                            slice=gpr.spec.slice,
                            data={
                                "idle_since": format_time(decision.since),
                                "release_at": format_time(decision.release_at),
                            },
                        ),
                    )
                    continue
                reason = (
                    f"its GPUs stayed idle (below {self.idle_threshold:g}% utilization, no process) for "
                    f"{format_duration(decision.release_at - decision.since)}"
                )
                queries.apply(
                    session, row, lifecycle.begin_release(gpr, EndReason.IDLE_RELEASED, IDLE_ACTOR, reason, now)
                )
                released = True
        if released:
            self.on_release()


def _watched_gprs(session: Session) -> list[Watched]:
    """Provisioned GPRs whose idle timeout (their own or their slice's) applies."""
    policies = {row.name: queries.slice_policy(row) for row in queries.all_slices(session)}
    watched = []
    for row in queries.gpr_rows(session, statuses=[Status.PROVISIONED]):
        gpr = queries.to_gpr(row)
        policy = policies.get(gpr.spec.slice)
        timeout = gpr.spec.idle_timeout if policy is None else effective_idle_timeout(gpr.spec, policy)
        if timeout is not None and gpr.bound_gpus:
            watched.append(Watched(gpr.id, gpr.bound_gpus, timeout))
    return watched
