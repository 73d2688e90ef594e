"""Projects, the top tenant: each holds slices (and clusters), names the hub group of its
admins, and has a quota over the sum of its slices and a fair-share weight among projects.

Admins list, create, change and delete projects and make or unmake project admins; a
project admin reads the projects they manage. Every slice belongs to one project:
``default`` (made by migration 0013) holds what was made before projects. A project
with slices or registered clusters is not deleted (409), nor ``default``.
"""

from __future__ import annotations

import logging

from ...core import model as core
from ...core.errors import Conflict, PolicyViolation
from ...core.requests import ProjectCreate, ProjectUpdate, check_slice_name, parse_body
from ...core.resources import Project, Projects
from ...core.user_names import normalize_user_name
from ...roles import ADMIN_GROUP
from ...store import queries
from ...store.db import transaction
from ...store.models import Project as ProjectRow
from .. import workspaces
from ..hub import HubAPIError
from ..operations import ADMIN, Named, body_at, request_path
from ..serialize import project_resource
from .base import APIHandler, operation

log = logging.getLogger(__name__)


def check_not_slice_group(session, group: str) -> None:
    """422 naming ``admin_group`` when hub group ``group`` holds a slice's members: its members would be
    the project's admins (issue 45)."""
    slice_name = workspaces.slice_of_group(session, group)
    if slice_name is not None:
        raise PolicyViolation(
            "admin_group",
            f"hub group {group!r} holds the members of slice {slice_name!r}; a project's admins have a group of "
            "their own: name another admin_group",
        )


class ProjectBase(APIHandler):
    def load(self, session, name: str) -> ProjectRow:
        row = queries.get_project_row(session, check_slice_name(name, "name"))
        if row is None:
            raise self.not_found(f"project named {name!r}")
        return row

    async def view(self, session, row: ProjectRow, admins: list[str] | None = None) -> Project:
        if admins is None:
            admins = await self.egs.hub.group_members(row.admin_group) if row.admin_group else []
        return project_resource(
            row, admins, queries.project_slices(session, row.id), queries.project_clusters(session, row.id)
        )

    def record(self, session, kind: str, project: str, reason: str, **data) -> None:
        queries.add_event(
            session,
            core.Event(
                kind=kind,
                actor=self.user_name,
                reason=f"project {project}: {reason}",
                time=self.now(),
                data={"project": project, **data},
            ),
        )


class ProjectsHandler(ProjectBase):
    @operation(
        "GET /projects",
        "Projects (admins: all; project admins: the ones they manage)",
        ok="projects",
        answer=Projects,
        errors=(401,),
        names=(
            Named("/projects/{name}", body_at("/projects/0", name="name")),
            Named("/projects/{name}/admins/{user}", body_at("/projects/0", name="name", user="admins/0")),
        ),
    )
    async def get(self) -> None:
        """Every project (admins), or the ones the caller manages."""
        groups = await self.egs.hub.groups()
        with self.egs.sessions() as session:
            rows = [r for r in queries.all_projects(session) if self.manages(r.name)]
            views = [
                project_resource(
                    r,
                    groups.get(r.admin_group, []) if r.admin_group else [],
                    queries.project_slices(session, r.id),
                    queries.project_clusters(session, r.id),
                )
                for r in rows
            ]
        self.write_json(Projects(projects=views))

    @operation(
        "POST /projects",
        "Create a project and the hub group of its admins (admin)",
        ok="created",
        answer=Project,
        status=201,
        errors=(401, 403, 409, 422),
        body=ProjectCreate,
        auth=ADMIN,
        names=(Named("/projects/{name}", body_at("", name="name")),),
    )
    async def post(self) -> None:
        body = parse_body(ProjectCreate, self.json_body())
        project = body.to_project()
        if project.admin_group == ADMIN_GROUP:
            raise PolicyViolation("admin_group", f"the hub group {ADMIN_GROUP!r} makes egs-hub admins; use another")
        with self.egs.sessions() as session:
            if queries.get_project_row(session, body.name) is not None:
                raise Conflict(f"a project named {body.name!r} exists already")
            check_not_slice_group(session, project.admin_group)
        created = await self.egs.hub.ensure_group(project.admin_group)
        now = self.now()
        try:
            with transaction(self.egs.sessions) as session:
                row = ProjectRow(name=project.name, owns_group=created, created_at=now)
                queries.write_project(row, project, now)
                session.add(row)
                self.record(session, "project-created", project.name, f"admins: hub group {project.admin_group}")
        except Exception:
            if created:
                await self.egs.hub.delete_group(project.admin_group)
            raise
        admins = [] if created else await self.egs.hub.group_members(project.admin_group)
        with self.egs.sessions() as session:
            view = await self.view(session, self.load(session, body.name), admins)
        self.set_header("Location", f"{self.egs.api_prefix}projects/{body.name}")
        self.write_json(view, 201)


class ProjectHandler(ProjectBase):
    @operation(
        "GET /projects/{name}",
        "One project (admins and its admins)",
        ok="the project",
        answer=Project,
        errors=(401, 403, 404),
    )
    async def get(self, name: str) -> None:
        with self.egs.sessions() as session:
            row = self.load(session, name)
            if not self.manages(row.name):  # a project is seen by its admins only: to others it is missing
                raise self.not_found(f"project named {name!r}")
            view = await self.view(session, row)
        self.write_json(view)

    @operation(
        "PATCH /projects/{name}",
        "Change a project's display name, quota or share (admin)",
        ok="changed",
        answer=Project,
        errors=(401, 403, 404),
        body=ProjectUpdate,
        auth=ADMIN,
    )
    async def patch(self, name: str) -> None:
        update = parse_body(ProjectUpdate, self.json_body())
        with transaction(self.egs.sessions) as session:
            row = self.load(session, name)
            queries.write_project(row, update.apply(queries.to_project(row)), self.now())
            self.record(session, "project-updated", row.name, "changed " + (", ".join(update.given()) or "nothing"))
        self.egs.reconciler.wake()  # its share and quota count from the next plan
        with self.egs.sessions() as session:
            view = await self.view(session, self.load(session, name))
        self.write_json(view)

    @operation(
        "DELETE /projects/{name}",
        "Delete a project that holds no slice or cluster, not default (admin)",
        ok="deleted",
        status=204,
        errors=(401, 403, 404, 409),
        auth=ADMIN,
    )
    async def delete(self, name: str) -> None:
        with transaction(self.egs.sessions) as session:
            row = self.load(session, name)
            if row.name == core.DEFAULT_PROJECT:
                raise Conflict(f"project {core.DEFAULT_PROJECT!r} holds what has no other project; it stays")
            held = queries.project_slices(session, row.id) + queries.project_clusters(session, row.id)
            if held:
                raise Conflict(f"project {name!r} still holds {', '.join(held)}; delete or move them first")
            group, owns_group = row.admin_group, row.owns_group
            session.delete(row)
            self.record(session, "project-deleted", name, "deleted")
        if owns_group and group:
            try:
                await self.egs.hub.delete_group(group)
            except HubAPIError as e:
                log.error("project %s is deleted; its hub group %r is left (an admin deletes it): %s", name, group, e)
        self.set_status(204)
        self.finish()


class ProjectAdminHandler(ProjectBase):
    """PUT and DELETE /projects/{name}/admins/{user} (admins): a member of the project's admin group."""

    @operation(
        "PUT /projects/{name}/admins/{user}",
        "Make a user an admin of the project: a member of its admin group (admin)",
        ok="the project",
        answer=Project,
        errors=(401, 403, 404, 422),
        auth=ADMIN,
        names=(Named("/projects/{name}/admins/{user}", request_path("name", "user")),),
    )
    async def put(self, name: str, user: str) -> None:
        user = normalize_user_name(user, "user")
        group, admins = await self._group(name, create=True)
        await self.egs.hub.add_members(group, [user], field="user")
        await self._changed("project-admin-added", name, user, sorted({*admins, user}))

    @operation(
        "DELETE /projects/{name}/admins/{user}",
        "Unmake a project admin (admin)",
        ok="the project",
        answer=Project,
        errors=(401, 403, 404),
        auth=ADMIN,
    )
    async def delete(self, name: str, user: str) -> None:
        user = normalize_user_name(user, "user")
        group, admins = await self._group(name, create=False)
        if user not in admins:
            raise self.not_found(f"admin {user} of project {name!r}")
        await self.egs.hub.remove_members(group, [user])
        await self._changed("project-admin-removed", name, user, [a for a in admins if a != user])

    async def _group(self, name: str, *, create: bool) -> tuple[str | None, list[str]]:
        """The project's admin group and its members; ``create``: name and make the group of a project
        without one (the default project made by migration has none until its first admin)."""
        with self.egs.sessions() as session:
            row = self.load(session, name)
            group = row.admin_group
        if group is None and not create:
            return None, []
        if group is None:
            group = f"{name}-admins"
            with self.egs.sessions() as session:
                check_not_slice_group(session, group)
            await self.egs.hub.ensure_group(group)
            with transaction(self.egs.sessions) as session:
                self.load(session, name).admin_group = group
        return group, await self.egs.hub.group_members(group)

    async def _changed(self, kind: str, name: str, user: str, admins: list[str]) -> None:
        self.egs.forget_identities()
        with transaction(self.egs.sessions) as session:
            self.record(session, kind, name, user, user=user)
        with self.egs.sessions() as session:
            view = await self.view(session, self.load(session, name), admins)
        self.write_json(view)
