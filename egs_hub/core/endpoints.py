"""Inference endpoints (DESIGN.md): a model served from a slice's GPUs, one GPR per replica.

Pure decisions over plain data; service/endpoints.py acts on them. An endpoint *wants* a number of
replicas (``wanted_replicas``: from the requests in flight at its proxy path, its idle time, its bounds
and a member's ``scale``); its replicas are the GPRs filed for it (``replica_changes``: how many to
file, which to give back, which end soon and are renewed by a new GPR); its ``status`` is read from its
replicas. A runtime's command on this host (``local_command``) serves HTTP on the port the service picks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .errors import InvalidRequest, PolicyViolation
from .model import Status

RUNTIMES = ("vllm", "kserve", "command")
STATUSES = ("pending", "starting", "ready", "scaled-to-zero", "failed")
REPLICA_STATES = ("waiting", "starting", "ready", "failed", "ending")
PORT_PLACEHOLDER = "{port}"
HEALTH_PATHS = {"vllm": "/health", "kserve": "/", "command": "/"}
METRICS_PATHS = {"vllm": "/metrics"}  # where a runtime says how many requests wait in its queue
QUEUED_METRIC = "vllm:num_requests_waiting"
DEFAULT_IDLE_TIMEOUT = timedelta(minutes=15)
DEFAULT_DURATION = timedelta(hours=8)
DEFAULT_TARGET_CONCURRENCY = 4
SCALE_DOWN_WINDOW = timedelta(seconds=60)  # a replica is given back once the load has not needed it this long
FAILED_STARTS = 3  # a replica that exits this many times in a row before it is ready fails its endpoint
REFILE_AFTER = timedelta(seconds=30)  # after a refused GPR, the next replica is filed no sooner
_LIVE = frozenset({Status.PENDING_APPROVAL, Status.QUEUED, Status.PROVISIONING, Status.PROVISIONED})


@dataclass(frozen=True)
class EndpointSpec:
    """What a member asked to serve. ``command``: for the ``command`` runtime, the argument list with
    ``{port}`` standing for the port; ``duration``: each replica GPR's window; ``target_concurrency``:
    the requests in flight one replica takes before another is wanted."""

    slice: str
    name: str
    runtime: str
    model: str = ""
    gpus: int | None = None
    template: str | None = None
    cluster: str | None = None
    command: tuple[str, ...] = ()
    image: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    min_replicas: int = 0
    max_replicas: int = 1
    idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT
    duration: timedelta = DEFAULT_DURATION
    target_concurrency: int = DEFAULT_TARGET_CONCURRENCY
    health_path: str = "/"
    metrics_path: str | None = None


@dataclass(frozen=True)
class Load:
    """The requests at an endpoint's proxy path: ``in_flight`` now, ``waiting`` for a replica to be
    ready, ``peak`` the most in flight (waiting included) since the last pass, ``recent_peak`` the most
    over SCALE_DOWN_WINDOW, ``last_request`` when the last one came (None: none yet); ``queued``: the
    requests waiting in the replicas' own queues, as their runtimes' metrics say."""

    in_flight: int = 0
    waiting: int = 0
    peak: int = 0
    recent_peak: int = 0
    last_request: datetime | None = None
    queued: int = 0


@dataclass(frozen=True)
class Hold:
    """Replicas a member scaled to (POST .../scale), kept at least until ``until``."""

    replicas: int
    until: datetime


def check_bounds(min_replicas: int, max_replicas: int) -> None:
    if min_replicas > max_replicas:
        raise InvalidRequest(
            "min_replicas", f"min_replicas ({min_replicas}) must not be more than max_replicas ({max_replicas})"
        )


def check_scale(spec: EndpointSpec, replicas: int) -> None:
    if not spec.min_replicas <= replicas <= spec.max_replicas:
        raise PolicyViolation(
            "replicas",
            f"replicas must be from min_replicas to max_replicas ({spec.min_replicas} to {spec.max_replicas}) "
            f"for endpoint {spec.name!r}, not {replicas}; PATCH the endpoint to change its bounds",
        )


def needed(busy: int, target_concurrency: int) -> int:
    """Replicas for ``busy`` requests in flight, ``target_concurrency`` each."""
    return math.ceil(busy / target_concurrency)


def is_idle(spec: EndpointSpec, load: Load, since: datetime, now: datetime) -> bool:
    """No request in flight or waiting, and none for ``idle_timeout`` (counted from ``since``, when the
    endpoint was made or scaled, if no request came after it)."""
    if load.in_flight or load.waiting:
        return False
    last = max(load.last_request, since) if load.last_request is not None else since
    return now - last >= spec.idle_timeout


def wanted_replicas(
    spec: EndpointSpec, current: int, load: Load, hold: Hold | None, since: datetime, now: datetime
) -> int:
    """The replicas an endpoint wants now, wanting ``current``: at once as many as the requests in
    flight need; fewer only as the peak over SCALE_DOWN_WINDOW allows; never fewer than a member's
    ``hold`` while it lasts; one more while requests wait in the replicas' own queues (``queued``);
    none (or min_replicas) once idle; always within min and max replicas, and
    one at least while requests come. An endpoint is not idle before ``idle_timeout`` after ``since``
    (when it was made or changed): a new one starts a replica."""
    if hold is not None and now < hold.until:
        floor = hold.replicas
    elif is_idle(spec, load, since, now):
        return spec.min_replicas
    else:
        floor = 1
    now_needed = needed(max(load.peak, load.in_flight + load.waiting), spec.target_concurrency)
    if load.queued:
        now_needed = max(now_needed, current + 1)
    recent_needed = needed(load.recent_peak, spec.target_concurrency)
    wanted = max(now_needed, min(current, recent_needed), floor, spec.min_replicas)
    return min(wanted, spec.max_replicas)


@dataclass(frozen=True)
class Replica:
    """One replica: its GPR's ``gpr_id``, ``status`` and ``window_end``; whether its server is
    ``ready``, and the requests it has in flight."""

    gpr_id: int
    status: Status
    window_end: datetime | None = None
    ready: bool = False
    in_flight: int = 0


@dataclass(frozen=True)
class ReplicaChanges:
    """``file``: new GPRs to file; ``drop``: GPRs to give back (cancel or release); ``renewing``: GPRs
    whose window ends within the renewal time: a new GPR replaces each, and each ends as planned."""

    file: int = 0
    drop: tuple[int, ...] = ()
    renewing: tuple[int, ...] = ()


def renew_before(spec: EndpointSpec) -> timedelta:
    """How long before its GPR's window ends a replica is replaced: a tenth of the window, 1 to 10 minutes."""
    return min(max(spec.duration / 10, timedelta(minutes=1)), timedelta(minutes=10))


def _ending(replica: Replica, before: timedelta, now: datetime) -> bool:
    return replica.window_end is not None and replica.window_end - now <= before


def replica_changes(spec: EndpointSpec, wanted: int, replicas: Sequence[Replica], now: datetime) -> ReplicaChanges:
    """What to do so that ``wanted`` replicas stay: file the missing GPRs (a replica whose window ends
    soon counts as missing), give back the extra ones (those still waiting for GPUs first, the newest
    first, then those not ready, then the least busy). With ``wanted`` 0 every replica is given back."""
    live = [r for r in replicas if r.status in _LIVE]
    if wanted == 0:
        return ReplicaChanges(drop=tuple(r.gpr_id for r in live))
    before = renew_before(spec)
    renewing = tuple(r.gpr_id for r in live if _ending(r, before, now))
    staying = [r for r in live if r.gpr_id not in renewing]
    if len(staying) <= wanted:
        return ReplicaChanges(file=wanted - len(staying), renewing=renewing)
    order = sorted(staying, key=lambda r: (r.status == Status.PROVISIONED, r.ready, r.in_flight, -r.gpr_id))
    return ReplicaChanges(drop=tuple(r.gpr_id for r in order[: len(staying) - wanted]), renewing=renewing)


def replica_state(status: Status, process: str | None) -> str:
    """A replica's state from its GPR's status and its server's (``process``: starting, ready or
    failed; None: not started)."""
    if status in (Status.PENDING_APPROVAL, Status.QUEUED, Status.PROVISIONING):
        return "waiting"
    if status != Status.PROVISIONED:
        return "ending"
    return process or "starting"


def status(wanted: int, states: Sequence[str], problem: str | None) -> str:
    """An endpoint's status from its replicas' states: ``ready`` when one is; else ``failed`` when
    ``problem`` (a refused GPR, servers that keep exiting) or every replica failed; ``starting`` when a
    replica's server starts; ``pending`` when they wait for GPUs; ``scaled-to-zero`` when none is wanted
    and none is left."""
    if "ready" in states:
        return "ready"
    if problem is not None or (states and all(s == "failed" for s in states)):
        return "failed"
    if wanted == 0 and not states:
        return "scaled-to-zero"
    if "starting" in states or "failed" in states:
        return "starting"
    return "pending"


def local_command(spec: EndpointSpec, port: int) -> list[str]:
    """The argument list that serves ``spec`` on this host on ``port``."""
    if spec.runtime == "command":
        return [arg.replace(PORT_PLACEHOLDER, str(port)) for arg in (*spec.command, *spec.args)]
    if spec.runtime == "vllm":
        return ["vllm", "serve", spec.model, "--host", "127.0.0.1", "--port", str(port), *spec.args]
    raise PolicyViolation("runtime", f"runtime {spec.runtime!r} does not run on this host; it needs Kubernetes")


def queued_in(exposition: str) -> int:
    """The requests waiting in a runtime's queue, from its Prometheus text exposition (the sum of
    QUEUED_METRIC's samples; 0 when it has none)."""
    total = 0.0
    for line in exposition.splitlines():
        name, _, rest = line.partition("{") if "{" in line.split(" ", 1)[0] else line.partition(" ")
        if name.strip() != QUEUED_METRIC:
            continue
        value = rest.rsplit("}", 1)[-1].split()
        try:
            total += float(value[0]) if value else 0.0
        except ValueError:
            continue
    return max(0, round(total))


def retry_after(starts: Sequence[datetime | None], now: datetime, starting: bool) -> int:
    """Seconds a caller waits before trying a scaled-to-zero or pending endpoint again: until the
    earliest estimated start of its replicas' GPRs (5 when a server is starting or none is known)."""
    known = [s for s in starts if s is not None]
    if starting or not known:
        return 5
    return max(5, math.ceil((min(known) - now).total_seconds()))


def scope_reaches(scopes: Iterable[str], scope: str, *, owner: str, slice_name: str, name: str, group: str) -> bool:
    """Whether a token of ``owner`` holding ``scopes`` (JupyterHub's expanded scopes) may call the endpoint
    ``slice_name/name`` of a slice whose hub group is ``group`` ("" when unknown) with the custom scope
    ``scope``: unfiltered, ``!user=<owner>``, ``!server=<slice>/<name>`` or ``!group=<group>``. Whether the
    owner may call it at all (a member) is checked apart: a scope never widens who may."""
    for held in scopes:
        base, _, filter_ = held.partition("!")
        if base != scope:
            continue
        kind, _, value = filter_.partition("=")
        if (
            not filter_
            or (kind == "user" and value == owner)
            or (kind == "server" and value == f"{slice_name}/{name}")
            or (kind == "group" and group and value == group)
        ):
            return True
    return False
