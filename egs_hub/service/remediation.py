"""Failing GPUs in provisioned GPRs (core/remediation.py decides): after each telemetry pass, a GPU
bound to a provisioned GPR that failed gets its node quarantined and, by the slice's ``remediation``
policy, the GPR's holders told (``gpu-failed``), and its GPUs on that node replaced by as many on a
healthy node (``node-replaced``) once one is free for the rest of the window.

A replacement runs the cluster's entry checks on the new node first (a node failing them is not
tried again for that GPR), swaps the GPUs in one transaction (the GPR keeps its window), binds the
new node (backend.bind with the GPR as it is now) and takes the failed node back (backend.unbind with
only its GPUs); an unbind that does not finish is tried again after the next pass. While no healthy
node is free, the holders are told once (``replacement-waiting``) and each pass tries again until the
window ends. What happened is in the GPR's events, and so in the portal and the sidebar.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend, UnbindError
from ..core import checks, planner, remediation
from ..core.model import GPR, Event, Status
from ..core.units import format_time
from ..store import queries
from ..store.db import transaction
from . import kube_events as notices
from .checks import Checklists
from .kube_events import KubeEvents
from .planning import Planning
from .reconcile import server_refs
from .telemetry import Telemetry

log = logging.getLogger(__name__)
ACTOR = remediation.ACTOR


class Remediation:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        planning: Planning,
        telemetry: Telemetry,
        checklists: Checklists,
        backends: Mapping[str, Backend],
        clock: Callable[[], datetime],
        *,
        kube_events: KubeEvents | None = None,
        on_change: Callable[[], None] = lambda: None,
    ):
        self.sessions = sessions
        self.planning = planning
        self.telemetry = telemetry
        self.checklists = checklists
        self.backends = backends
        self.clock = clock
        self.kube_events = kube_events
        self.on_change = on_change
        self._avoid: dict[int, set[str]] = {}  # GPR -> nodes that failed their entry checks as its replacement
        self._exits: dict[tuple[int, str, str], GPR] = {}  # failed nodes not yet taken back: the GPR with their GPUs
        # (GPR, cluster, node) failures acted on for good this run (told, or moved): not read again each pass
        self._settled: set[tuple[int, str, str]] = set()
        self._lock = asyncio.Lock()

    async def check(self) -> None:
        """Act on the GPUs of provisioned GPRs that failed, as the last telemetry pass saw them."""
        async with self._lock:
            for key, gone in list(self._exits.items()):
                try:
                    if await self._take_back(key[1], gone):
                        del self._exits[key]
                except Exception:
                    log.exception("GPR %s: the failed node %s could not be taken back", key[0], key[2])
            samples, alerts = self.telemetry.health()
            if not any(remediation.failure(samples.get(u), kinds) for u, kinds in alerts.items()):
                return  # nothing fails: no need to read the store
            with self.sessions() as session:
                holders = queries.gpu_holders(session)
                identities = queries.gpu_identities(session, holders)
            matched = checks.match_samples(list(identities.values()), samples.values())
            failed = remediation.failed_gpus(sorted(holders), matched, alerts)
            found: dict[tuple[int, str, str], list[str]] = {}
            for uuid, why in failed.items():
                gpu = identities.get(uuid)
                if gpu is not None:
                    found.setdefault((holders[uuid][1], gpu.cluster, gpu.node), []).append(f"GPU {uuid}: {why}")
            self._settled &= found.keys()  # a failure that is over (GPR ended, GPU back) is forgotten
            for key, reasons in sorted(found.items()):
                if key in self._settled:
                    continue
                gpr_id, cluster, node = key
                try:
                    if await self._handle(gpr_id, cluster, node, "; ".join(reasons)):
                        self._settled.add(key)
                except Exception:
                    log.exception("GPR %s: the failed node %s (%s) could not be handled", gpr_id, node, cluster)

    async def _handle(self, gpr_id: int, cluster: str, node: str, why: str) -> bool:
        """Act on a failed node of a GPR; whether that is done (nothing is left to try at the next pass)."""
        now = self.clock()
        with self.sessions() as session:
            row = queries.get_gpr_row(session, gpr_id)
            if row is None or row.status != Status.PROVISIONED:
                return True
            gpr = queries.to_gpr(row)
            policy = queries.slice_policy(queries.get_slice(session, gpr.spec.slice))
            node_row = queries.find_node(session, cluster, node)
            quarantined = node_row is None or node_row.quarantined_at is not None
            told = queries.has_gpr_event(session, gpr_id, "gpu-failed", cluster=cluster, node=node)
        if not quarantined:
            await self.checklists.quarantine(cluster, node, f"a GPU failed in GPR {gpr_id}: {why}", ACTOR, gpr)
        if policy.remediation == "off":
            return True
        if not told:
            then = (
                "its GPUs there are being replaced by a healthy node's"
                if policy.remediation == "replace"
                else "save your work: the GPR keeps the node until it is released"
            )
            self._tell(gpr, cluster, node, "gpu-failed", f"node {node} failed ({why}); {then}", now)
        if policy.remediation != "replace" or await self._move(gpr, policy, cluster, node, why):
            return True
        with self.sessions() as session:
            waiting = queries.has_gpr_event(session, gpr.id, "replacement-waiting", cluster=cluster, node=node)
        if not waiting:
            self._tell(
                gpr,
                cluster,
                node,
                "replacement-waiting",
                f"no healthy node like {node} is free until the window ends ({format_time(gpr.window_end)}); "
                "it is replaced as soon as one is",
                now,
            )
        return False

    def _tell(self, gpr: GPR, cluster: str, node: str, kind: str, reason: str, now: datetime) -> None:
        with transaction(self.sessions) as session:
            queries.add_event(
                session,
                Event(
                    kind=kind,
                    actor=ACTOR,
                    reason=reason,
                    time=now,
                    gpr_id=gpr.id,
                    slice=gpr.spec.slice,
                    data={"cluster": cluster, "node": node},
                ),
            )
        if self.kube_events is not None:
            self.kube_events.about_gpr(cluster, gpr, notices.Notice("Warning", "GPUFailed", reason))

    async def move(self, gpr: GPR, policy, cluster: str, node: str, why: str) -> bool:
        """Move the GPR's GPUs on ``node`` to a healthy node free for the rest of its window (maintenance.py
        asks when the node's maintenance starts); False when none is free now."""
        async with self._lock:
            return await self._move(gpr, policy, cluster, node, why)

    async def _move(self, gpr: GPR, policy, cluster: str, node: str, why: str) -> bool:
        now = self.clock()
        with self.sessions() as session:
            places = queries.gpu_identities(session, gpr.bound_gpus)
        old = [g for g in gpr.bound_gpus if g in places and (places[g].cluster, places[g].node) == (cluster, node)]
        snapshot, plan, _ = await self.planning.current(self.sessions, now)
        placement = planner.replacement(plan, snapshot, gpr, (cluster, node), len(old), now)
        if placement is None or placement.nodes[0] in self._avoid.get(gpr.id, ()):
            return False
        (new_node,) = placement.nodes
        failed = await self.checklists.run(cluster, {new_node: placement.gpus}, checks.ENTRY, gpr)
        if failed:
            self._avoid.setdefault(gpr.id, set()).add(new_node)
            return False
        swapped = self._swap(gpr.id, old, placement.gpus, node, new_node, why)
        backend = self.backends.get(cluster)
        if swapped is None or backend is None:
            return False
        with self.sessions() as session:
            servers = server_refs(queries.slice_servers(session, gpr.spec.slice))
        events = await backend.bind(swapped, policy, servers, self.clock())
        self._record(events)
        gone = dataclasses.replace(gpr, bound_gpus=tuple(old), bound_nodes=(node,))
        if not await self._take_back(cluster, gone):
            self._exits[(gpr.id, cluster, node)] = gone
        self._avoid.pop(gpr.id, None)
        self.on_change()
        return True

    def _swap(self, gpr_id: int, old, new, node: str, new_node: str, why: str) -> GPR | None:
        """Swap the GPUs in the store, unless the GPR or the GPUs moved on meanwhile (None)."""
        with transaction(self.sessions) as session:
            row = queries.get_gpr_row(session, gpr_id, lock=True)
            if row is None or row.status != Status.PROVISIONED:
                return None
            before = queries.to_gpr(row)
            holders = queries.gpu_holders(session)
            if not set(old) <= set(before.bound_gpus) or any(g in holders for g in new):
                return None
            change = remediation.replaced(before, old, new, node, new_node, why, self.clock())
            swapped = queries.apply(session, row, change)
            queries.swap_bindings(session, swapped, old)
        return swapped

    async def _take_back(self, cluster: str, gone: GPR) -> bool:
        """Exit the failed node (the GPR with only its GPUs); False while that does not finish."""
        backend = self.backends.get(cluster)
        if backend is None:
            return True
        with self.sessions() as session:
            holders = server_refs(queries.servers_holding(session, gone.bound_gpus))
        try:
            events = await backend.unbind(gone, holders, self.clock())
        except UnbindError as e:
            log.warning("GPR %s: node %s not taken back yet: %s", gone.id, gone.bound_nodes[0], e)
            self._record(e.events)
            return False
        self._record(events)
        return True

    def _record(self, events) -> None:
        if events:
            with transaction(self.sessions) as session:
                for event in events:
                    queries.add_event(session, event)
