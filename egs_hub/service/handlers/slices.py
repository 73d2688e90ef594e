"""Slices (workspaces) and their members.

A slice's members are the members of the hub group it names, so they change
here and in the hub admin panel alike. Creating a slice touches the hub, its
clusters and the database; if a later step fails, the earlier ones are undone.

A slice's ``namespaces`` (``{cluster: [namespace, ...]}``, the first its home)
name registered clusters. On a Kubernetes cluster they are set up (namespaces,
ServiceAccount, RBAC, GPU quota: service/slice_setup.py) before the database
changes, and removed when the slice is deleted or drops the cluster: a namespace
another slice has there is a 409 naming it, a cluster that does not answer a
503 naming it, and nothing is changed. A cluster that is not registered (any
more) cannot be changed: what the slice had there is recorded as a leftover and
removed once it is registered again. ``GET /slices/{name}/kubeconfig`` gives
members a kubeconfig for the slice's ServiceAccount on one cluster.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from tornado import web

from ...backends.kubernetes import ClusterUnavailable, SliceNotSetUp
from ...core import model as core
from ...core.errors import Conflict, InvalidRequest
from ...core.requests import (
    MISSING,
    SliceCreate,
    SliceUpdate,
    check_slice_name,
    parse_body,
)
from ...core.resources import HomeVolume, HomeVolumes, Slice, SliceKubeconfig, Slices
from ...core.user_names import normalize_user_name
from ...store import endpoints as endpoint_store
from ...store import queries
from ...store.db import transaction
from ...store.models import GPRRow
from ...store.models import Slice as SliceRow
from .. import workspaces
from ..hub import HubAPIError
from ..idempotency import SLICES, Claim
from ..operations import Named, body_at, request_path
from ..parameters import KubeconfigQuery, read
from ..planning import slice_usage
from ..serialize import slice_resource
from ..slice_setup import SliceHost
from .base import APIHandler, operation

log = logging.getLogger(__name__)

# A slice kubeconfig's token lives this long unless the caller asks for another expiration.


class SliceBase(APIHandler):
    def load_slice(self, session, name: str) -> SliceRow:
        check_slice_name(name)
        row = queries.get_slice(session, name)
        if row is None:
            raise self.not_found(f"slice named {name!r}")
        return row

    def unregistered(self, before: Mapping, after: Mapping) -> list[str]:
        """The clusters the slice leaves that are not registered now: its setup there is a leftover."""
        return sorted(c for c in before.keys() - after.keys() if c not in self.egs.registry.states)

    def usage(self, session) -> dict[str, dict]:
        return slice_usage(session, self.now(), self.egs.planning.half_life)

    async def slice_view(self, session, row: SliceRow, members: list[str] | None = None) -> Slice:
        """The slice as the API answers it. A handler that changed something passes the ``members`` it read
        from the hub before its change, so no hub call after the commit can turn the answer into a 5xx."""
        if members is None:
            members = await self.egs.hub.group_members(row.group_name)
        gpus = [uuid for uuid, _ in queries.slice_usable_gpus(session, row.name)]
        return slice_resource(row, members, gpus, self.usage(session)[row.name])


class SlicesHandler(SliceBase):
    @operation(
        "GET /slices",
        "Slices the caller belongs to or manages as a project admin (admins: all)",
        ok="slices",
        answer=Slices,
        errors=(401,),
        names=(
            Named("/slices/{name}", body_at("/slices/0", name="name")),
            Named("/slices/{name}/members/{user}", body_at("/slices/0", name="name", user="members/0")),
        ),
    )
    async def get(self) -> None:
        groups = await self.egs.hub.groups()
        with self.egs.sessions() as session:
            rows = [r for r in queries.all_slices(session) if self.is_member(r)]
            usage = self.usage(session)
            views = [
                slice_resource(
                    r,
                    groups.get(r.group_name, []),
                    [uuid for uuid, _ in queries.slice_usable_gpus(session, r.name)],
                    usage[r.name],
                )
                for r in rows
            ]
        self.write_json(Slices(slices=views))

    @operation(
        "POST /slices",
        "Create a slice in a project (admin, or an admin of that project)",
        ok="created (and set up on its Kubernetes clusters)",
        idempotent=SLICES,
        answer=Slice,
        status=201,
        errors=(401, 403, 409, 422, 502, 503),
        body=SliceCreate,
        names=(Named("/slices/{name}", body_at("", name="name")),),
    )
    async def post(self, key: Claim) -> None:
        """Admins, and project admins in their project."""
        body = parse_body(SliceCreate, self.json_body())
        self.require_manager(body.project)
        # Only an egs-hub admin may give it an existing hub group (issue 45: not another project's admin group).
        members = await workspaces.create_slice(
            self.egs,
            body,
            self.user_name,
            may_use_existing_group=self.is_admin,
            also=lambda session: key.record(session, queries.get_slice(session, body.name)),
        )
        with self.egs.sessions() as session:
            view = await self.slice_view(session, queries.get_slice(session, body.name), members)
        self.set_header("Location", f"{self.egs.api_prefix}slices/{body.name}")
        self.write_json(view, 201)


class SliceHandler(SliceBase):
    @operation("GET /slices/{name}", "One slice", ok="the slice", answer=Slice, errors=(401, 403, 404))
    async def get(self, name: str) -> None:
        with self.egs.sessions() as session:
            row = self.load_slice(session, name)
            self.require_member(row)
            view = await self.slice_view(session, row)
        self.write_json(view)

    @operation(
        "PATCH /slices/{name}",
        "Change a slice (admin, or an admin of its project)",
        ok="changed",
        answer=Slice,
        errors=(401, 403, 404, 409, 422, 503),
        body=SliceUpdate,
    )
    async def patch(self, name: str) -> None:
        """Admins, and the admins of its project."""
        body = parse_body(SliceUpdate, self.json_body())
        now = self.now()
        with self.egs.sessions() as session:
            row = self.load_slice(session, name)
            self.require_manager_of(row)
            before = queries.slice_namespaces(row)
            quota = body.quota if body.quota is not MISSING else None
            policy_body = body.policy if body.policy is not MISSING else None
            policy = workspaces.slice_policy(quota, policy_body, queries.slice_policy(row))
            workspaces.check_auto_gpr(session, policy, name, row.project.name)
            if body.namespaces is not MISSING:
                workspaces.check_namespaces_free(session, body.namespaces, row.id)
                workspaces.check_cluster_projects(session, body.namespaces, row.project.name)
            group = row.group_name
        members = await self.egs.hub.group_members(group)
        after = before
        if body.namespaces is not MISSING:
            workspaces.check_clusters(self.egs.registry, body.namespaces)
            after = body.namespaces
        async with self.egs.slice_setup.lock(name):
            if after is not before:
                await workspaces.change_clusters(self.egs.slice_setup, name, before, after)
            try:
                with transaction(self.egs.sessions) as session:
                    row = self.load_slice(session, name)
                    if body.display_name is not MISSING:
                        row.display_name = body.display_name
                    queries.write_slice_policy(row, policy)
                    if body.namespaces is not MISSING:
                        queries.set_namespaces(session, row, body.namespaces)
                        queries.leave_behind(session, name, self.unregistered(before, after))
                    row.updated_at = now
                    changed = list(body.given())
                    queries.add_event(
                        session,
                        core.Event(
                            kind="slice-updated",
                            actor=self.user_name,
                            reason="changed " + (", ".join(changed) or "nothing"),
                            time=now,
                            slice=name,
                        ),
                    )
            except Exception:
                if after is not before:
                    await workspaces.undo_clusters(self.egs.slice_setup, name, after, before)
                raise
        self.egs.reconciler.wake()
        with self.egs.sessions() as session:
            view = await self.slice_view(session, self.load_slice(session, name), members)
        self.write_json(view)

    @operation(
        "DELETE /slices/{name}",
        "Delete a slice with no unfinished GPRs (admin, or an admin of its project); the namespaces egs-hub "
        "created go too",
        ok="deleted",
        status=204,
        errors=(401, 403, 404, 409, 503),
    )
    async def delete(self, name: str) -> None:
        """Admins, and the admins of its project."""
        now = self.now()
        with transaction(self.egs.sessions) as session:
            row = self.load_slice(session, name)
            self.require_manager_of(row)
            live = session.scalars(
                select(GPRRow.id).where(
                    GPRRow.slice == name,
                    GPRRow.status.notin_([s.value for s in core.FINAL_STATUSES]),
                )
            ).all()
            if live:
                raise Conflict(
                    f"slice {name!r} has GPRs that are not finished ({', '.join(map(str, live))}); "
                    "cancel or release them first"
                )
            if served := endpoint_store.slice_endpoints(session, name):
                raise Conflict(
                    f"slice {name!r} has endpoints ({', '.join(served)}); delete them first "
                    f"(DELETE /endpoints/{name}/<name>)"
                )
            before = queries.slice_namespaces(row)
        # What it has on its clusters goes first: a cluster that does not answer keeps the slice (503).
        async with self.egs.slice_setup.lock(name):
            await workspaces.change_clusters(self.egs.slice_setup, name, before, {})
            with transaction(self.egs.sessions) as session:
                row = self.load_slice(session, name)
                group, owns_group = row.group_name, row.owns_group
                for server in queries.slice_servers(session, name):
                    session.delete(server)
                session.delete(row)
                queries.delete_slice_templates(session, name)
                queries.leave_behind(session, name, self.unregistered(before, {}))
                queries.add_event(
                    session,
                    core.Event(kind="slice-deleted", actor=self.user_name, reason="deleted", time=now, slice=name),
                )
        if owns_group:
            try:
                await self.egs.hub.delete_group(group)
            except HubAPIError as e:
                log.error("slice %s is deleted; its hub group %r is left (an admin deletes it): %s", name, group, e)
        self.egs.forget_identities()
        self.set_status(204)
        self.finish()


class MemberHandler(SliceBase):
    @operation(
        "PUT /slices/{name}/members/{user}",
        "Add a member (admin, or an admin of its project); the hub group changes too",
        ok="the slice",
        answer=Slice,
        errors=(401, 403, 404),
        names=(Named("/slices/{name}/members/{user}", request_path("name", "user")),),
    )
    async def put(self, name: str, user: str) -> None:
        user = normalize_user_name(user, "user")
        group = self.managed_slice_group(name)
        members = await self.egs.hub.group_members(group)
        await self.egs.hub.add_members(group, [user], field="user")
        self._record("member-added", name, user)
        await self._answer(name, sorted({*members, user}))

    @operation(
        "DELETE /slices/{name}/members/{user}",
        "Remove a member (admin, or an admin of its project)",
        ok="the slice",
        answer=Slice,
        errors=(401, 403, 404),
    )
    async def delete(self, name: str, user: str) -> None:
        user = normalize_user_name(user, "user")
        group = self.managed_slice_group(name)
        members = await self.egs.hub.group_members(group)
        if user not in members:
            raise web.HTTPError(404, f"{user} is not a member of slice {name!r}")
        await self.egs.hub.remove_members(group, [user])
        self._record("member-removed", name, user)
        await self._answer(name, [m for m in members if m != user])

    def managed_slice_group(self, name: str) -> str:
        """The hub group of slice ``name``, once the caller may manage it (admins, its project's admins)."""
        with self.egs.sessions() as session:
            row = self.load_slice(session, name)
            self.require_manager_of(row)
            return row.group_name

    def _record(self, kind: str, name: str, user: str) -> None:
        """The event of a membership change the hub has made: a store that fails now is logged, not
        answered 5xx (that would tell the caller nothing changed)."""
        self.egs.forget_identities()
        try:
            with transaction(self.egs.sessions) as session:
                queries.add_event(
                    session,
                    core.Event(
                        kind=kind,
                        actor=self.user_name,
                        reason=user,
                        time=self.now(),
                        slice=name,
                        data={"user": user},
                    ),
                )
        except SQLAlchemyError:
            log.exception("slice %s: %s %s is done in the hub; its event could not be stored", name, kind, user)

    async def _answer(self, name: str, members: list[str]) -> None:
        with self.egs.sessions() as session:
            view = await self.slice_view(session, self.load_slice(session, name), members)
        self.write_json(view)


class KubeconfigHandler(SliceBase):
    """GET /slices/{name}/kubeconfig?cluster=NAME[&expiration=SECONDS]: members and admins."""

    @operation(
        "GET /slices/{name}/kubeconfig",
        "A kubeconfig for the slice's ServiceAccount on a Kubernetes cluster (members)",
        ok="the kubeconfig",
        answer=SliceKubeconfig,
        errors=(401, 403, 404, 409, 503),
        query=KubeconfigQuery,
    )
    async def get(self, name: str) -> None:
        query = read(KubeconfigQuery, self)
        cluster, expiration = query.cluster, query.expiration
        with self.egs.sessions() as session:
            row = self.member_slice(session, check_slice_name(name))
            namespaces = queries.slice_namespaces(row).get(cluster, ())
        host = self._host(cluster)
        if not namespaces:
            raise Conflict(f"slice {name!r} has no namespaces on cluster {cluster!r}; an admin adds them first")
        try:
            made = await host.slice_kubeconfig(name, namespaces, expiration)
        except SliceNotSetUp as e:
            raise Conflict(f"{e} (egs-hub sets it up by itself: try again in a moment)") from None
        except ClusterUnavailable as e:
            raise web.HTTPError(503, f"{e}; try again once the cluster answers") from None
        self.write_json(
            SliceKubeconfig(
                slice=name, cluster=cluster, namespace=namespaces[0], expires_at=made.expires_at, kubeconfig=made.text
            )
        )

    def _host(self, cluster: str) -> SliceHost:
        if cluster not in self.egs.registry.states:
            raise InvalidRequest("cluster", f"no cluster named {cluster!r}; GET /clusters lists them")
        host = self.egs.slice_setup.host(cluster)
        if host is None:
            raise InvalidRequest("cluster", f"cluster {cluster!r} is not a Kubernetes cluster; it has no kubeconfig")
        return host


class VolumesHandler(SliceBase):
    """GET /slices/{name}/volumes: its members' home volumes on its Kubernetes clusters (members and
    admins). A cluster that does not answer is named in ``unavailable``; the others' volumes are listed."""

    @operation(
        "GET /slices/{name}/volumes",
        "Its members' home volumes on its Kubernetes clusters (members)",
        ok="the volumes",
        answer=HomeVolumes,
        errors=(401, 403, 404),
    )
    async def get(self, name: str) -> None:
        with self.egs.sessions() as session:
            row = self.member_slice(session, check_slice_name(name))
            namespaces = queries.slice_namespaces(row)
        volumes, unavailable = [], {}
        for cluster, names in sorted(namespaces.items()):
            host = self.egs.slice_setup.host(cluster)
            if host is None:
                unavailable[cluster] = f"cluster {cluster!r} is not connected now"
                continue
            try:
                found = await host.home_volumes(name, names)
            except ClusterUnavailable as e:
                unavailable[cluster] = str(e)
                continue
            volumes += [HomeVolume(cluster=cluster, **dataclasses.asdict(volume)) for volume in found]
        self.write_json(HomeVolumes(volumes=volumes, unavailable=unavailable))
