"""Inference endpoints (core/endpoints.py decides): the members' commands, and the pass that keeps each
endpoint's replicas as it wants them.

A command writes the endpoint's row (and an event) and wakes the pass. The pass, every
``interval`` and when woken (a command, a request at a scaled-to-zero endpoint), for each endpoint:
takes its load from the proxy (endpoint_traffic.py) and says how many replicas it wants; files the
missing replicas' GPRs through ``commands.submit`` (so the slice's policy, quotas, fair share and
estimates apply, and each GPR is accounted like any other), gives back the extra ones, replaces those
whose window ends soon; and starts a server on each provisioned replica's GPUs (EndpointServers, on
this host), stopping those whose GPR ended. A refused GPR fails the endpoint, saying why, and the
next is filed no sooner than REFILE_AFTER.

Endpoints run on this host's GPUs (the ``local`` cluster) so far: ``kserve``, and ``cluster`` set to
another cluster, are refused with a 422 that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from ..backends.local.endpoint_servers import EndpointServers, Server, server_environment
from ..core import endpoints as core_endpoints
from ..core import model as core
from ..core.endpoints import REFILE_AFTER, EndpointSpec, Hold, Replica
from ..core.errors import Conflict, IllegalTransition, InvalidRequest, NotFound, PolicyViolation, Unavailable
from ..core.requests import EndpointCreate, EndpointUpdate, GPRCreate
from ..core.resources import Endpoint, EndpointReplica
from ..core.samples import GpuSample
from ..store import endpoints as store
from ..store import queries
from ..store.db import transaction
from ..store.models import EndpointRow
from .commands import Commands, template_for
from .endpoint_traffic import Traffic
from .periodic import Periodic
from .planning import Planning

log = logging.getLogger(__name__)
ACTOR = "endpoints"
LAST_REQUEST_EVERY = timedelta(seconds=10)  # a busy endpoint's last request is written this often at most


@dataclass(frozen=True)
class Known:
    """What the proxy needs of an endpoint without reading the store: its id and slice's hub group."""

    id: int
    group: str


class Endpoints(Periodic):
    name = "endpoint pass"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        planning: Planning,
        commands: Commands,
        servers: EndpointServers | None,
        clock: Callable[[], datetime],
        interval: float,
        *,
        cluster: str,
        prefix: str,
        samples: Callable[[], Mapping[str, GpuSample]],
    ):
        self.sessions = sessions
        self.planning = planning
        self.commands = commands
        self.servers = servers  # None: this host's GPUs are not used, so no endpoint can run
        self.clock = clock
        self.interval = interval
        self.cluster = cluster  # the cluster of this host's GPUs
        self.prefix = prefix  # the service's URL prefix
        self.samples = samples  # the fresh sample of each GPU (Telemetry.fresh)
        self.traffic = Traffic()
        self.known: dict[tuple[str, str], Known] = {}
        self._status: dict[int, str] = {}
        self.wanted: dict[int, int] = {}  # replicas each endpoint wants, as of the last pass
        self._renewing: set[int] = set()
        self._passed = asyncio.Event()

    # the pass

    async def stop(self) -> None:
        await super().stop()
        if self.servers is not None:
            await self.servers.stop_all()

    async def passed(self, timeout: float) -> None:
        """Wait for the end of the next pass (at most ``timeout`` seconds)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._passed.wait()), timeout)

    async def tick(self) -> None:
        try:
            await self._pass()
        finally:
            passed, self._passed = self._passed, asyncio.Event()
            passed.set()

    async def _pass(self) -> None:
        now = self.clock()
        with self.sessions() as session:
            rows = store.rows(session)
            replicas = store.replica_gprs(session, [row.id for row in rows])
            state = self.planning.state.current(session, now)
            groups = dict(state.groups)
            devices = {
                gpr.id: queries.devices(session, gpr.bound_gpus)
                for gprs in replicas.values()
                for gpr in gprs
                if gpr.status is core.Status.PROVISIONED
            }
        self.known = {(row.slice, row.name): Known(row.id, groups.get(row.slice, "")) for row in rows}
        running: set[tuple[int, int]] = set()
        for row in rows:
            running |= await self._keep(row, replicas.get(row.id, []), devices, now)
        self._renewing &= {gpr.id for gprs in replicas.values() for gpr in gprs}
        if self.servers is not None:
            for key in set(self.servers.servers) - running:
                await self.servers.stop(key)
            await self.servers.check()

    async def _keep(
        self, row: EndpointRow, gprs: list[core.GPR], devices: dict[int, list[str]], now: datetime
    ) -> set[tuple[int, int]]:
        """One endpoint's pass; the servers it runs."""
        spec = store.to_spec(row)
        load = self.traffic.take(row.id, now, row.last_request)
        load = dataclasses.replace(load, queued=self._queued(row.id))
        hold = store.hold_of(row)
        replicas = [self._replica(row.id, gpr) for gpr in gprs]
        wanted = core_endpoints.wanted_replicas(spec, row.wanted, load, hold, row.changed_at, now)
        changes = core_endpoints.replica_changes(spec, wanted, replicas, now)
        self._note(row, wanted, load, hold, now)
        self.wanted[row.id] = wanted
        for gpr_id in set(changes.renewing) - self._renewing:
            self._event(
                row,
                "endpoint-replica-renewing",
                f"GPR {gpr_id}'s window ends soon: a new GPR replaces it",
                now,
                gpr_id=gpr_id,
            )
        self._renewing |= set(changes.renewing)
        for gpr_id in changes.drop:
            self._give_back(next(g for g in gprs if g.id == gpr_id), f"endpoint {spec.name} wants {wanted} replica(s)")
        renews = list(changes.renewing)
        for _ in range(changes.file):
            if not await self._file(row, spec, renews.pop(0) if renews else None, now):
                break
        running = set()
        for gpr in gprs:
            if gpr.status is core.Status.PROVISIONED and gpr.id not in changes.drop and self.servers is not None:
                running.add(await self._serve(row, spec, gpr, devices.get(gpr.id, [])))
        self._say_status(row, wanted, gprs, now)
        return running

    def _replica(self, endpoint_id: int, gpr: core.GPR) -> Replica:
        server = self._server(endpoint_id, gpr.id)
        ready = server is not None and server.state == "ready"
        return Replica(gpr.id, gpr.status, gpr.window_end, ready, server.in_flight if server is not None else 0)

    def _note(self, row: EndpointRow, wanted: int, load, hold: Hold | None, now: datetime) -> None:
        """Write what changed of the endpoint: replicas wanted (an event), an ended hold, and its last
        request (every LAST_REQUEST_EVERY at most: it counts only after a restart, for the idle time)."""
        expired = hold is not None and now >= hold.until
        newer = load.last_request is not None and (
            row.last_request is None or load.last_request - row.last_request >= LAST_REQUEST_EVERY
        )
        if wanted == row.wanted and not expired and not newer:
            return
        with transaction(self.sessions) as session:
            fresh = session.get(EndpointRow, row.id)
            if fresh is None:
                return
            if newer:
                fresh.last_request = load.last_request
            if expired:
                fresh.hold_replicas = fresh.hold_until = None
            if wanted != fresh.wanted:
                why = "idle" if wanted < fresh.wanted and not load.in_flight else f"{load.peak} request(s) in flight"
                queries.add_event(
                    session,
                    self._make_event(
                        fresh,
                        "endpoint-scaled",
                        f"{fresh.wanted} -> {wanted} replica(s): {why}",
                        now,
                        replicas_from=fresh.wanted,
                        replicas_to=wanted,
                    ),
                )
                fresh.wanted = wanted
            row.wanted, row.last_request = fresh.wanted, fresh.last_request

    async def _file(self, row: EndpointRow, spec: EndpointSpec, renews: int | None, now: datetime) -> bool:
        """File one replica's GPR; False when it was refused (the endpoint fails, saying why)."""
        if row.refused_at is not None and now - row.refused_at < REFILE_AFTER:
            return False
        try:
            gpr_spec = self._gpr_spec(spec)
            submitted = await self.commands.submit(
                gpr_spec,
                row.created_by,
                admin=False,
                also=lambda session, gpr: store.add_replica(session, row.id, gpr.id, renews),
            )
        except (InvalidRequest, PolicyViolation, NotFound) as e:
            self._refused(row, f"a GPR for a replica was refused: {e}", now)
            return False
        gpr = submitted.gpr
        if gpr.status is core.Status.REJECTED:
            self._refused(row, f"GPR {gpr.id} for a replica was rejected: {gpr.status_reason}", now)
            return False
        if row.problem is not None:
            self._set(row, problem=None, refused_at=None)
        return True

    def _gpr_spec(self, spec: EndpointSpec) -> core.GPRSpec:
        asked = {"slice": spec.slice, "name": f"endpoint {spec.name}", "duration": spec.duration}
        asked["cluster"] = spec.cluster or self.cluster
        if spec.template is not None:
            with self.sessions() as session:
                template = template_for(session, spec.template, spec.slice)
            return GPRCreate.model_validate({**asked, "template": spec.template}).to_spec(template)
        return GPRCreate.model_validate({**asked, "gpus": spec.gpus}).to_spec()

    def _refused(self, row: EndpointRow, problem: str, now: datetime) -> None:
        if problem != row.problem:
            with transaction(self.sessions) as session:
                fresh = session.get(EndpointRow, row.id)
                if fresh is not None:
                    queries.add_event(session, self._make_event(fresh, "endpoint-failed", problem, now))
        self._set(row, problem=problem, refused_at=now)

    def _set(self, row: EndpointRow, **values) -> None:
        with transaction(self.sessions) as session:
            fresh = session.get(EndpointRow, row.id)
            if fresh is not None:
                for name, value in values.items():
                    setattr(fresh, name, value)
        for name, value in values.items():
            setattr(row, name, value)

    def _give_back(self, gpr: core.GPR, reason: str) -> None:
        try:
            if gpr.status in (core.Status.PENDING_APPROVAL, core.Status.QUEUED):
                self.commands.cancel(gpr.id, ACTOR, reason)
            elif gpr.status.holds_gpus:
                self.commands.release(gpr.id, ACTOR, reason)
        except (Conflict, IllegalTransition, NotFound) as e:  # it moved on meanwhile: the next pass sees it
            log.info("giving back GPR %d: %s", gpr.id, e)

    async def _serve(self, row: EndpointRow, spec: EndpointSpec, gpr: core.GPR, devices: list[str]) -> tuple[int, int]:
        egs = {
            "CUDA_VISIBLE_DEVICES": ",".join(devices),
            "EGS_SLICE": spec.slice,
            "EGS_ENDPOINT": spec.name,
            "EGS_GPRS": str(gpr.id),
        }
        key = (row.id, gpr.id)
        await self.servers.ensure(
            key,
            lambda port: core_endpoints.local_command(spec, port),
            server_environment(spec.env, egs),
            (spec.health_path, spec.metrics_path),
            f"{spec.slice}.{spec.name}.{gpr.id}",
        )
        return key

    def _say_status(self, row: EndpointRow, wanted: int, gprs: list[core.GPR], now: datetime) -> None:
        """An event when the endpoint becomes ready, or its servers fail."""
        states = [self._state(row.id, gpr) for gpr in gprs]
        status = core_endpoints.status(wanted, states, row.problem)
        before = self._status.get(row.id)
        self._status[row.id] = status
        if before is None or before == status or status not in ("ready", "failed"):
            return
        reason = "a replica is ready"
        if status == "failed":
            reason = self._server_message(row.id, gprs) or row.problem or "its servers keep exiting"
        with transaction(self.sessions) as session:
            fresh = session.get(EndpointRow, row.id)
            if fresh is not None:
                queries.add_event(session, self._make_event(fresh, f"endpoint-{status}", reason, now))

    def _state(self, endpoint_id: int, gpr: core.GPR) -> str:
        server = self._server(endpoint_id, gpr.id)
        return core_endpoints.replica_state(gpr.status, server.state if server is not None else None)

    def _server_message(self, endpoint_id: int, gprs: list[core.GPR]) -> str | None:
        for gpr in gprs:
            server = self._server(endpoint_id, gpr.id)
            if server is not None and server.message:
                return server.message
        return None

    # the proxy's side

    def find(self, slice_name: str, name: str, groups: Callable[[], dict[str, str]]) -> Known | None:
        """The endpoint the proxy serves at ``slice_name/name`` (``groups``: the slices' hub groups, read
        only for an endpoint made since the last pass)."""
        known = self.known.get((slice_name, name))
        if known is None:
            with self.sessions() as session:
                row = store.get(session, slice_name, name)
            if row is not None:
                known = self.known[(slice_name, name)] = Known(row.id, groups().get(slice_name, ""))
        return known

    def _utilization(self, gprs: list[core.GPR]) -> float | None:
        """The mean utilisation of its provisioned replicas' GPUs, of those with a sample."""
        samples = self.samples()
        readings = [
            s.utilization
            for gpr in gprs
            if gpr.status is core.Status.PROVISIONED
            for uuid in gpr.bound_gpus
            if (s := samples.get(uuid)) is not None and s.utilization is not None
        ]
        return sum(readings) / len(readings) if readings else None

    def _server(self, endpoint_id: int, gpr_id: int) -> Server | None:
        return self.servers.get((endpoint_id, gpr_id)) if self.servers is not None else None

    def _ready(self, endpoint_id: int) -> list[Server]:
        if self.servers is None:
            return []
        return [s for (e, _), s in self.servers.servers.items() if e == endpoint_id and s.state == "ready"]

    def _queued(self, endpoint_id: int) -> int:
        return sum(s.queued for s in self._ready(endpoint_id))

    def ready_count(self, endpoint_id: int) -> int:
        return len(self._ready(endpoint_id))

    def ready_server(self, endpoint_id: int) -> Server | None:
        """The ready replica's server with the fewest requests in flight."""
        return min(self._ready(endpoint_id), key=lambda s: s.in_flight, default=None)

    def not_ready(self, endpoint_id: int, slice_name: str, name: str, now: datetime) -> tuple[str, int]:
        """Why an endpoint has no ready replica, and the seconds to wait before trying again."""
        with self.sessions() as session:
            gprs = store.replica_gprs(session, [endpoint_id]).get(endpoint_id, [])
            row = store.get(session, slice_name, name)
        estimates = self.planning.last.plan.estimates if self.planning.last is not None else {}
        starts = [e.start for gpr in gprs if (e := estimates.get(gpr.id)) is not None]
        starting = any(self._state(endpoint_id, gpr) in ("starting", "failed") for gpr in gprs)
        wait = core_endpoints.retry_after(starts, now, starting)
        if row is not None and row.problem:
            return f"endpoint {slice_name}/{name} failed: {row.problem}", wait
        if starting:
            return f"endpoint {slice_name}/{name} is starting: its server is not ready yet", wait
        if not gprs:
            return f"endpoint {slice_name}/{name} is scaled to zero: a replica is being asked for", wait
        ids = ", ".join(str(g.id) for g in gprs)
        return f"endpoint {slice_name}/{name} waits for GPUs: its replicas' GPRs ({ids}) start in about {wait} s", wait

    # the commands

    def create(self, asked: EndpointCreate, user: str, now: datetime) -> EndpointRow:
        spec = asked.to_spec()
        self._check_runs_here(spec)
        with transaction(self.sessions) as session:
            if queries.get_slice(session, spec.slice) is None:
                raise PolicyViolation("slice", f"no slice named {spec.slice!r}; GET /slices lists yours")
            if store.get(session, spec.slice, spec.name) is not None:
                raise Conflict(f"slice {spec.slice!r} has an endpoint named {spec.name!r} already")
            if spec.template is not None:
                template_for(session, spec.template, spec.slice)
            row = EndpointRow(
                slice=spec.slice,
                name=spec.name,
                runtime=spec.runtime,
                wanted=max(spec.min_replicas, 1),
                created_by=user,
                created_at=now,
                changed_at=now,
            )
            store.write_spec(row, spec)
            session.add(row)
            session.flush()
            queries.add_event(session, self._make_event(row, "endpoint-created", f"{spec.runtime} {spec.model}", now))
        self.wake()
        return row

    def update(self, slice_name: str, name: str, changes: EndpointUpdate, user: str, now: datetime) -> EndpointRow:
        with transaction(self.sessions) as session:
            row = self._row(session, slice_name, name)
            spec = changes.apply(store.to_spec(row))
            self._check_runs_here(spec)
            if spec.template is not None:
                template_for(session, spec.template, spec.slice)
            store.write_spec(row, spec)
            row.problem, row.refused_at, row.changed_at = None, None, now
            row.wanted = min(max(row.wanted, spec.min_replicas), spec.max_replicas)
            given = ", ".join(sorted(changes.given()))
            queries.add_event(session, self._make_event(row, "endpoint-changed", f"{user} changed {given}", now))
        self.wake()
        return row

    def scale(self, slice_name: str, name: str, replicas: int, user: str, now: datetime) -> EndpointRow:
        with transaction(self.sessions) as session:
            row = self._row(session, slice_name, name)
            spec = store.to_spec(row)
            core_endpoints.check_scale(spec, replicas)
            queries.add_event(
                session,
                self._make_event(
                    row,
                    "endpoint-scaled",
                    f"{user} scaled it: {row.wanted} -> {replicas} replica(s)",
                    now,
                    replicas_from=row.wanted,
                    replicas_to=replicas,
                ),
            )
            row.wanted, row.hold_replicas, row.hold_until = replicas, replicas, now + spec.idle_timeout
            row.changed_at, row.problem, row.refused_at = now, None, None
        self.wake()
        return row

    def delete(self, slice_name: str, name: str, user: str, now: datetime) -> None:
        """Give back its replicas' GPRs and forget it (its GPRs stay in the history)."""
        with self.sessions() as session:
            row = self._row(session, slice_name, name)
            endpoint_id = row.id
            gprs = store.replica_gprs(session, [endpoint_id]).get(endpoint_id, [])
        for gpr in gprs:
            self._give_back(gpr, f"endpoint {name} was deleted by {user}")
        with transaction(self.sessions) as session:
            row = self._row(session, slice_name, name)
            queries.add_event(session, self._make_event(row, "endpoint-deleted", f"deleted by {user}", now))
            session.delete(row)
        self.known.pop((slice_name, name), None)
        self.traffic.forget(endpoint_id)
        self._status.pop(endpoint_id, None)
        self.wanted.pop(endpoint_id, None)
        self.wake()

    def _row(self, session: Session, slice_name: str, name: str) -> EndpointRow:
        row = store.get(session, slice_name, name, lock=True)
        if row is None:
            raise NotFound(f"no endpoint named {name!r} in slice {slice_name!r}; GET /endpoints lists them")
        return row

    def _check_runs_here(self, spec: EndpointSpec) -> None:
        if spec.runtime == "kserve":
            raise PolicyViolation(
                "runtime",
                "runtime kserve needs a Kubernetes cluster with KServe; endpoints run on this host only so far",
            )
        if spec.cluster not in (None, self.cluster):
            raise PolicyViolation(
                "cluster",
                f"endpoints run on this host's GPUs (cluster {self.cluster!r}) only so far, not {spec.cluster!r}",
            )
        if self.servers is None:
            raise Unavailable("this service does not use this host's GPUs (local_gpus is off): no endpoint can run")
        if spec.runtime == "vllm" and shutil.which("vllm") is None:
            raise PolicyViolation("runtime", "vLLM is not installed on this host (no vllm on the service's PATH)")

    def _event(self, row: EndpointRow, kind: str, reason: str, now: datetime, **data) -> None:
        with transaction(self.sessions) as session:
            queries.add_event(session, self._make_event(row, kind, reason, now, **data))

    @staticmethod
    def _make_event(row: EndpointRow, kind: str, reason: str, now: datetime, **data) -> core.Event:
        gpr_id = data.pop("gpr_id", None)
        return core.Event(
            kind=kind,
            actor=ACTOR,
            reason=reason,
            time=now,
            gpr_id=gpr_id,
            slice=row.slice,
            data={"endpoint": row.name, **data},
        )

    # answers

    def view(self, row: EndpointRow, gprs: list[core.GPR], now: datetime) -> Endpoint:
        spec = store.to_spec(row)
        estimates = self.planning.last.plan.estimates if self.planning.last is not None else {}
        replicas = []
        for gpr in gprs:
            server = self._server(row.id, gpr.id)
            estimate = estimates.get(gpr.id) if gpr.status is core.Status.QUEUED else None
            replicas.append(
                EndpointReplica(
                    gpr=gpr.id,
                    gpr_status=gpr.status.value,
                    state=self._state(row.id, gpr),
                    estimated_start=estimate.start if estimate is not None else None,
                    window_end=gpr.window_end,
                    renewing=gpr.id in self._renewing,
                    in_flight=server.in_flight if server is not None else 0,
                    restarts=server.exits if server is not None else 0,
                    message=server.message if server is not None else "",
                )
            )
        states = [r.state for r in replicas]
        figures = self.traffic.figures(row.id, now)
        last = self.traffic.last_request(row.id) or row.last_request
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
        return Endpoint(
            **{**fields, "env": dict(spec.env)},
            status=core_endpoints.status(row.wanted, states, row.problem),
            message=row.problem or self._server_message(row.id, gprs),
            url=f"{self.prefix}endpoints/{row.slice}/{row.name}/",
            replicas=states.count("ready"),
            wanted_replicas=row.wanted,
            gprs=tuple(g.id for g in gprs),
            replica_states=tuple(replicas),
            requests_per_second=figures.requests_per_second,
            latency_p50=figures.latency_p50,
            latency_p95=figures.latency_p95,
            errors=figures.errors,
            in_flight=figures.in_flight,
            queued=self._queued(row.id),
            gpu_utilization=self._utilization(gprs),
            last_request=last,
            created_by=row.created_by,
            created_at=row.created_at,
        )
