"""What the planner reads, kept in the service's memory and current with the store.

Vocabulary: the *state* is the planner's input without the promises: the
inventory (nodes present, GPUs it may not give), every slice's policy and hub group, every
GPR that waits (queued: a *request*; pending approval) or holds GPUs (a
*booking*), and each slice's decayed GPU use (fair share). A *change* is what a
commit wrote that the state reads: a GPR row or its allocations (by GPR id), an
inventory row, a slice row.

It is loaded once (``load``), when the service starts. After that the store
tells it what changed: the service's sessions report, through SQLAlchemy's
``after_flush`` and ``after_commit`` events, which rows a commit wrote, and the
next ``snapshot`` re-reads only those rows, by primary key. So a snapshot costs
what changed since the last one, not what the store holds. (Every writer of the
service goes through those sessions; a second service on the same database is
not seen.) The fair-share use decays with time and grows with every held GPU:
``refresh_usage`` recomputes it, once a reconcile pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sortedcontainers import SortedDict
from sqlalchemy import event, select
from sqlalchemy.orm import Session, selectinload, sessionmaker

from ..core import fairshare, planner, sharing
from ..core import model as core
from ..core.node_pools import NodePool, PoolState, all_joining
from ..core.snapshot import Booking, Estimate, Maintenance, Request, Snapshot
from ..store import queries
from ..store.models import (
    GPU,
    Allocation,
    Cluster,
    GPRRow,
    MaintenanceWindow,
    Node,
    NodePoolRow,
    Price,
    Project,
    Slice,
    SliceNamespace,
)

_CHANGES = "egs_changes"  # Session.info key: what this transaction's flushes wrote
_CHUNK = 500  # GPR ids per re-read (SQLite's bound-parameter limit)
_SERVABILITIES = 4096  # kinds of request whose servability is kept for the inventory
WAITING = (core.Status.QUEUED.value, core.Status.PENDING_APPROVAL.value)
ACTIVE = (*WAITING, *(s.value for s in core.HOLDING_STATUSES))


@dataclass(frozen=True)
class Servability:
    """What the inventory can do for a kind of request: why it can never be served (None: it
    can), the request field at fault, how many units (GPUs or MIG instances) it would hold, and
    what they count as in quotas (GPU-equivalents, core/sharing.py)."""

    reason: str | None
    field: str
    gpus: int
    equivalents: float


@dataclass
class Changes:
    """What commits wrote that the state has not read yet."""

    gprs: set[int] = field(default_factory=set)
    inventory: bool = False
    slices: bool = False

    def merge(self, other: Changes) -> None:
        self.gprs |= other.gprs
        self.inventory = self.inventory or other.inventory
        self.slices = self.slices or other.slices


def changes_of(objects: Iterable[object], into: Changes) -> None:
    """Record which of the state's rows ``objects`` (a flush's new, dirty and deleted) are."""
    for obj in objects:
        if isinstance(obj, GPRRow):
            into.gprs.add(obj.id)
        elif isinstance(obj, Allocation):
            into.gprs.add(obj.gpr_id)
        elif isinstance(obj, Node | GPU | Cluster | Price | MaintenanceWindow | NodePoolRow):
            into.inventory = True
        elif isinstance(obj, Slice | SliceNamespace | Project):
            into.slices = True


def writes_state(objects: Iterable[object]) -> bool:
    """Whether a flush of ``objects`` writes any of the state's rows (not events, samples, promises...)."""
    changes = Changes()
    changes_of(objects, changes)
    return bool(changes.gprs or changes.inventory or changes.slices)


class PlanningState:
    def __init__(self, half_life: timedelta = fairshare.HALF_LIFE, order: core.Order = core.FAIR_SHARE_FIRST):
        self.half_life = half_life
        self.order = order  # how each band's queue is ordered (core/queue.py)
        self.nodes: tuple[core.Node, ...] = ()
        self.unhealthy: frozenset[str] = frozenset()
        self.prices: dict[tuple[str, str], float] = {}  # (cluster, shape) -> price per GPU-hour (core/cost.py)
        self.cluster_projects: dict[str, str] = {}  # cluster -> its project, where not the default one
        self.maintenance: tuple[Maintenance, ...] = ()  # nodes' maintenance windows (ended ones drop off at a read)
        self.pools: tuple[tuple[NodePool, PoolState], ...] = ()  # dynamic node pools (core/node_pools.py)
        self.servable_nodes: tuple[core.Node, ...] = ()
        self.fractions: dict[str, float] = {}  # GPU-equivalents of each unit that is not a whole GPU
        self.policies: dict[str, core.SlicePolicy] = {}
        self.groups: dict[str, str] = {}  # every slice's hub group (who may see its GPRs)
        self.projects: dict[str, str] = {}  # every slice's project
        self.project_policies: dict[str, core.Project] = {}  # every project, by name (its admin group, quota)
        self.usage: dict[str, float] = {}
        self.gprs: dict[int, core.GPR] = {}  # the active GPRs: waiting or holding GPUs
        self._queue: SortedDict = SortedDict()  # GPR id -> Request
        self._pending: SortedDict = SortedDict()
        self._bookings: SortedDict = SortedDict()  # GPR id -> Booking
        self._servability: dict[tuple, Servability] = {}
        self._unread = Changes(inventory=True, slices=True)
        self.watching = False
        self.loaded = False
        self.version = 0  # counts the reads that changed the GPRs held

    # Following the store

    def watch(self, sessions: sessionmaker[Session]) -> None:
        """Learn from every commit of ``sessions`` which of the state's rows it wrote."""
        event.listen(sessions, "after_flush", self._flushed)
        event.listen(sessions, "after_commit", self._committed)
        event.listen(sessions, "after_rollback", self._rolled_back)
        self.watching = True

    @staticmethod
    def _flushed(session: Session, _context) -> None:
        changes = session.info.setdefault(_CHANGES, Changes())
        changes_of((*session.new, *session.dirty, *session.deleted), changes)

    def _committed(self, session: Session) -> None:
        changes = session.info.pop(_CHANGES, None)
        if changes is not None:
            self._unread.merge(changes)

    @staticmethod
    def _rolled_back(session: Session) -> None:
        session.info.pop(_CHANGES, None)

    def load(self, session: Session, now: datetime) -> None:
        """Read everything the state holds (at start)."""
        self.gprs.clear()
        self._queue.clear()
        self._pending.clear()
        self._bookings.clear()
        for row in queries.gpr_rows(session, statuses=ACTIVE):
            self._put(queries.to_gpr(row))
        self._unread = Changes(inventory=True, slices=True)
        self._read(session, now)
        self.refresh_usage(session, now)
        self.loaded = True

    def refresh_usage(self, session: Session, now: datetime) -> None:
        uses = queries.gpu_uses(session, now - queries.USAGE_HALF_LIVES * self.half_life, now)
        self.usage = fairshare.decayed_usage(uses, now, self.half_life)

    def _read(self, session: Session, now: datetime) -> None:
        """Re-read what commits changed since the last read."""
        unread, self._unread = self._unread, Changes()
        try:
            if unread.inventory:
                self.nodes, self.unhealthy = queries.planning_inventory(session)
                self.prices = queries.prices(session)
                self.cluster_projects = queries.cluster_projects(session)
                self.maintenance = queries.maintenance_ahead(session, now)
                self.pools = queries.pools(session)
                # what may ever serve a request: the nodes and every pool's room to grow
                self.servable_nodes = self.nodes + all_joining(self.pools, self.nodes, now)
                self.fractions = sharing.fractions(self.nodes)
                self._servability.clear()
            if unread.slices:
                rows = queries.all_slices(session)
                self.policies = {s.name: queries.slice_policy(s) for s in rows}
                self.groups = {s.name: s.group_name for s in rows}
                self.projects = {s.name: s.project.name for s in rows}
                self.project_policies = {p.name: queries.to_project(p) for p in queries.all_projects(session)}
            ids = sorted(unread.gprs)
            for i in range(0, len(ids), _CHUNK):
                chunk = ids[i : i + _CHUNK]
                query = select(GPRRow).where(GPRRow.id.in_(chunk)).options(selectinload(GPRRow.allocations))
                found = {row.id: row for row in session.scalars(query)}
                for gpr_id in chunk:
                    self._drop(gpr_id)
                    row = found.get(gpr_id)
                    if row is not None and row.status in ACTIVE:
                        self._put(queries.to_gpr(row))
        except BaseException:
            self._unread.merge(unread)  # read again next time
            raise

    def _drop(self, gpr_id: int) -> None:
        self.version += 1
        self.gprs.pop(gpr_id, None)
        self._queue.pop(gpr_id, None)
        self._pending.pop(gpr_id, None)
        self._bookings.pop(gpr_id, None)

    def _put(self, gpr: core.GPR) -> None:
        self.version += 1
        self.gprs[gpr.id] = gpr
        if gpr.status.holds_gpus:
            self._bookings[gpr.id] = Booking.of(gpr)
        elif gpr.status is core.Status.QUEUED:
            self._queue[gpr.id] = Request(gpr.id, gpr.spec, gpr.created_at, frozenset(gpr.avoid_nodes))
        else:
            self._pending[gpr.id] = Request(gpr.id, gpr.spec, gpr.created_at)

    # Reading

    def current(self, session: Session, now: datetime) -> PlanningState:
        """The state with every committed change read (``session`` reads what changed). Until
        it watches a store's sessions, every call reads everything again."""
        if not (self.loaded and self.watching):
            self.load(session, now)
        elif self._unread.gprs or self._unread.inventory or self._unread.slices:
            self._read(session, now)
        return self

    def snapshot(self, session: Session, now: datetime, previous: Mapping[int, Estimate] | None = None) -> Snapshot:
        """The planner's input at ``now``, with ``previous`` (the promises)."""
        self.current(session, now)
        return Snapshot(
            nodes=self.nodes + all_joining(self.pools, self.nodes, now),
            bookings=tuple(self._bookings.values()),
            queue=tuple(self._queue.values()),
            pending=tuple(self._pending.values()),
            policies=dict(self.policies),
            unhealthy_gpus=self.unhealthy,
            usage=dict(self.usage),
            previous=dict(previous or {}),
            projects=dict(self.projects),
            project_policies=dict(self.project_policies),
            cluster_projects=dict(self.cluster_projects),
            maintenance=self.maintenance,
            order=self.order,
        )

    def queued(self) -> list[core.GPR]:
        """The queued GPRs, by id."""
        return [self.gprs[gpr_id] for gpr_id in self._queue]

    def is_queued(self, gpr_id: int) -> bool:
        return gpr_id in self._queue

    def held_gpus(self, slices: Iterable[str]) -> float:
        """The GPU-equivalents the GPRs of ``slices`` hold now."""
        wanted, fractions = set(slices), self.fractions
        return sum(fractions.get(g, 1.0) for b in self._bookings.values() if b.slice in wanted for g in b.gpus)

    def may_evict_for(self, spec: core.GPRSpec) -> bool:
        """Whether a GPR of ``spec`` could have GPUs evicted for it: its slice's policy allows it and
        a preemptible GPR of lower priority holds GPUs."""
        if self.policies.get(spec.slice, core.SlicePolicy()).eviction == "off":
            return False
        return any(b.preemptible and b.priority < spec.priority for b in self._bookings.values())

    def servability(self, spec: core.GPRSpec) -> Servability:
        """Whether the inventory can ever serve ``spec`` and how many GPUs it would hold: worked out
        once per kind of request (cluster, shape and size) and inventory, as the planner does."""
        owners, project = self.cluster_projects, self.projects.get(spec.slice, core.DEFAULT_PROJECT)
        key = (spec.cluster, spec.shape, spec.gpus, spec.nodes, spec.gpu_share, project if owners else None)
        found = self._servability.get(key)
        if found is None:
            if len(self._servability) >= _SERVABILITIES:
                self._servability.clear()
            field = "nodes" if spec.nodes is not None else "gpus"
            nodes = self.servable_nodes
            if not planner.eligible_nodes(nodes, spec, owners, project):
                field = "shape" if spec.shape else "cluster" if spec.cluster else field
                field = "gpu_share" if spec.gpu_share is not None and not spec.shape else field
            reason = planner.unservable_reason(spec, nodes, self.unhealthy, owners, project)
            count = planner.gpu_count(spec, nodes, owners, project)
            unit = planner.unit_equivalents(spec, nodes, owners, project)
            found = self._servability[key] = Servability(reason, field, count, count * unit)
        return found
