"""GPR templates: named GPR shapes users pick instead of typing one (core/templates.py).

Members list the templates their slices may use (``?slice=`` one slice's); admins
list, create, change and delete any, and project admins those for their project or
its slices. A template for a project names an existing project, one for a slice an
existing slice; a slice's templates go with it.
"""

from __future__ import annotations

from sqlalchemy import select
from tornado import web

from ...core import model as core
from ...core.errors import Conflict, PolicyViolation
from ...core.requests import TemplateCreate, TemplateUpdate, check_slice_name, parse_body
from ...core.resources import Template, Templates
from ...core.templates import GPRTemplate, usable_in
from ...store import queries
from ...store.db import transaction
from ...store.models import GPRTemplateRow, Slice
from ..operations import Named, body_at
from ..parameters import TemplatesQuery, read
from ..serialize import template_resource
from .base import APIHandler, operation


class TemplateBase(APIHandler):
    def check_scope(self, session, template: GPRTemplate) -> None:
        """The project or slice a template is for exists and the caller sees it (422 naming the field, the
        same for both: visibility.py), and the caller may manage it: admins any template, project admins
        those of their project and its slices (403)."""
        project = template.project
        if template.slice is not None:
            slice_row = queries.get_slice(session, template.slice)
            if slice_row is None or not self.may_act_in(slice_row.name, slice_row.group_name):
                raise PolicyViolation("slice", f"no slice named {template.slice!r}; GET /slices lists them")
            project = slice_row.project.name
        elif project is not None and not (self.manages(project) and queries.project_exists(session, project)):
            raise PolicyViolation("project", f"no project named {project!r}")
        if self.is_admin:
            return
        if project is None:
            raise web.HTTPError(
                403, f"{self.user_name} may add templates to the projects they manage only: give project or slice"
            )
        self.require_manager(project)

    def record(self, session, kind: str, template: GPRTemplate, reason: str) -> None:
        queries.add_event(
            session,
            core.Event(
                kind=kind,
                actor=self.user_name,
                reason=f"template {template.name} ({template.scope}): {reason}",
                time=self.now(),
                slice=template.slice,
                data={"template": template.name},
            ),
        )

    def load(self, session, name: str) -> GPRTemplateRow:
        """The template; 404 when there is none, and the same when the caller may not see it: admins see
        every template, others those their slices may use and those of the projects they manage."""
        row = queries.get_template_row(session, check_slice_name(name, "name"))
        if row is None or not self.sees(session, queries.to_template(row)):
            raise self.not_found(f"template named {name!r}")
        return row

    def sees(self, session, template: GPRTemplate) -> bool:
        if self.is_admin:
            return True
        state = self.egs.planning.state.current(session, self.now())
        mine = self.slices_of_caller(state.groups)
        if any(usable_in(template, s, state.projects.get(s)) for s in mine):
            return True
        project = template.project if template.slice is None else state.projects.get(template.slice)
        return project is not None and project in self.managed_projects


class TemplatesHandler(TemplateBase):
    @operation(
        "GET /templates",
        "GPR templates the caller's slices may use (admins: all)",
        ok="templates",
        answer=Templates,
        errors=(401, 403, 404),
        query=TemplatesQuery,
        names=(Named("/templates/{name}", body_at("/templates/0", name="name")),),
    )
    async def get(self) -> None:
        """The templates the caller's slices may use (``slice``: that slice's); admins: all of them."""
        query = read(TemplatesQuery, self)
        with self.egs.sessions() as session:
            found = queries.templates(session, self.listed_slices(session, query.slice))
        self.write_json(Templates(templates=[template_resource(t) for t in found]))

    @operation(
        "POST /templates",
        "Add a GPR template: global (admin), for a project or slice (admin, its project's admins)",
        ok="added",
        answer=Template,
        status=201,
        errors=(401, 403, 409, 422),
        body=TemplateCreate,
        names=(Named("/templates/{name}", body_at("", name="name")),),
    )
    async def post(self) -> None:
        body = parse_body(TemplateCreate, self.json_body())
        now = self.now()
        template = body.to_template()
        with transaction(self.egs.sessions) as session:
            if queries.get_template_row(session, body.name) is not None:
                raise Conflict(f"a template named {body.name!r} exists already; PATCH templates/{body.name} changes it")
            self.check_scope(session, template)
            row = GPRTemplateRow(name=body.name, created_by=self.user_name, created_at=now)
            queries.write_template(row, template, now)
            session.add(row)
            self.record(session, "template-created", template, "created")
            session.flush()
            made = queries.to_template(row)
        self.set_header("Location", f"{self.egs.api_prefix}templates/{body.name}")
        self.write_json(template_resource(made), 201)


class TemplateHandler(TemplateBase):
    @operation(
        "GET /templates/{name}",
        "One GPR template (admins, members of a slice that may use it)",
        ok="the template",
        answer=Template,
        errors=(401, 404),
    )
    async def get(self, name: str) -> None:
        """One template: admins, members of a slice that may use it, and the admins of its project."""
        with self.egs.sessions() as session:
            template = queries.to_template(self.load(session, name))
        self.write_json(template_resource(template))

    @operation(
        "PATCH /templates/{name}",
        "Change a GPR template (as POST); GPRs made from it keep their fields",
        ok="changed",
        answer=Template,
        errors=(401, 403, 404, 422),
        body=TemplateUpdate,
    )
    async def patch(self, name: str) -> None:
        update = parse_body(TemplateUpdate, self.json_body())
        with transaction(self.egs.sessions) as session:
            row = self.load(session, name)
            self.check_scope(session, queries.to_template(row))  # the caller may manage it as it is
            template = update.apply(queries.to_template(row))
            self.check_scope(session, template)
            queries.write_template(row, template, self.now())
            self.record(session, "template-updated", template, "changed " + (", ".join(update.given()) or "nothing"))
            session.flush()
            changed = queries.to_template(row)
        self.write_json(template_resource(changed))

    @operation(
        "DELETE /templates/{name}",
        "Delete a GPR template (as POST); not one a slice's auto_gpr names (409)",
        ok="deleted",
        status=204,
        errors=(401, 403, 404, 409),
    )
    async def delete(self, name: str) -> None:
        """GPRs made from it keep their fields (and its name, for the record). One a slice's policy files
        GPRs from (``auto_gpr``) is a 409 naming the slices."""
        with transaction(self.egs.sessions) as session:
            row = self.load(session, name)
            self.check_scope(session, queries.to_template(row))
            users = session.scalars(select(Slice.name).where(Slice.auto_gpr == name).order_by(Slice.name)).all()
            if users:
                raise Conflict(
                    f"the policy of slice(s) {', '.join(users)} files GPRs from template {name!r} (auto_gpr); "
                    "change it there first"
                )
            self.record(session, "template-deleted", queries.to_template(row), "deleted")
            session.delete(row)
        self.set_status(204)
        self.finish()
