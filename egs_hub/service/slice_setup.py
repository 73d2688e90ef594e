"""Slices set up on the clusters their namespaces name: the store's slices made real on each cluster.

Vocabulary: a *slice host* is a backend that can set a slice up (today the
Kubernetes backend; the local host is not one, and namespaces named for it are
only data, e.g. to match DCGM pods to workloads). A slice's *setup* on a cluster
is its namespaces there (the first is its home) and the GPUs it holds there
(bound now, from the store): ``ensure_slice`` makes it so, ``set_slice_gpus``
follows the GPUs, ``remove_slice`` takes it away. ``applied`` remembers the last
setup that succeeded per (slice, cluster).

Two ways in:

- ``change`` for the API: a slice's namespaces go from ``before`` to ``after``
  while the handler waits, holding ``lock(slice)`` until it has written the
  store, so the loop never acts on a store that lags the clusters. Every
  cluster is checked first (conflicts, reachable), then acted on; a failure part
  way undoes what was done (best effort, logged) and raises, so the handler
  writes nothing: SliceConflict names the namespace, ClusterUnavailable the
  cluster.
- ``sync`` for the loop: on start, every ``retry_interval``, when a cluster
  becomes available again (``forget``) and when the GPUs a slice holds change
  (``wake``; the reconcile loop calls ``sync_slice`` itself around a bind or
  unbind), every setup that differs from ``applied`` is ensured again.
  Failures are logged and tried again on the next pass.

A slice that leaves a cluster not registered at the time (it was removed with
``DELETE /clusters``, or dropped from config) cannot be removed there then: the
handler records a *leftover* (slice, cluster) in the store, and the loop removes
the slice's setup there once the cluster is registered again (unless the slice
has namespaces there again by then: ``ensure_slice`` releases the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend
from ..backends.kubernetes import ClusterUnavailable, SliceConflict
from ..backends.kubernetes.kubeconfig import SliceKubeconfig
from ..backends.kubernetes.volumes import HomeVolume
from ..store import queries
from ..store.db import transaction

log = logging.getLogger(__name__)

Namespaces = Mapping[str, Sequence[str]]  # cluster -> namespaces, home first


@runtime_checkable
class SliceHost(Protocol):
    cluster: str

    async def check_slice(self, slice_name: str, namespaces: Sequence[str]) -> object: ...

    async def ensure_slice(self, slice_name: str, namespaces: Sequence[str], gpus: Sequence[str]) -> object: ...

    async def set_slice_gpus(self, slice_name: str, namespaces: Sequence[str], gpus: Sequence[str]) -> None: ...

    async def remove_slice(self, slice_name: str) -> object: ...

    async def slice_kubeconfig(
        self, slice_name: str, namespaces: Sequence[str], expiration: int
    ) -> SliceKubeconfig: ...

    async def home_volumes(self, slice_name: str, namespaces: Sequence[str]) -> Sequence[HomeVolume]: ...


@dataclass(frozen=True)
class Setup:
    namespaces: tuple[str, ...]
    gpus: tuple[str, ...]  # the GPUs (and units) the slice holds there


class SliceSetup:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backends: Mapping[str, Backend],
        *,
        retry_interval: float = 30.0,
    ):
        self.sessions = sessions
        self.backends = backends
        self.retry_interval = retry_interval
        self.applied: dict[tuple[str, str], Setup] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._wake = asyncio.Event()
        self._runner: asyncio.Task | None = None

    def host(self, cluster: str) -> SliceHost | None:
        backend = self.backends.get(cluster)
        return backend if isinstance(backend, SliceHost) else None

    def is_host(self, cluster: str) -> bool:
        return self.host(cluster) is not None

    def lock(self, slice_name: str) -> asyncio.Lock:
        return self._locks.setdefault(slice_name, asyncio.Lock())

    def _held(self, slice_name: str) -> dict[str, tuple[str, ...]]:
        with self.sessions() as session:
            held = queries.bound_gpus(session)
        return {cluster: gpus for (name, cluster), gpus in held.items() if name == slice_name}

    # The API's changes

    async def change(self, slice_name: str, before: Namespaces, after: Namespaces) -> None:
        """Make the slice's setup on every slice host go from ``before`` to ``after`` (see the module doc);
        the caller holds ``lock(slice_name)``."""
        before = {c: tuple(ns) for c, ns in before.items() if self.is_host(c)}
        after = {c: tuple(ns) for c, ns in after.items() if self.is_host(c)}
        # 1. check every cluster before changing any
        for cluster, namespaces in after.items():
            await self._check(cluster, slice_name, namespaces)
        for cluster in before.keys() - after.keys():
            await self._check(cluster, slice_name, ())
        # 2. act, undoing on failure
        held = self._held(slice_name)
        done: list[str] = []
        try:
            for cluster in sorted(after.keys() | before.keys()):
                await self._apply(slice_name, cluster, after.get(cluster), held.get(cluster, ()))
                done.append(cluster)
        except Exception:
            for cluster in done:
                try:
                    await self._apply(slice_name, cluster, before.get(cluster), held.get(cluster, ()))
                except Exception as e:
                    log.error("slice %s: could not undo its change on cluster %s: %s", slice_name, cluster, e)
            raise

    async def _check(self, cluster: str, slice_name: str, namespaces: Sequence[str]) -> None:
        try:
            await self.host(cluster).check_slice(slice_name, namespaces)
        except SliceConflict as e:
            raise SliceConflict(f"cluster {cluster}: {e}") from None

    async def _apply(
        self, slice_name: str, cluster: str, namespaces: tuple[str, ...] | None, gpus: tuple[str, ...]
    ) -> None:
        """Set up (``namespaces``) or remove (None) the slice on the cluster; ``applied`` follows."""
        host = self.host(cluster)
        if namespaces is None:
            await host.remove_slice(slice_name)
            self.applied.pop((slice_name, cluster), None)
            return
        try:
            await host.ensure_slice(slice_name, namespaces, gpus)
        except SliceConflict as e:
            raise SliceConflict(f"cluster {cluster}: {e}") from None
        self.applied[(slice_name, cluster)] = Setup(namespaces, gpus)

    # The loop's

    def wanted(self) -> dict[tuple[str, str], Setup]:
        """Every slice's setup on every slice host, from the store."""
        with self.sessions() as session:
            held = queries.bound_gpus(session)
            slices = [(row.name, queries.slice_namespaces(row)) for row in queries.all_slices(session)]
        return {
            (name, cluster): Setup(namespaces, held.get((name, cluster), ()))
            for name, by_cluster in slices
            for cluster, namespaces in by_cluster.items()
            if self.is_host(cluster)
        }

    async def sync_slice(self, slice_name: str, cluster: str) -> None:
        """Bring one slice's setup on one cluster in line with the store now (a bind or unbind changed its GPUs);
        ClusterUnavailable when the cluster fails."""
        want = self.wanted().get((slice_name, cluster))
        if want is not None:
            async with self.lock(slice_name):
                await self._sync_locked(slice_name, cluster, want)

    async def _sync_locked(self, slice_name: str, cluster: str, want: Setup) -> None:
        have = self.applied.get((slice_name, cluster))
        if have == want:
            return
        if have is not None and have.namespaces == want.namespaces:
            await self.host(cluster).set_slice_gpus(slice_name, want.namespaces, want.gpus)
            self.applied[(slice_name, cluster)] = want
        else:
            await self._apply(slice_name, cluster, want.namespaces, want.gpus)

    async def sync(self) -> None:
        """One pass over every setup that differs from the last one applied."""
        for (slice_name, cluster), want in sorted(self.wanted().items()):
            if self.applied.get((slice_name, cluster)) == want:
                continue
            try:
                async with self.lock(slice_name):
                    await self._sync_locked(slice_name, cluster, want)
            except (ClusterUnavailable, SliceConflict) as e:
                log.warning("slice %s on cluster %s is not set up: %s; trying again", slice_name, cluster, e)
            except Exception:
                log.exception("slice %s on cluster %s: setting it up failed; trying again", slice_name, cluster)

    async def remove_leftovers(self) -> None:
        """Remove from each slice host the setups the store records as left there; a leftover whose cluster is
        not a slice host (not registered) waits, one whose cluster fails is tried again on the next pass."""
        with self.sessions() as session:
            found = [(name, cluster) for name, cluster in queries.leftovers(session) if self.is_host(cluster)]
        for slice_name, cluster in found:
            try:
                async with self.lock(slice_name):
                    if (slice_name, cluster) not in self.wanted():
                        await self._apply(slice_name, cluster, None, 0)
                        log.info("slice %s: removed what it had left on cluster %s", slice_name, cluster)
                    with transaction(self.sessions) as session:
                        queries.forget_leftover(session, slice_name, cluster)
            except ClusterUnavailable as e:
                log.warning("slice %s: what it left on cluster %s stays for now: %s", slice_name, cluster, e)
            except Exception:
                log.exception("slice %s: removing what it left on cluster %s failed; trying again", slice_name, cluster)

    def forget(self, cluster: str) -> None:
        """The cluster is back (or new): set every slice up there again."""
        for key in [k for k in self.applied if k[1] == cluster]:
            del self.applied[key]
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._runner = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            await self.sync()
            await self.remove_leftovers()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.retry_interval)

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
