"""Making workspaces: a slice created by an admin or a project admin (POST /slices), or by
approving a user's workspace request (POST /workspace-requests/{id}/approve), is made here
once, the same way; and what changing a slice's clusters shares with making one.

Making a slice touches the hub (its group, its members), its clusters (namespaces, RBAC,
quota: slice_setup.py) and the store; if a later step fails, the earlier ones are undone,
so a failed make leaves nothing behind. A cluster that does not answer is a 503 naming it
(core.errors.Unavailable), a namespace another slice has a 409, and nothing is changed.

Hub groups are the service's (issue 45): a slice's members are its group's, so a group that
gives rights must never be reached through a slice. A slice's group is one the service makes for
it, or, when an egs-hub admin (not a project admin, not a workspace request) names it, an existing
group that holds no role and is no project's admin group. A project's admin group is never a
slice's group either, nor the one a project without an admin group would get (``NAME-admins``,
projects.py), and ``egs-admins`` is neither. A refusal is a 422 naming the field and changes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..backends.kubernetes import ClusterUnavailable, SliceConflict
from ..core import model as core
from ..core.errors import Conflict, InvalidRequest, PolicyViolation, Unavailable
from ..core.policy import check_policy
from ..core.requests import PolicyBody, QuotaBody, SliceCreate
from ..core.templates import usable_in
from ..roles import ADMIN_GROUP
from ..store import queries
from ..store.db import transaction
from ..store.models import Project as ProjectRow
from ..store.models import Slice as SliceRow
from ..store.models import SliceNamespace

if TYPE_CHECKING:
    from .clusters import Clusters
    from .hub import HubClient, HubGroup
    from .slice_setup import SliceSetup

log = logging.getLogger(__name__)


def slice_policy(
    quota: QuotaBody | None, body: PolicyBody | None, current: core.SlicePolicy | None = None
) -> core.SlicePolicy:
    """The policy a create (``current`` None) or a partial update gives; MISSING keeps a value.

    Quota and policy fields are SlicePolicy fields of the same names.
    """
    base = current or core.SlicePolicy()
    changes = {name: value for part in (quota, body) if part for name, value in part.given().items()}
    policy = dataclasses.replace(base, **changes)
    check_policy(policy)
    return policy


def check_auto_gpr(session: Session, policy: core.SlicePolicy, slice_name: str, project: str) -> None:
    """PolicyViolation naming ``policy.auto_gpr`` when it names a template there is none of, or that the
    slice may not use."""
    if policy.auto_gpr is None:
        return
    template = queries.get_template(session, policy.auto_gpr)
    if template is None:
        raise PolicyViolation(
            "policy.auto_gpr", f"no template named {policy.auto_gpr!r}; GET /templates?slice={slice_name} lists them"
        )
    if not usable_in(template, slice_name, project):
        raise PolicyViolation(
            "policy.auto_gpr",
            f"template {template.name!r} is for {template.scope}, not for slice {slice_name!r}; "
            f"GET /templates?slice={slice_name} lists the ones it may use",
        )


def check_namespaces_free(session: Session, namespaces: Mapping, slice_id: int | None) -> None:
    """409 naming the slice that has one of ``namespaces`` already."""
    for cluster, names in namespaces.items():
        taken = session.scalars(
            select(SliceNamespace).where(SliceNamespace.cluster == cluster, SliceNamespace.namespace.in_(names))
        ).all()
        for ns in taken:
            if ns.slice_id != slice_id:
                where = f"namespace {ns.namespace!r} on cluster {cluster!r}"
                raise Conflict(f"{where} belongs to slice {ns.slice.name!r}")


def check_clusters(registry: Clusters, namespaces: Mapping[str, Sequence[str]]) -> None:
    """400 naming a cluster of ``namespaces`` that is not registered."""
    for cluster in namespaces:
        if cluster not in registry.states:
            known = ", ".join(sorted(registry.states))
            raise InvalidRequest(
                f"namespaces.{cluster}",
                f"no cluster named {cluster!r}; namespaces name registered clusters ({known})",
            )


def check_cluster_projects(session: Session, namespaces: Mapping[str, Sequence[str]], project: str) -> None:
    """422 naming a cluster of ``namespaces`` that another project holds (core.model.serves)."""
    owners = queries.cluster_projects(session)
    for cluster in namespaces:
        if not core.serves(owners, cluster, project):
            raise PolicyViolation(
                f"namespaces.{cluster}",
                f"cluster {cluster!r} is project {owners[cluster]!r}'s; a workspace of project {project!r} "
                "has namespaces on its own project's clusters and shared ones",
            )


def admins_project(session: Session, group: str) -> str | None:
    """The project whose admins hub group ``group`` holds, or would hold: its ``admin_group``, or for a project
    without one (the default project until its first admin) ``NAME-admins``, which it gets then."""
    kept_for = group.removesuffix("-admins") if group.endswith("-admins") else None
    return session.scalar(
        select(ProjectRow.name)
        .where((ProjectRow.admin_group == group) | (ProjectRow.admin_group.is_(None) & (ProjectRow.name == kept_for)))
        .order_by(ProjectRow.name)
        .limit(1)
    )


def slice_of_group(session: Session, group: str) -> str | None:
    """The slice whose members hub group ``group`` holds, if one does."""
    return session.scalar(select(SliceRow.name).where(SliceRow.group_name == group).limit(1))


def check_group_unreserved(session: Session, group: str, field: str) -> None:
    """422 naming ``field`` when hub group ``group`` gives rights a slice's members must not get through it:
    ``egs-admins``, or a project's admin group (admins_project)."""
    if group == ADMIN_GROUP:
        raise PolicyViolation(
            field, f"the hub group {ADMIN_GROUP!r} makes its members egs-hub admins; a slice cannot use it"
        )
    project = admins_project(session, group)
    if project is not None:
        raise PolicyViolation(
            field,
            f"hub group {group!r} is kept for the admins of project {project!r}; a workspace's members never "
            + ("share it: ask for a workspace of another name" if field == "name" else "share it: name another group"),
        )


def existing_group_problem(group: HubGroup, field: str, *, may_use_existing: bool) -> str | None:
    """Why a new slice may not take the existing hub group ``group``; None when it may. Only an egs-hub admin may
    give a slice an existing group, and only one the hub lists no role for."""
    if not may_use_existing:
        fix = (
            "ask for a workspace of another name"
            if field == "name"
            else "leave group out (the workspace's name is used) or name a group that does not exist"
        )
        return (
            f"hub group {group.name!r} exists already; a workspace made here gets a group of its own: {fix}. "
            "Only an egs-hub admin may give a workspace an existing group"
        )
    if group.roles is None:
        return (
            f"JupyterHub did not list the roles of hub group {group.name!r} (the service's token lacks "
            "read:roles:groups), so it may give rights; name a group that does not exist"
        )
    if group.roles:
        return (
            f"hub group {group.name!r} holds the role(s) {', '.join(group.roles)}: its members get their scopes, "
            "so no workspace may use it; name another group"
        )
    return None


async def claim_group(hub: HubClient, group: str, field: str, *, may_use_existing: bool) -> tuple[bool, list[str]]:
    """The hub group ``group`` for a new slice: (whether this call made it, its members before). 422 naming
    ``field`` when the group exists and the slice may not take it (existing_group_problem)."""
    existing = await hub.group(group)
    if existing is None:
        if await hub.ensure_group(group):
            return True, []
        existing = await hub.group(group)  # someone made it since
        if existing is None:
            raise Conflict(f"hub group {group!r} was made and deleted meanwhile; try again")
    problem = existing_group_problem(existing, field, may_use_existing=may_use_existing)
    if problem is not None:
        raise PolicyViolation(field, problem)
    return False, list(existing.users)


async def change_clusters(setup: SliceSetup, name: str, before: Mapping, after: Mapping) -> None:
    """Set the slice up on its clusters as ``after`` says (from ``before``): 409/503 with nothing changed.
    The caller holds the slice's setup lock until the store has the change."""
    try:
        await setup.change(name, before, after)
    except SliceConflict as e:
        raise Conflict(str(e)) from None
    except ClusterUnavailable as e:
        raise Unavailable(f"{e}; nothing was changed. Try again once the cluster answers.") from None


async def undo_clusters(setup: SliceSetup, name: str, done: Mapping, back_to: Mapping) -> None:
    """Put the slice's setup on its clusters back after a later step of a change failed; a failure here is
    logged, and the error that made the change fail is the answer."""
    try:
        await setup.change(name, done, back_to)
    except (SliceConflict, ClusterUnavailable) as e:
        log.error("slice %s: could not undo its change on the clusters: %s", name, e)


async def create_slice(
    egs,
    body: SliceCreate,
    actor: str,
    *,
    may_use_existing_group: bool,
    group_field: str = "group",
    also: Callable[[Session], None] | None = None,
) -> list[str]:
    """Make the slice ``body`` asks for, in its project, as ``actor`` (whose right to was checked), with the
    service ``egs`` (app.EGSService: its hub, clusters and store); ``also`` writes more in the store's
    transaction. Returns its members.

    ``may_use_existing_group``: whether the slice may take an existing hub group (an egs-hub admin asks);
    else its group is one this call makes. A refusal of the group names ``group_field`` (a workspace
    request's slice is named, and grouped, by the request's ``name``)."""
    group = body.group or body.name
    now = egs.clock()
    policy = slice_policy(body.quota, body.policy)
    with egs.sessions() as session:
        project = queries.get_project_row(session, body.project)
        if project is None:
            raise PolicyViolation("project", f"no project named {body.project!r}; GET /projects lists them")
        project_id = project.id
        check_auto_gpr(session, policy, body.name, body.project)
        check_cluster_projects(session, body.namespaces, body.project)
        if queries.get_slice(session, body.name) is not None:
            raise Conflict(f"a slice named {body.name!r} exists already")
        check_group_unreserved(session, group, group_field)
        user_of_group = slice_of_group(session, group)
        if user_of_group is not None:
            raise Conflict(f"hub group {group!r} holds the members of slice {user_of_group!r} already")
        check_namespaces_free(session, body.namespaces, None)
    check_clusters(egs.registry, body.namespaces)
    hub = egs.hub
    created_group, members = await claim_group(hub, group, group_field, may_use_existing=may_use_existing_group)
    members_before = set(members)
    created_users: list[str] = []
    on_clusters = False
    async with egs.slice_setup.lock(body.name):
        try:
            if body.members:
                created_users = await hub.add_members(group, list(body.members))
            await change_clusters(egs.slice_setup, body.name, {}, body.namespaces)
            on_clusters = True
            with transaction(egs.sessions) as session:
                row = SliceRow(
                    name=body.name,
                    display_name=body.display_name,
                    group_name=group,
                    owns_group=created_group,
                    project_id=project_id,
                    created_at=now,
                    updated_at=now,
                )
                queries.write_slice_policy(row, policy)
                session.add(row)
                session.flush()
                queries.set_namespaces(session, row, body.namespaces)
                queries.add_event(
                    session,
                    core.Event(
                        kind="slice-created",
                        actor=actor,
                        reason=f"hub group {group!r}" + (" (created)" if created_group else " (existing)"),
                        time=now,
                        slice=body.name,
                        data={"members": list(body.members), "project": body.project},
                    ),
                )
                if also is not None:
                    also(session)
        except Exception:
            # Undo the hub side, so a failed create leaves nothing behind (created users could sign up).
            if on_clusters:
                await undo_clusters(egs.slice_setup, body.name, body.namespaces, {})
            if created_group:
                await hub.delete_group(group)
            elif added := [m for m in body.members if m not in members_before]:
                await hub.remove_members(group, added)
            for user in created_users:
                await hub.delete_user(user)
            raise
    egs.forget_identities()
    members = sorted(members_before | set(body.members))
    return members
