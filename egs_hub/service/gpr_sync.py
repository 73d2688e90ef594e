"""GPR custom resources applied with kubectl, kept in step with the GPRs they become.

Vocabulary (backends/kubernetes/gpr_resources.py): a *GPR resource* is a
GpuProvisionRequest in a slice's namespace on a Kubernetes cluster; its *link*
(the store) names the GPR made from it. A *resource host* is a backend whose
GPR resources can be watched (the Kubernetes backend).

One watch per registered Kubernetes cluster over every namespace (a reflector,
resuming from its resourceVersion and listing again after 410 Gone): one watch
whatever the number of slices, no restart when a slice's namespaces change, and
a resource in a namespace of no slice is told why it made no GPR. The watches
follow the registry: a cluster added is watched, one removed is not; a cluster
that fails is retried by its own reflector and holds up no other.

A pass over a cluster (on a watch event, when a GPR changed, and every
``refresh_interval`` for the estimates) does, per resource:

- not linked: read it as ``POST /gprs`` (same checks, ``commands.Commands.submit``)
  with its namespace's slice (from the store, as the pod webhook does: egs-hub
  labelled the namespace from that record); a GPR and its link are written in one
  transaction, then the finalizer ``egs.io/gpr`` is added. Invalid: status
  ``invalid`` with an Accepted False condition naming the field, no GPR, and it is
  not read again until its spec changes (its generation);
- linked: its status follows the GPR (patched only when it differs);
- linked, with a spec edited since (``metadata.generation`` past the link's
  ``generation``, the one the GPR follows): the new spec is read as at creation
  (a field left out takes its default) and applied as ``PATCH /gprs/{id}`` by the
  owner (same checks, ``commands.Commands.edit``): only while the GPR is pending
  approval or queued, vetted against the slice's policy and the inventory, no
  change a queued GPR would need approved for. The slice and cluster stay (a
  ``spec.cluster`` naming another is refused). Applied: event ``edited``, the
  planner forgets the GPR's promise, the link takes the generation (status
  ``observedGeneration``) and the condition ``SpecApplied`` is True. Refused: the
  GPR is unchanged, ``SpecApplied`` False says why naming the field, with the
  edit's generation as its ``observedGeneration``, and that generation is not read
  again (the condition records it); the rest of the status still follows the GPR;
- being deleted, or gone (a relist no longer has it): its GPR is cancelled
  (pending approval, queued) or released early (provisioning, provisioned); once
  the GPR is finished the link is marked deleted and the finalizer removed.

The store is the truth: after a restart the links say which resources are
GPRs already, so nothing is made twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from ..backends import Backend
from ..backends.kubernetes import ClusterUnavailable
from ..backends.kubernetes import gpr_resources as resources
from ..backends.kubernetes.api import API_ERRORS, describe_error
from ..backends.kubernetes.gpr_api import GPRResourceAPI
from ..backends.kubernetes.reflector import Reflector
from ..core.errors import InvalidRequest, PolicyViolation
from ..core.model import GPR, Status
from ..core.snapshot import Estimate
from ..core.templates import GPRTemplate
from ..store import queries
from ..store.db import transaction
from ..store.models import GPRResource
from .commands import Commands, template_for
from .kube_events import GPRResourceHost

log = logging.getLogger(__name__)


@dataclass
class Watched:
    backend: Backend
    api: GPRResourceAPI
    reflector: Reflector


class GPRSync:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backends: Mapping[str, Backend],
        clock: Callable[[], datetime],
        commands: Commands,
        *,
        interval: float = 1.0,
        refresh_interval: float = 30.0,
    ):
        """Every ``interval`` seconds a pass runs if a GPR changed (or a watch woke it); every
        ``refresh_interval`` seconds one runs anyway. GPRs are made, edited and ended through ``commands``."""
        self.sessions = sessions
        self.backends = backends
        self.clock = clock
        self.commands = commands
        self.planning = commands.planning
        self.interval = interval
        self.refresh_interval = refresh_interval
        self.watched: dict[str, Watched] = {}
        self._wake = asyncio.Event()
        self._runner: asyncio.Task | None = None
        self._seen: tuple | None = None
        self._last_pass = 0.0

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._runner = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        for name in list(self.watched):
            await self._unwatch(name)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.interval)
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                await self.follow_clusters()
                if woken or self._gprs_changed() or time.monotonic() - self._last_pass >= self.refresh_interval:
                    await self.sync()
            except Exception:
                log.exception("GPR resource pass failed; trying again")

    def _gprs_changed(self) -> bool:
        with self.sessions() as session:
            seen = queries.last_gpr_change(session)
        changed, self._seen = seen != self._seen, seen
        return changed

    # Following the registry

    async def follow_clusters(self) -> None:
        """Watch every resource host of the registry; stop watching clusters that left it."""
        for name in list(self.watched):
            if self.backends.get(name) is not self.watched[name].backend:
                await self._unwatch(name)
        for name, backend in list(self.backends.items()):
            if name in self.watched or not isinstance(backend, GPRResourceHost):
                continue
            try:
                api = await backend.gpr_resources()
            except ClusterUnavailable as e:
                log.warning("GPR resources of cluster %s not watched: %s", name, e)
                continue
            reflector = api.reflector(self.wake)
            reflector.start_listing()
            self.watched[name] = Watched(backend, api, reflector)

    async def _unwatch(self, name: str) -> None:
        await self.watched.pop(name).reflector.stop()

    # Passes

    async def sync(self) -> None:
        """One pass over every watched cluster that has listed its resources; one failing holds up no other."""
        self._last_pass = time.monotonic()
        for name, watched in list(self.watched.items()):
            if not watched.reflector.listed or watched.reflector.error is not None:
                continue
            try:
                await self.sync_cluster(name, watched)
            except API_ERRORS as e:
                log.warning("cluster %s: GPR resources not synced: %s; trying again", name, describe_error(e))
            except Exception:
                log.exception("cluster %s: GPR resources not synced; trying again", name)

    async def sync_cluster(self, cluster: str, watched: Watched) -> None:
        api = watched.api
        now = self.clock()
        # 1. snapshot
        objects = list(watched.reflector.objects.values())
        with self.sessions() as session:
            links = {link.uid: link for link in queries.gpr_resource_links(session, cluster)}
            gprs = {link.gpr_id: queries.to_gpr(link.gpr) for link in links.values() if link.deleted_at is None}
        queued = any(g.status is Status.QUEUED for g in gprs.values())
        estimates = await self._estimates(now) if queued else {}
        # 2. decide and 3. act, resource by resource
        for obj in objects:
            link = links.get(obj["metadata"]["uid"])
            if link is None:
                if resources.is_deleting(obj):
                    await self._set_finalizer(api, cluster, obj, present=False)
                elif resources.needs_review(obj):
                    await self._accept(api, cluster, obj, now)
            elif link.deleted_at is not None:
                await self._set_finalizer(api, cluster, obj, present=False)
            else:
                gpr, generation, applied = gprs[link.gpr_id], link.generation, None
                if resources.is_deleting(obj):
                    gpr = self._end(link, gpr, "its GpuProvisionRequest was deleted", now)
                elif resources.spec_edited(obj, link.generation):
                    edited, generation, applied = self._edit(cluster, obj, link, now)
                    if edited is not None:
                        gpr = edited
                        estimates = await self._estimates(now) if gpr.status is Status.QUEUED else estimates
                await self._follow(api, cluster, obj, link, gpr, estimates.get(gpr.id), generation, applied, now)
        present = {obj["metadata"]["uid"] for obj in objects}
        for link in links.values():
            if link.deleted_at is None and link.uid not in present:
                gpr = self._end(link, gprs[link.gpr_id], "its GpuProvisionRequest is gone", now)
                if gpr.status.is_final:
                    self._mark_deleted(link, now)

    async def _estimates(self, now: datetime) -> dict[int, Estimate]:
        return (await self.planning.current(self.sessions, now)).plan.estimates

    async def _accept(self, api: GPRResourceAPI, cluster: str, obj: dict, now: datetime) -> None:
        """Make the resource a GPR as POST /gprs would, or mark it invalid saying why."""
        ref = resources.ref_of(obj, cluster)
        generation = obj["metadata"].get("generation")
        try:
            with self.sessions() as session:
                slice_name = queries.slice_of_namespace(session, cluster, ref.namespace)
            if slice_name is None:
                raise InvalidRequest(
                    "slice",
                    f"namespace {ref.namespace} on cluster {cluster} is not a namespace of any slice; "
                    "apply it in one of your slice's namespaces",
                )
            spec = resources.requested_spec(obj, slice_name, cluster, self.template_of)

            def link(session: Session, gpr: GPR) -> None:
                queries.link_gpr_resource(session, gpr.id, cluster, ref.namespace, ref.name, ref.uid, generation)

            gpr = (await self.commands.submit(spec, resources.requested_by(ref), admin=False, also=link)).gpr
        except (InvalidRequest, PolicyViolation) as e:
            log.info("cluster %s: GPR resource %s/%s is invalid: %s", cluster, ref.namespace, ref.name, e)
            previous = obj.get("status") or {}
            status = resources.invalid_status(e.field, str(e), generation, previous, now)
            await self._patch_status(api, ref, previous, status)
            return
        log.info("cluster %s: GPR resource %s/%s is GPR %s", cluster, ref.namespace, ref.name, gpr.id)
        obj = await self._set_finalizer(api, cluster, obj, present=True)
        status = resources.gpr_status(gpr, None, generation, obj.get("status") or {}, now)
        await self._patch_status(api, ref, obj.get("status"), status)

    def template_of(self, name: str, slice_name: str) -> GPRTemplate:
        """The template a resource names, when its slice may use it (else PolicyViolation naming it)."""
        with self.sessions() as session:
            return template_for(session, name, slice_name)

    def _edit(self, cluster: str, obj: dict, link: GPRResource, now: datetime) -> tuple[GPR | None, int | None, dict]:
        """Read an edited resource's spec as PATCH /gprs/{id} by the GPR's owner. Returns the GPR edited (None
        when nothing changed), the generation the GPR follows and the SpecApplied condition: applied, or
        refused saying why."""
        ref = resources.ref_of(obj, cluster)
        generation = obj["metadata"]["generation"]
        previous = obj.get("status") or {}
        actor = resources.requested_by(ref)

        before: list[GPR] = []

        def follow_generation(session: Session, gpr: GPR) -> None:
            session.get(GPRResource, link.gpr_id).generation = generation
            before.append(gpr)

        try:
            gpr = self.commands.edit(
                link.gpr_id,
                lambda spec: resources.edited_spec(obj, spec, cluster, self.template_of),
                actor,
                admin=False,
                also=follow_generation,
            )
        except resources.EDIT_REFUSALS as e:
            log.info("cluster %s: edit of GPR resource %s/%s refused: %s", cluster, ref.namespace, ref.name, e)
            return None, link.generation, resources.spec_applied(generation, e, previous, now)
        applied = resources.spec_applied(generation, None, previous, now)
        if gpr is before[0]:  # the same spec asked again (1h for 60m): nothing was edited
            return None, generation, applied
        log.info("cluster %s: GPR resource %s/%s edited GPR %s", cluster, ref.namespace, ref.name, gpr.id)
        return gpr, generation, applied

    async def _follow(
        self,
        api: GPRResourceAPI,
        cluster: str,
        obj: dict,
        link: GPRResource,
        gpr: GPR,
        estimate: Estimate | None,
        generation: int | None,
        edit: dict | None,
        now: datetime,
    ) -> None:
        """Status after the GPR, at the generation it follows (with the SpecApplied condition of an edit just
        read); the finalizer on while the GPR may hold GPUs, off once it ended for a deletion."""
        if resources.is_deleting(obj) and gpr.status.is_final:
            self._mark_deleted(link, now)
            await self._set_finalizer(api, cluster, obj, present=False)
            return
        ref = resources.ref_of(obj, cluster)
        if not resources.is_deleting(obj):
            obj = await self._set_finalizer(api, cluster, obj, present=True)
        previous = obj.get("status") or {}
        status = resources.gpr_status(gpr, estimate, generation, previous, now, edit)
        await self._patch_status(api, ref, previous, status)

    def _mark_deleted(self, link: GPRResource, now: datetime) -> None:
        with transaction(self.sessions) as session:
            session.get(GPRResource, link.gpr_id).deleted_at = now

    def _end(self, link: GPRResource, gpr: GPR, why: str, now: datetime) -> GPR:
        """Cancel or release early the GPR of a resource deleted or gone; mark the link once it is finished."""
        actor = resources.requested_by(resources.ResourceRef(link.cluster, link.namespace, link.name, link.uid))
        return self.commands.end(gpr.id, actor, why)

    async def _set_finalizer(self, api: GPRResourceAPI, cluster: str, obj: dict, *, present: bool) -> dict:
        patch = resources.finalizer_patch(obj, present)
        if patch is None:
            return obj
        return await api.patch(resources.ref_of(obj, cluster), patch)

    async def _patch_status(
        self, api: GPRResourceAPI, ref: resources.ResourceRef, current: dict | None, desired: dict
    ) -> None:
        patch = resources.status_patch(current, desired)
        if patch is not None:
            await api.patch_status(ref, patch)
