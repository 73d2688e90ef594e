"""Inference endpoints (core/endpoints.py decides): the members' commands, and the pass that keeps each
endpoint's replicas as it wants them.

A command writes the endpoint's row (and an event) and wakes the pass. The pass, every
``interval`` and when woken (a command, a request at a scaled-to-zero endpoint), for each endpoint:
takes its load from the proxy (endpoint_traffic.py) and says how many replicas it wants; files the
missing replicas' GPRs through ``commands.submit`` (so the slice's policy, quotas, fair share and
estimates apply, and each GPR is accounted like any other), gives back the extra ones, replaces those
whose window ends soon; and runs each provisioned replica on its GPR's GPUs, stopping those whose GPR
ended: a server on this host (EndpointServers), or a workload on a Kubernetes cluster
(EndpointWorkloads: a Deployment behind the endpoint's Service, or a KServe InferenceService). A
refused GPR fails the endpoint, saying why, and the next is filed no sooner than REFILE_AFTER.

An endpoint runs on the cluster it names, else on this host's GPUs, else on the only Kubernetes
cluster; the choice is made when it is created, and kept.
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

from ..backends import Backend
from ..backends.kubernetes import ClusterUnavailable, KubernetesBackend
from ..backends.kubernetes import endpoint_objects as eo
from ..backends.kubernetes.api import API_ERRORS, describe_error
from ..backends.kubernetes.endpoint_workloads import EndpointWorkloads, Wanted
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
from ..system_users import NONE, service_user
from .commands import Commands, template_for
from .endpoint_traffic import Traffic
from .periodic import Periodic
from .planning import Planning

log = logging.getLogger(__name__)
ACTOR = "endpoints"
LAST_REQUEST_EVERY = timedelta(seconds=10)  # a busy endpoint's last request is written this often at most


@dataclass
class RemoteReplica:
    """A replica's workload on a Kubernetes cluster as the last pass saw it (its server's state,
    ``message``, restarts as ``exits``, ``queued`` requests); the proxy reaches it at ``url``."""

    url: str
    state: str = "starting"
    message: str = ""
    exits: int = 0
    queued: int = 0
    in_flight: int = 0


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
        backends: Mapping[str, Backend],
        vllm_image: str,
        service_url: str,
        allow_unisolated_commands: bool = False,
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
        self.backends = backends  # every cluster's backend, by name (Clusters.backends, kept current)
        self.vllm_image = vllm_image  # vLLM's image on Kubernetes, when an endpoint names none
        self.service_url = service_url  # how this service reaches a workload's Service
        # runtime command on this host in isolation none: the member's command would run as the service
        self.allow_unisolated_commands = allow_unisolated_commands
        self.workloads: dict[str, EndpointWorkloads] = {}  # by Kubernetes cluster, once one ran an endpoint
        self.remote: dict[tuple[int, int], RemoteReplica] = {}  # replicas on Kubernetes, by (endpoint, GPR)
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
            local = {row.id for row in rows if self._kube(row) is None}
            devices = {
                gpr.id: queries.devices(session, gpr.bound_gpus)
                for endpoint_id, gprs in replicas.items()
                if endpoint_id in local
                for gpr in gprs
                if gpr.status is core.Status.PROVISIONED
            }
            homes = self._homes(session, rows)
        self.known = {(row.slice, row.name): Known(row.id, groups.get(row.slice, "")) for row in rows}
        running: set[tuple[int, int]] = set()
        # every Kubernetes cluster: what a replica left there (before a restart too) goes at the next pass
        wanted: dict[str, list[Wanted]] = {
            name: [] for name, backend in self.backends.items() if isinstance(backend, KubernetesBackend)
        }
        for row in rows:
            running |= await self._keep(row, replicas.get(row.id, []), devices, homes, wanted, now)
        self._renewing &= {gpr.id for gprs in replicas.values() for gpr in gprs}
        if self.servers is not None:
            for key in set(self.servers.servers) - running:
                await self.servers.stop(key)
            await self.servers.check()
        for key in set(self.remote) - running:
            del self.remote[key]
        await self._check_workloads(wanted)

    def _kube(self, row: EndpointRow) -> str | None:
        """The Kubernetes cluster the endpoint runs on (None: this host)."""
        cluster = row.spec.get("cluster")
        return cluster if cluster not in (None, self.cluster) else None

    def _homes(self, session: Session, rows: list[EndpointRow]) -> dict[tuple[str, str], str]:
        """The home namespace of each Kubernetes endpoint's slice on its cluster, by (slice, cluster)."""
        homes = {}
        for slice_name in {row.slice for row in rows if self._kube(row) is not None}:
            found = queries.get_slice(session, slice_name)
            for cluster, names in queries.slice_namespaces(found).items() if found is not None else ():
                homes[(slice_name, cluster)] = names[0]
        return homes

    def _workloads(self, cluster: str) -> EndpointWorkloads | None:
        backend = self.backends.get(cluster)
        if not isinstance(backend, KubernetesBackend):
            return None
        if cluster not in self.workloads:
            self.workloads[cluster] = EndpointWorkloads(cluster, backend.api_client, backend.request_timeout)
        return self.workloads[cluster]

    async def _check_workloads(self, wanted: Mapping[str, list[Wanted]]) -> None:
        """Each cluster's pass, side by side (what no replica keeps there goes); the replicas as seen."""
        await asyncio.gather(*(self._check_cluster(cluster, replicas) for cluster, replicas in wanted.items()))

    async def _check_cluster(self, cluster: str, replicas: list[Wanted]) -> None:
        workloads = self._workloads(cluster)
        if workloads is None:
            for replica in replicas:
                self.remote[replica.key].message = f"cluster {cluster} is not registered (any more)"
            return
        seen = await workloads.check(replicas)
        for replica in replicas:
            found = seen[replica.key]
            remote = self.remote[replica.key]
            remote.state, remote.message, remote.exits = found.state, found.message, found.restarts
            remote.queued = 0
            if found.state == "ready" and replica.metrics_path:
                remote.queued = await workloads.queued(replica.workload, found, replica.metrics_path)

    async def _keep(
        self,
        row: EndpointRow,
        gprs: list[core.GPR],
        devices: dict[int, list[str]],
        homes: Mapping[tuple[str, str], str],
        wanted_there: dict[str, list[Wanted]],
        now: datetime,
    ) -> set[tuple[int, int]]:
        """One endpoint's pass; the replicas it runs (on this host, or on a Kubernetes cluster: their
        workloads are added to ``wanted_there``)."""
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
        cluster = self._kube(row)
        for gpr in gprs:
            if gpr.status is not core.Status.PROVISIONED or gpr.id in changes.drop:
                continue
            if cluster is not None:
                self._want(row, spec, gpr, homes.get((spec.slice, cluster)), wanted_there.setdefault(cluster, []))
                running.add((row.id, gpr.id))
            elif self.servers is not None:
                running.add(await self._serve(row, spec, gpr, devices.get(gpr.id, [])))
        self._say_status(row, wanted, gprs, now)
        return running

    def _want(
        self, row: EndpointRow, spec: EndpointSpec, gpr: core.GPR, namespace: str | None, wanted: list[Wanted]
    ) -> None:
        """The replica's workload, as it should be on its cluster (or why it cannot be, on the replica)."""
        key = (row.id, gpr.id)
        try:
            if namespace is None:
                raise eo.Unplaceable(f"slice {spec.slice} has no namespace on cluster {spec.cluster}")
            place = eo.placement(spec.slice, gpr.id, gpr.bound_gpus)
        except eo.Unplaceable as e:
            self.remote[key] = RemoteReplica(url="", state="failed", message=str(e))
            return
        if spec.runtime == "kserve":
            workload = eo.inference_service(spec, gpr.id, namespace, place)
            service, service_name = None, eo.predictor_service(workload["metadata"]["name"])
        else:
            workload = eo.deployment(spec, gpr.id, namespace, place, spec.image or self.vllm_image)
            service = eo.service(spec, namespace)
            service_name = service["metadata"]["name"]
        url = self.service_url.format(service=service_name, namespace=namespace, port=eo.SERVICE_PORT)
        remote = self.remote.setdefault(key, RemoteReplica(url))
        remote.url = url
        wanted.append(Wanted(key, workload, service, spec.metrics_path))

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
        refused = self._unisolated_command(spec) if self._kube(row) is None else None
        if refused is not None:  # no GPUs for a server that may not start (_serve)
            if refused != row.problem:
                self._refused(row, refused, now)
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
        """Run the replica's server for the endpoint's member (who made it), unless it is a command that
        may no longer run here (made before an admin refused unisolated commands): that fails the
        endpoint, and its GPR is given back."""
        key = (row.id, gpr.id)
        refused = self._unisolated_command(spec)
        if refused is not None:
            self._refused(row, refused, self.clock())
            self._give_back(gpr, refused)
            return key
        egs = {
            "CUDA_VISIBLE_DEVICES": ",".join(devices),
            "EGS_SLICE": spec.slice,
            "EGS_ENDPOINT": spec.name,
            "EGS_GPRS": str(gpr.id),
        }
        await self.servers.ensure(
            key,
            lambda port: core_endpoints.local_command(spec, port),
            server_environment(spec.env, egs),
            (spec.health_path, spec.metrics_path),
            f"{spec.slice}.{spec.name}.{gpr.id}",
            row.created_by,
        )
        return key

    def _unisolated_command(self, spec: EndpointSpec) -> str | None:
        """Why ``spec`` may not run on this host: a member's own command, where members' code runs as the
        service's OS user (isolation none) and an admin did not allow it (None: it may)."""
        if spec.runtime != "command" or self.allow_unisolated_commands:
            return None
        if self.servers is None or self.servers.isolation.mode != NONE:
            return None
        return (
            f"runtime command runs the member's own command, and on this host every member's code runs as the "
            f"OS user running egs-hub ({service_user()}), which can read the service's tokens and databases "
            f"(isolation {NONE}): start egs-hub as root, where each member's code runs as a system account of "
            f"their own, or, if every member is trusted, set c.EGSService.allow_unisolated_commands = True"
        )

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

    def _server(self, endpoint_id: int, gpr_id: int) -> Server | RemoteReplica | None:
        key = (endpoint_id, gpr_id)
        if key in self.remote:
            return self.remote[key]
        return self.servers.get(key) if self.servers is not None else None

    def _ready(self, endpoint_id: int) -> list[Server | RemoteReplica]:
        servers = [*(self.servers.servers.items() if self.servers is not None else ()), *self.remote.items()]
        return [s for (e, _), s in servers if e == endpoint_id and s.state == "ready"]

    def _queued(self, endpoint_id: int) -> int:
        return sum(s.queued for s in self._ready(endpoint_id))

    def ready_count(self, endpoint_id: int) -> int:
        return len(self._ready(endpoint_id))

    def ready_server(self, endpoint_id: int) -> Server | RemoteReplica | None:
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

    async def create(
        self,
        asked: EndpointCreate,
        user: str,
        now: datetime,
        *,
        also: Callable[[Session, EndpointRow], None] | None = None,
    ) -> EndpointRow:
        """POST /endpoints: the endpoint ``asked`` for, made by ``user``; ``also`` writes more in its transaction."""
        spec = await self._placed(asked.to_spec())
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
            if also is not None:
                also(session, row)
        self.wake()
        return row

    async def update(
        self, slice_name: str, name: str, changes: EndpointUpdate, user: str, now: datetime
    ) -> EndpointRow:
        with self.sessions() as session:
            before = store.to_spec(self._row(session, slice_name, name))
        cluster = before.cluster or self.cluster
        if changes.given().get("cluster") not in (None, cluster):
            raise PolicyViolation(
                "cluster", f"endpoint {name} runs on cluster {cluster}; delete it and create it there instead"
            )
        await self._placed(dataclasses.replace(changes.apply(before), cluster=cluster))
        with transaction(self.sessions) as session:
            row = self._row(session, slice_name, name)
            spec = dataclasses.replace(changes.apply(store.to_spec(row)), cluster=cluster)
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

    async def _placed(self, spec: EndpointSpec) -> EndpointSpec:
        """``spec`` on the cluster it runs on (the one it names, else this host, else the only Kubernetes
        cluster), once that cluster can run it."""
        cluster = spec.cluster or self._default_cluster()
        if cluster == self.cluster:
            self._check_runs_here(spec)
        else:
            await self._check_runs_on(cluster, spec)
        return dataclasses.replace(spec, cluster=cluster)

    def _default_cluster(self) -> str:
        if self.servers is not None:
            return self.cluster
        kube = sorted(name for name, backend in self.backends.items() if isinstance(backend, KubernetesBackend))
        if len(kube) == 1:
            return kube[0]
        if not kube:
            raise Unavailable(
                "no cluster can run endpoints: this service does not use this host's GPUs "
                "(local_gpus is off) and has no Kubernetes cluster"
            )
        raise PolicyViolation("cluster", f"name the cluster an endpoint runs on: one of {', '.join(kube)}")

    def _check_runs_here(self, spec: EndpointSpec) -> None:
        if self.servers is None:
            raise Unavailable("this service does not use this host's GPUs (local_gpus is off): name a cluster")
        if spec.runtime == "kserve":
            raise PolicyViolation(
                "runtime", "runtime kserve needs a Kubernetes cluster with KServe: name one as the endpoint's cluster"
            )
        if spec.runtime == "vllm" and shutil.which("vllm") is None:
            raise PolicyViolation("runtime", "vLLM is not installed on this host (no vllm on the service's PATH)")
        refused = self._unisolated_command(spec)
        if refused is not None:
            raise PolicyViolation("runtime", refused)

    async def _check_runs_on(self, cluster: str, spec: EndpointSpec) -> None:
        workloads = self._workloads(cluster)
        if workloads is None:
            known = ", ".join(sorted(self.backends)) or "none"
            raise PolicyViolation("cluster", f"no cluster named {cluster!r} runs endpoints (clusters: {known})")
        if spec.runtime == "command" and spec.image is None:
            raise PolicyViolation("image", f"runtime command on cluster {cluster} needs the image to run it in")
        if spec.runtime != "command" and spec.model.startswith(("/", ".", "~")):
            raise PolicyViolation(
                "model",
                f"model {spec.model!r} is a path: paths are served on this host only; on cluster {cluster} give a "
                "Hugging Face id (or, for kserve, a storage URI)",
            )
        with self.sessions() as session:
            found = queries.get_slice(session, spec.slice)
            if found is not None and cluster not in queries.slice_namespaces(found):
                raise PolicyViolation(
                    "slice", f"slice {spec.slice} has no namespace on cluster {cluster}: an admin adds one first"
                )
        if spec.runtime == "kserve":
            try:
                installed = await workloads.has_kserve()
            except (*API_ERRORS, ClusterUnavailable) as e:
                why = describe_error(e) if not isinstance(e, ClusterUnavailable) else str(e)
                raise Unavailable(f"cannot ask cluster {cluster} whether KServe is installed: {why}") from None
            if not installed:
                raise PolicyViolation(
                    "runtime",
                    f"cluster {cluster} has no KServe (the InferenceService CRD {eo.KSERVE_GROUP}/"
                    f"{eo.KSERVE_VERSION} is not installed): use runtime vllm",
                )

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
