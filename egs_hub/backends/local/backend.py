"""The local backend: binding is the set of GPU UUIDs a slice's servers may see.

A server sees GPUs through ``CUDA_VISIBLE_DEVICES``, set when it starts
(SliceLocalSpawner), so binding and unbinding act on servers: when a window
starts, the slice's servers are restarted if its policy says so (otherwise
their owners are told to restart); when it ends, the servers started with
those GPUs are restarted without them before the GPUs count as returned.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable, Mapping
from datetime import datetime
from itertools import groupby
from types import ModuleType
from typing import Protocol

import pynvml

from ...core.checks import CheckTarget, Verdict
from ...core.layouts import describe
from ...core.model import GPR, GPU, Event, Node, Shape, SlicePolicy
from ...core.requests import CheckSpec
from ...core.sharing import unit_node_name
from .. import BindError, Inventory, ServerRef, UnbindError
from . import checks
from .declared import DEFAULT_INVENTORY, declared_inventory, load_inventory_file, with_layouts
from .mig_partition import apply_layout
from .nvml import NVMLUnavailable, Unit, discover_gpus, discover_units, gpu_model

log = logging.getLogger(__name__)


class ServerControl(Protocol):
    async def restart_server(self, user: str, name: str) -> bool:
        """Restart a running server; False when it is not running."""


class LocalBackend:
    kind = "local"
    scales_pools = False  # one host: nothing adds nodes
    check_kinds = checks.KINDS

    def __init__(
        self,
        servers: ServerControl,
        cluster: str = "local",
        host: str | None = None,
        inventory_file: str | None = None,
        nvml: ModuleType = pynvml,
        layouts: Mapping[str, Mapping[str, int] | None] | None = None,
    ):
        self.servers = servers
        self.cluster = cluster
        self.host = host or socket.gethostname().lower()
        self.inventory_file = inventory_file
        self.nvml = nvml
        self.uses_nvml = False
        self.mig_instances: dict[tuple[str, int], str] = {}  # (GPU UUID, GPU instance id) -> MIG UUID
        self.layouts = dict(layouts or {})  # declared nodes' MIG layouts changed through the API

    async def discover(self) -> Inventory:
        try:
            units = discover_units(self.host, self.cluster, self.nvml)
            nvml_note = f"NVML found {len(units)} GPU(s)"
        except NVMLUnavailable as e:
            units, nvml_note = [], f"NVML unavailable ({e})"
        self.mig_instances = {
            (u.gpu.parent, u.gpu_instance): u.gpu.uuid for u in units if u.gpu.parent and u.gpu_instance is not None
        }
        if units:
            self.uses_nvml = True
            if self.inventory_file:
                log.warning("%s; the declared inventory %s is ignored", nvml_note, self.inventory_file)
            return Inventory(*self._nodes_of(units), source="nvml")
        self.uses_nvml = False
        if self.inventory_file:
            data, where = load_inventory_file(self.inventory_file), self.inventory_file
        else:
            data, where = DEFAULT_INVENTORY, "the built-in declared inventory"
        nodes, declared = declared_inventory(with_layouts(data, self.layouts), self.cluster, where)
        return Inventory(nodes, declared, source=f"declared in {where}; {nvml_note}")

    def _nodes_of(self, units: list[Unit]) -> tuple[list[Node], list[GPU]]:
        """One node per kind of unit on this host: per GPU model and memory (almost always exactly
        one), and per MIG profile (named as sharing.unit_node_name says)."""
        key = lambda u: (gpu_model(u.gpu.model), round(u.gpu_memory_mib / 1024), u.gpu.profile or "")  # noqa: E731
        kinds = [(k, list(v)) for k, v in groupby(sorted(units, key=key), key=key)]
        whole_kinds = sum(1 for (_, _, profile), _ in kinds if not profile)
        nodes, placed = [], []
        for (model, memory_gb, profile), members in kinds:
            name = self.host if whole_kinds <= 1 else f"{self.host}-{model.lower()}-{memory_gb}gb"
            if profile:
                name = unit_node_name(self.host, profile)
            gpus = sorted((u.gpu for u in members), key=lambda g: g.index)
            shape = Shape(model, memory_gb, len(gpus), profile or None)
            nodes.append(Node(name=name, cluster=self.cluster, shape=shape, gpus=tuple(g.uuid for g in gpus)))
            placed.extend(dataclasses.replace(g, node=name) for g in gpus)
        return nodes, placed

    async def bind(self, gpr: GPR, policy: SlicePolicy, servers: list[ServerRef], now: datetime) -> list[Event]:
        if self.uses_nvml:
            try:
                present = {g.uuid for g in discover_gpus(self.host, self.cluster, self.nvml)}
            except NVMLUnavailable as e:
                raise BindError(f"cannot check the GPUs: {e}") from None
            missing = [u for u in gpr.bound_gpus if u not in present]
            if missing:
                raise BindError(f"NVML no longer sees GPU(s) {', '.join(missing)}", gpr.bound_nodes)
        if policy.restart_servers:
            events = [await self._restart_to_see(gpr, s, now) for s in servers]
            return [e for e in events if e is not None]
        return [
            self._server_event(gpr, "restart-to-use-gpus", s, "restart this server to see the new GPUs", now)
            for s in servers
        ]

    async def _restart_to_see(self, gpr: GPR, server: ServerRef, now: datetime) -> Event | None:
        """Restart a server so it sees the new GPUs; None if it stopped meanwhile.

        A failed restart is reported, not raised: the GPUs are bound either way.
        """
        try:
            running = await self.servers.restart_server(server.user, server.name)
        except Exception as e:
            reason = f"could not restart it ({e}); restart it to see the new GPUs"
            return self._server_event(gpr, "restart-failed", server, reason, now)
        if not running:
            return None
        return self._server_event(gpr, "server-restarted", server, "restarted to see the slice's new GPUs", now)

    async def unbind(self, gpr: GPR, servers: list[ServerRef], now: datetime) -> list[Event]:
        events = []
        for server in servers:
            try:
                running = await self.servers.restart_server(server.user, server.name)
            except Exception as e:
                where = f"{server.user}'s server {server.name!r}"
                raise UnbindError(f"could not restart {where} without GPR {gpr.id}'s GPUs: {e}") from e
            if running:
                events.append(
                    self._server_event(gpr, "server-restarted", server, "restarted without the released GPUs", now)
                )
        return events

    async def run_check(self, spec: CheckSpec, target: CheckTarget) -> Verdict:
        return await checks.run_check(spec, target)

    async def quarantine(self, node: str, reason: str) -> None:
        """Nothing more to do: only egs-hub hands this host's GPUs out, and it plans nothing on the node."""

    async def clear(self, node: str) -> None:
        """Nothing to undo (quarantine)."""

    async def change_layout(
        self, node: str, mig: Mapping[str, int] | None, mig_config: str | None
    ) -> tuple[str | None, str]:
        """A declared node is in ``mig`` from the next discovery on. The GPUs NVML found are re-partitioned
        through NVML before this returns (mig_partition.py, in a worker thread: NVML calls block), so the
        next discovery finds their new instances; LayoutChangeError where NVML refuses or a step fails."""
        if self.uses_nvml:
            done = await asyncio.to_thread(apply_layout, self.nvml, mig, self._on_machine(node))
            return None, f"the GPUs of node {node} were re-partitioned into {describe(mig)} through NVML: {done}"
        self.layouts[node] = dict(mig) if mig else None
        return None, f"the declared node {node} is split into {describe(mig)} from now on"

    async def layout_state(self, node: str, mig_config: str | None) -> tuple[str, str]:
        """A change is made at once (``change_layout`` returns once it is done)."""
        if self.uses_nvml:
            return "done", f"the GPUs of node {node} are in their new layout (NVML)"
        return "done", f"the declared node {node} is in its new layout"

    def _on_machine(self, node: str) -> Callable[[str, int], bool]:
        """Whether a GPU of this host (by model and memory) is one of machine ``node``'s: every GPU for the
        host itself, those of one kind for ``<host>-<model>-<memory>gb`` (``_nodes_of``)."""
        if node == self.host:
            return lambda model, memory_gb: True
        return lambda model, memory_gb: node == f"{self.host}-{model.lower()}-{memory_gb}gb"

    def _server_event(self, gpr: GPR, kind: str, server: ServerRef, reason: str, now: datetime) -> Event:
        return Event(
            kind=kind,
            actor="local-backend",
            reason=reason,
            time=now,
            gpr_id=gpr.id,
            slice=gpr.spec.slice,
            data={"user": server.user, "server": server.name},
        )
