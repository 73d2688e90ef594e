"""GPU metrics: every GPU's latest readings, their used utilisation over the last day, a GPU's
time series, a slice's workloads, alerts.

Vocabulary: the *metric source* (NVML or Prometheus) is read by the telemetry
loop (telemetry.py); these handlers answer from its in-memory history and the
store. Admins see every GPU; a member sees the GPUs bound to their slices now,
their slices' workloads and their slices' alerts. A GPU the caller may not see
is answered as unknown (404).
"""

from __future__ import annotations

from datetime import timedelta

from ...core import resources as api
from ...core.errors import InvalidRequest
from ...core.resources import Alerts, GPUMetrics, GPUs, UsedUtilization, Workloads
from ...core.units import format_duration
from ...core.workloads import ServerInSlice, hotspots, slice_workloads
from ...store import queries
from ...store.models import GPU, Binding
from .. import cursors
from ..operations import Named, body_at
from ..parameters import (
    SORT_KEYS,
    AlertsQuery,
    GPUsQuery,
    MetricsQuery,
    UtilizationQuery,
    WorkloadsQuery,
    read,
)
from ..serialize import alert_resource, sample_resource
from .base import APIHandler, operation

SERIES_MAX_STEP = timedelta(hours=1)
USED_MAX_STEP = timedelta(hours=24)


class MetricsBase(APIHandler):
    def source(self) -> api.MetricSource:
        telemetry = self.egs.telemetry
        return api.MetricSource(
            name=telemetry.source.name if telemetry.source else None,
            interval=timedelta(seconds=telemetry.interval),
            sampled_at=telemetry.sampled_at,
            error=telemetry.source_error,
        )

    def visible_slices(self, session) -> list[str] | None:
        """The slices whose GPUs the caller sees; None: every GPU (admins)."""
        seen = self.viewer.slices
        return None if seen is None else sorted(seen)

    def visible_gpus(self, session) -> list[tuple]:
        """(cluster, node, GPU, holding slice, holding GPR) of each present GPU the caller sees."""
        holders = queries.gpu_holders(session)
        visible = self.visible_slices(session)
        rows = []
        for cluster, node, gpu in queries.present_gpus(session):
            slice_name, gpr_id = holders.get(gpu.uuid, (None, None))
            if visible is None or slice_name in visible:
                rows.append((cluster, node, gpu, slice_name, gpr_id))
        return rows


class GPUsHandler(MetricsBase):
    @operation(
        "GET /gpus",
        "Every GPU the caller sees (admins: all; members: their slices') with its latest readings",
        ok="GPUs",
        answer=GPUs,
        errors=(401,),
        query=GPUsQuery,
        names=(Named("/gpus/{uuid}", body_at("/gpus/0", uuid="uuid")),),
    )
    def get(self) -> None:
        sort = read(GPUsQuery, self).sort
        latest = self.egs.telemetry.history.latest()
        with self.egs.sessions() as session:
            gpus = []
            for cluster, node, gpu, slice_name, gpr_id in self.visible_gpus(session):
                gpus.append(
                    api.GPU(
                        uuid=gpu.uuid,
                        index=gpu.index,
                        node=node.name,
                        cluster=cluster.name,
                        model=gpu.product,
                        memory_mib=gpu.memory_mib,
                        declared=gpu.declared,
                        healthy=gpu.healthy,
                        parent_uuid=gpu.parent_uuid,
                        mig_profile=gpu.mig_profile,
                        slice=slice_name,
                        gpr=gpr_id,
                        sample=sample_resource(latest.get(gpu.uuid)),
                    )
                )
        field = SORT_KEYS[sort]
        if field is not None:
            gpus.sort(key=lambda gpu: _highest_first(gpu, field))
        self.write_json(api.GPUs(source=self.source(), gpus=gpus))


def _highest_first(gpu: api.GPU, field: str) -> tuple[bool, float]:
    """Sort key: the highest reading first, GPUs without one last (node order among equals)."""
    value = None if gpu.sample is None else getattr(gpu.sample, field)
    return (value is None, -(value or 0.0))


class UsedUtilizationHandler(MetricsBase):
    """GET /gpus/utilization?since=&step=: the mean utilisation per step of the GPUs the caller sees.

    Admins: every GPU the metric source reported; members: their slices' GPUs as /gpus shows them.
    From the last day kept in memory (metrics/history.py): ``since`` (default a day ago) is rounded
    down to its 5-minute bucket and must be within the day; ``step`` (default 5 minutes) is a
    multiple of 5 minutes, at most a day.
    """

    @operation(
        "GET /gpus/utilization",
        "The used utilisation over the last 24 h, per step, of the GPUs the caller sees",
        ok="used utilisation per step, up to now",
        answer=UsedUtilization,
        errors=(401,),
        query=UtilizationQuery,
        description=(
            "Admins: every GPU the metric source reported; members: their slices' GPUs as /gpus shows them. From "
            "5-minute buckets kept in memory since the service started. A point's utilization is the mean of the "
            "GPUs' readings in the step, null without any."
        ),
    )
    def get(self) -> None:
        query = read(UtilizationQuery, self)
        now = self.now()
        day = self.egs.telemetry.history.day
        since = now - day.day if query.since is None else query.since
        start = day.floor(since)
        if start < day.oldest(now):
            raise InvalidRequest(
                "since", f"since must be at most {_hours(day.day)} ago: the service keeps no older utilisation"
            )
        step = day.bucket if query.step is None else query.step
        if step % day.bucket:
            bucket = f"{format_duration(day.bucket)} ({int(day.bucket.total_seconds())} s)"
            raise InvalidRequest("step", f"step must be a multiple of {bucket}, the bucket utilisation is kept in")
        if step > USED_MAX_STEP:
            raise InvalidRequest("step", f"step must be at most {_hours(USED_MAX_STEP)}")
        uuids = None
        if not self.is_admin:
            with self.egs.sessions() as session:
                uuids = [gpu.uuid for _, _, gpu, _, _ in self.visible_gpus(session)]
        points = day.used(uuids, start, step, now)
        self.write_json(
            api.UsedUtilization(
                source=self.source(), since=start, step=step, points=[api.UsedUtilizationPoint(**p) for p in points]
            )
        )


def _hours(duration: timedelta) -> str:
    return f"{duration / timedelta(hours=1):g} h"


class GPUMetricsHandler(MetricsBase):
    """GET /gpus/{uuid}/metrics?since=&step=: the GPU's readings, averaged per step."""

    @operation(
        "GET /gpus/{uuid}/metrics",
        "A GPU's readings over the last hour at most, averaged per step",
        ok="time series",
        answer=GPUMetrics,
        errors=(401, 404),
        query=MetricsQuery,
    )
    def get(self, uuid: str) -> None:
        query = read(MetricsQuery, self)
        now = self.now()
        telemetry = self.egs.telemetry
        since = now - telemetry.history.keep if query.since is None else query.since
        step = timedelta(seconds=telemetry.interval) if query.step is None else query.step
        if step > SERIES_MAX_STEP:
            raise InvalidRequest("step", "step must be at most 1h")
        with self.egs.sessions() as session:
            known = session.get(GPU, uuid) is not None
            holder = session.get(Binding, uuid)
            visible = self.visible_slices(session)
        if not known or (visible is not None and (holder is None or holder.slice not in visible)):
            raise self.not_found(f"GPU {uuid!r} among the GPUs you can see")
        points = telemetry.history.series(uuid, since, step)
        self.write_json(
            api.GPUMetrics(
                uuid=uuid, since=since, step=step, source=self.source(), points=[api.MetricPoint(**p) for p in points]
            )
        )


class WorkloadsHandler(MetricsBase):
    """GET /workloads?slice=&limit=&cursor=: per slice, its servers, pods and processes with their GPUs
    and hotspots, a page at a time. Workloads are made from live telemetry, not stored: the slices
    (by name) before the cursor's are skipped, and those of a page are made and ordered in memory."""

    @operation(
        "GET /workloads",
        "Servers, pods and processes on the caller's slices' GPUs, with hotspots",
        ok="a page of workloads",
        answer=Workloads,
        errors=(401, 403, 404),
        query=WorkloadsQuery,
    )
    def get(self) -> None:
        query = read(WorkloadsQuery, self)
        wanted, limit, after = query.slice, query.limit, query.cursor
        fresh = self.egs.telemetry.fresh()
        with self.egs.sessions() as session:
            if wanted is not None:
                slices = [self.member_slice(session, wanted)]
            else:
                slices = [row for row in queries.all_slices(session) if self.is_member(row)]
            holders = queries.gpu_holders(session)
            answer = []
            for row in slices:
                if len(answer) > limit:
                    break  # the page and one more are known; later slices' workloads come after them
                if after is not None and row.name < after[0]:
                    continue  # every workload of this slice was on an earlier page
                workloads = []
                servers = [
                    ServerInSlice(s.user, s.server_name, tuple(s.gpus))
                    for s in queries.slice_servers(session, row.name)
                ]
                slice_gpus = [uuid for uuid, (name, _) in holders.items() if name == row.name]
                namespaces = [ns.namespace for ns in row.namespaces]
                for workload in slice_workloads(servers, slice_gpus, namespaces, fresh):
                    spots = hotspots(workload.gpus, fresh)
                    workloads.append(
                        api.Workload(
                            slice=row.name,
                            kind=workload.kind,
                            name=workload.name,
                            user=workload.user,
                            gpus=workload.gpus,
                            processes=[api.WorkloadProcess(**p) for p in workload.processes],
                            utilization=spots.utilization,
                            hottest_gpu=_spot(api.HottestGPU, spots.hottest, "temperature_c"),
                            most_power_gpu=_spot(api.MostPowerGPU, spots.most_power, "power_w"),
                        )
                    )
                workloads.sort(key=workload_key)
                answer.extend(w for w in workloads if after is None or workload_key(w) > after)
        answer, next_cursor = cursors.WORKLOADS.page(answer, limit, key=workload_key)
        self.write_json(api.Workloads(source=self.source(), workloads=answer, next_cursor=next_cursor))


def workload_key(workload: api.Workload) -> tuple[str, int, str, str]:
    """Workloads' order: slice name, kind (servers, pods, processes), name, first GPU (two stray
    processes may share a pid on different GPUs)."""
    gpus = workload.gpus
    return (workload.slice, api.WORKLOAD_KINDS.index(workload.kind), workload.name, gpus[0] if gpus else "")


def _spot(model: type[api.Resource], sample, field: str) -> api.Resource | None:
    if sample is None:
        return None
    return model(uuid=sample.uuid, node=sample.node, **{field: getattr(sample, field)})


class AlertsHandler(MetricsBase):
    """GET /alerts?slice=&since=&active=&limit=&cursor=: newest first, a page at a time (keyset on
    (raised_at, id), the index ix_alerts_raised_at_id)."""

    @operation(
        "GET /alerts",
        "GPU alerts of the caller's slices (admins: all), newest first",
        ok="a page of alerts, newest first",
        answer=Alerts,
        errors=(401, 403, 404),
        query=AlertsQuery,
    )
    def get(self) -> None:
        query = read(AlertsQuery, self)
        wanted, since, limit, before = query.slice, query.since, query.limit, query.cursor
        with self.egs.sessions() as session:
            slices = self.visible_slices(session) if wanted is None else [self.member_slice(session, wanted).name]
            rows = queries.alert_rows(
                session,
                slices=slices,
                since=since,
                active=query.active,
                limit=limit + 1,
                before=before,
            )
            rows, next_cursor = cursors.ALERTS.page(rows, limit, key=lambda r: (r.raised_at, r.id))
            alerts = [alert_resource(r) for r in rows]
        self.write_json(api.Alerts(source=self.source(), alerts=alerts, next_cursor=next_cursor))
