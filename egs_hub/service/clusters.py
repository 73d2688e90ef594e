"""The clusters the service drives, one backend each: the local host and Kubernetes clusters.

Vocabulary (DESIGN.md): a cluster's *origin* is where it was configured: ``local``
(this host, the embedded default), ``config`` (``EGSService.clusters``) or ``api``
(POST /clusters, kept in the store). Its *health* is ``ok`` while its backend
answers and ``unavailable``, with the backend's message, while it does not. An
unavailable cluster's nodes are marked not present in the store, so the planner
places nothing on them; they come back when the cluster answers again.

Each cluster is discovered on its own (a refresh): on start, when its backend
says its inventory changed (``on_change``), and every ``retry_interval`` seconds.
A refresh writes the store only when the inventory or the health changed, then
wakes the reconcile loop; a cluster that answers for the first time, or again
after an outage, is announced (``on_available``: its slices are set up there
again, slice_setup.py). One cluster failing never holds up another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import yaml
from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend, Inventory
from ..backends.kubernetes import ClusterUnavailable, KubernetesBackend
from ..backends.kubernetes.roles import DEFAULT_ROLE_TEMPLATES, NamespaceGrant, RoleTemplate
from ..core.errors import Conflict, InvalidRequest, PolicyViolation
from ..core.requests import ClusterCreate
from ..store import queries
from ..store.db import transaction

log = logging.getLogger(__name__)


@dataclass
class ClusterState:
    """A cluster in the registry: its backend, how it is reached (``where``), and what its last
    refresh found (``inventory``: None while unavailable; ``error``: None while ok). ``close``
    ends the connections of a backend the registry made; ``spec`` is how a Kubernetes cluster
    was registered (None for the local host)."""

    name: str
    backend: Backend
    origin: str
    where: str
    close: Callable[[], Awaitable[None]] | None = None
    spec: ClusterCreate | None = None
    inventory: Inventory | None = None
    error: str | None = None
    refreshed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def health(self) -> str:
        return "ok" if self.error is None else "unavailable"

    @property
    def source(self) -> str:
        return self.inventory.source if self.inventory is not None else ""


def check_in_cluster(spec: ClusterCreate) -> None:
    """An in-cluster spec only where the service runs in a pod: Kubernetes gives every pod the API
    server's address in KUBERNETES_SERVICE_HOST and _PORT; InvalidRequest naming in_cluster otherwise."""
    if spec.in_cluster and not (
        os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT")
    ):
        raise InvalidRequest(
            "in_cluster",
            "in_cluster: the service does not run in a Kubernetes pod here (KUBERNETES_SERVICE_HOST and "
            "KUBERNETES_SERVICE_PORT are not set); give the kubeconfig of the cluster instead",
        )


def check_kubeconfig(spec: ClusterCreate) -> None:
    """The spec's kubeconfig file exists on this host, is a kubeconfig, and has the context (or a
    current context when none is named); InvalidRequest naming the field otherwise."""
    path = spec.kubeconfig
    if path is None:
        return
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise InvalidRequest("kubeconfig", f"kubeconfig {path} does not exist on the service's host") from None
    except IsADirectoryError:
        raise InvalidRequest("kubeconfig", f"kubeconfig {path} is a directory, not a kubeconfig file") from None
    except OSError as e:
        raise InvalidRequest("kubeconfig", f"cannot read kubeconfig {path}: {e.strerror}") from None
    except yaml.YAMLError:
        raise InvalidRequest("kubeconfig", f"kubeconfig {path} is not YAML") from None
    contexts = data.get("contexts") if isinstance(data, dict) else None
    if not isinstance(contexts, list) or not contexts:
        raise InvalidRequest("kubeconfig", f"{path} is not a kubeconfig: it lists no contexts")
    names = [c.get("name") for c in contexts if isinstance(c, dict)]
    listed = ", ".join(str(n) for n in names)
    wanted = spec.context or data.get("current-context")
    if not wanted:
        raise InvalidRequest("context", f"{path} has no current-context: name one of its contexts ({listed})")
    if wanted not in names:
        raise InvalidRequest("context", f"context {wanted!r} is not in {path}; it has: {listed}")


class Clusters:
    """Every cluster's backend (``backends``: the reconcile loop's map, kept current) and state."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Callable[[], datetime],
        *,
        retry_interval: float = 30.0,
        request_timeout: float = 10.0,
        role_templates: Mapping[str, RoleTemplate] = DEFAULT_ROLE_TEMPLATES,
        namespace_grants: Sequence[NamespaceGrant] = (),
        on_inventory: Callable[[], None] | None = None,
        on_available: Callable[[str], None] | None = None,
    ):
        self.sessions = sessions
        self.role_templates = role_templates
        self.namespace_grants = tuple(namespace_grants)
        self.on_available = on_available
        self.clock = clock
        self.retry_interval = retry_interval
        self.request_timeout = request_timeout
        self.on_inventory = on_inventory
        self.states: dict[str, ClusterState] = {}
        self.backends: dict[str, Backend] = {}
        self._wake = asyncio.Event()
        self._runner: asyncio.Task | None = None

    def wake(self) -> None:
        self._wake.set()

    def make_backend(self, spec: ClusterCreate) -> KubernetesBackend:
        return KubernetesBackend(
            spec.name,
            kubeconfig=spec.kubeconfig,
            context=spec.context,
            in_cluster=spec.in_cluster,
            node_selector=spec.node_selector,
            exit_grace=spec.exit_grace,
            request_timeout=self.request_timeout,
            on_change=self.wake,
            role_templates=self.role_templates,
            # The grants name ClusterRoles of the cluster the service runs in (the Helm chart's).
            namespace_grants=self.namespace_grants if spec.in_cluster else (),
        )

    # Adding and removing

    def _kubernetes_state(self, spec: ClusterCreate, origin: str) -> ClusterState:
        backend = self.make_backend(spec)
        return ClusterState(spec.name, backend, origin, backend.where, backend.close, spec)

    def _enter(self, state: ClusterState) -> ClusterState:
        if state.name in self.states:
            raise Conflict(f"cluster {state.name!r} exists already ({self.states[state.name].origin})")
        self.states[state.name] = state
        self.backends[state.name] = state.backend
        return state

    async def add_local(self, backend: Backend, where: str) -> ClusterState:
        state = self._enter(ClusterState(backend.cluster, backend, "local", where))
        await self.refresh(state)
        return state

    async def add_kubernetes(self, specs: list[tuple[ClusterCreate, str]]) -> None:
        """Connect to these (spec, origin) at once, each on its own: a slow or broken one holds up none."""
        states = [self._enter(self._kubernetes_state(spec, origin)) for spec, origin in specs]
        await asyncio.gather(*(self.refresh(s) for s in states))

    async def register(self, spec: ClusterCreate) -> ClusterState:
        """POST /clusters: check the spec, keep it in the store, connect. An unreachable cluster is
        registered all the same and shown unavailable; Conflict when the name is taken."""
        if spec.name in self.states:
            raise Conflict(f"cluster {spec.name!r} exists already ({self.states[spec.name].origin}); remove it first")
        check_in_cluster(spec)
        check_kubeconfig(spec)
        with self.sessions() as session:
            queries.project_row_of(session, spec.project)  # PolicyViolation naming it when there is none
        state = self._enter(self._kubernetes_state(spec, "api"))
        with transaction(self.sessions) as session:
            queries.register_cluster(session, spec, state.backend.kind, self.clock())
        await self.refresh(state)
        return state

    async def unregister(self, name: str) -> None:
        """DELETE /clusters/{name}: refused (Conflict) for the local host and config clusters, and
        while a GPR holds GPUs there or waits for that cluster only; then its backend is closed,
        its nodes are marked gone and the store forgets how to reach it."""
        state = self.states[name]
        if state.origin != "api":
            where = "it is this host" if state.origin == "local" else "it comes from EGSService.clusters in the config"
            raise Conflict(f"cluster {name!r} cannot be removed through the API: {where}")
        async with state.lock:
            with self.sessions() as session:
                busy = queries.gprs_on_cluster(session, name)
            if busy:
                listed = ", ".join(str(i) for i in busy)
                raise Conflict(
                    f"cluster {name!r} is in use by GPR(s) {listed} (holding its GPUs or waiting for it only); "
                    "release or cancel them first"
                )
            del self.states[name]
            del self.backends[name]
            with transaction(self.sessions) as session:
                queries.unregister_cluster(session, name, self.clock())
                self._sync_locked(session, state, None)
        if state.close is not None:
            await state.close()
        self._inventory_changed()

    async def restore(self, config: list[ClusterCreate]) -> None:
        """Connect to the clusters of the config and those registered through the API earlier
        (a name in both is the config's)."""
        configured = {spec.name for spec in config}
        for spec in config:  # a config cluster's project is the config's
            try:
                with transaction(self.sessions) as session:
                    queries.set_cluster_project(session, spec.name, "kubernetes", spec.project, self.clock())
            except PolicyViolation as e:
                log.error(
                    "cluster %s: EGSService.clusters names project %r: %s; it stays in its project until one is made",
                    spec.name,
                    spec.project,
                    e,
                )
        with self.sessions() as session:
            stored = [queries.cluster_spec(r) for r in queries.registered_clusters(session)]
        for spec in stored:
            if spec.name in configured:
                log.warning("cluster %s: registered through the API and in the config; using the config", spec.name)
        await self.add_kubernetes(
            [(spec, "config") for spec in config] + [(spec, "api") for spec in stored if spec.name not in configured]
        )

    # Refreshing

    async def refresh(self, state: ClusterState) -> None:
        """Discover the cluster; write the store when its inventory or health changed."""
        async with state.lock:
            if self.states.get(state.name) is not state:
                return  # removed meanwhile
            try:
                found, error = await state.backend.discover(), None
            except ClusterUnavailable as e:
                found, error = None, str(e)
            if state.refreshed and found == state.inventory and error == state.error:
                return
            if error != state.error or not state.refreshed:
                if error is None:
                    log.info("cluster %s: %s", state.name, found.source)
                else:
                    log.warning("cluster %s is unavailable: %s", state.name, error)
            with transaction(self.sessions) as session:
                self._sync_locked(session, state, found)
            available = error is None and (state.error is not None or not state.refreshed)
            state.inventory, state.error, state.refreshed = found, error, True
        if available and self.on_available is not None:
            self.on_available(state.name)
        self._inventory_changed()

    async def refresh_cluster(self, name: str) -> None:
        """Discover the cluster ``name`` now (``refresh``), when it is still there."""
        state = self.states.get(name)
        if state is not None:
            await self.refresh(state)

    def _sync_locked(self, session: Session, state: ClusterState, found: Inventory | None) -> None:
        """Store what was found; None (unavailable, removed): every node of the cluster is gone."""
        nodes, gpus = (found.nodes, found.gpus) if found is not None else ([], [])
        for event in queries.sync_inventory(session, state.name, state.backend.kind, nodes, gpus, self.clock()):
            queries.add_event(session, event)

    def _inventory_changed(self) -> None:
        if self.on_inventory is not None:
            self.on_inventory()

    def start(self) -> None:
        self._runner = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.retry_interval)
            self._wake.clear()
            states = list(self.states.values())
            results = await asyncio.gather(*(self.refresh(s) for s in states), return_exceptions=True)
            for state, result in zip(states, results, strict=True):
                if isinstance(result, Exception):
                    log.error("cluster %s: refresh failed", state.name, exc_info=result)

    async def close(self) -> None:
        """Stop refreshing and close every backend's connections."""
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        for state in self.states.values():
            if state.close is not None:
                await state.close()
