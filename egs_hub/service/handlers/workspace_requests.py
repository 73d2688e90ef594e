"""Workspace requests: a user asks for a new workspace (slice) in a project instead of waiting
for an admin to think of it; the project's admins (and egs-hub admins) see the requests of their
projects, and approve one (optionally changing its quota, policy or clusters: the workspace is
made then, with the one who asked and the members they named) or deny it with a reason. Nobody
approves their own request. Each step is an event; Slack hears of it when configured.

A requester sees their own requests; a request the caller may not see is a 404.
"""

from __future__ import annotations

import logging

from tornado import web

from ...core import model as core
from ...core.errors import Conflict, InvalidRequest, PolicyViolation
from ...core.requests import (
    MISSING,
    QuotaBody,
    Reason,
    SliceCreate,
    WorkspaceApproval,
    WorkspaceRequestCreate,
    parse_body,
)
from ...core.resources import WorkspaceRequest, WorkspaceRequests
from ...store import queries
from ...store.db import transaction
from ...store.models import WorkspaceRequestRow
from .. import workspaces
from ..idempotency import WORKSPACE_REQUESTS, Claim
from ..notify import NotifyError
from ..operations import Named, body_at
from ..parameters import WorkspaceRequestsQuery, read
from ..serialize import workspace_request_resource
from .base import APIHandler, operation

log = logging.getLogger(__name__)


class WorkspaceRequestBase(APIHandler):
    def may_see(self, row: WorkspaceRequestRow) -> bool:
        return row.requested_by == self.user_name or self.manages(row.project)

    def load(self, session, request_id: str, *, lock: bool = False) -> WorkspaceRequestRow:
        row = queries.get_workspace_request(session, self.int_argument("id", request_id), lock=lock)
        if row is None or not self.may_see(row):
            raise self.not_found(f"workspace request {request_id} of yours or of a project you manage")
        return row

    def check_clusters(self, clusters) -> None:
        for cluster in clusters:
            if cluster not in self.egs.registry.states:
                known = ", ".join(sorted(self.egs.registry.states))
                raise PolicyViolation("clusters", f"no cluster named {cluster!r}; the clusters are {known}")

    def record(self, session, kind: str, row: WorkspaceRequestRow, reason: str) -> None:
        queries.add_event(
            session,
            core.Event(
                kind=kind,
                actor=self.user_name,
                reason=f"workspace {row.name} in project {row.project}: {reason}",
                time=self.now(),
                slice=row.slice,
                data={"workspace_request": row.id, "project": row.project, "requested_by": row.requested_by},
            ),
        )

    async def tell(self, text: str) -> None:
        """Post to Slack when the service has a webhook; a failure is logged, the request is done."""
        if self.egs.notifier is None:
            return
        try:
            await self.egs.notifier.send(text)
        except NotifyError as e:
            log.warning("workspace request not sent to Slack: %s", e)


class WorkspaceRequestsHandler(WorkspaceRequestBase):
    @operation(
        "GET /workspace-requests",
        "Workspace requests of the projects the caller manages, and their own",
        ok="requests, newest first",
        answer=WorkspaceRequests,
        errors=(401,),
        query=WorkspaceRequestsQuery,
        names=(Named("/workspace-requests/{id}", body_at("/workspace_requests/0", id="id")),),
    )
    async def get(self) -> None:
        """The requests of the projects the caller manages, and their own (``status``: only those)."""
        query = read(WorkspaceRequestsQuery, self)
        with self.egs.sessions() as session:
            if self.is_admin:
                rows = queries.workspace_requests(session, query.status)
            else:
                rows = queries.workspace_requests(session, query.status, self.user_name, self.managed_projects)
            views = [workspace_request_resource(r) for r in rows]
        self.write_json(WorkspaceRequests(workspace_requests=views))

    @operation(
        "POST /workspace-requests",
        "Ask a project's admins for a new workspace",
        ok="asked",
        idempotent=WORKSPACE_REQUESTS,
        answer=WorkspaceRequest,
        status=201,
        errors=(401, 409, 422),
        body=WorkspaceRequestCreate,
        names=(Named("/workspace-requests/{id}", body_at("", id="id")),),
    )
    async def post(self, key: Claim) -> None:
        body = parse_body(WorkspaceRequestCreate, self.json_body())
        self.check_clusters(body.clusters)
        # Its workspace's hub group is named as it is and made at approval (workspaces.py): say now that a
        # name whose group exists, or is kept for a project's admins, cannot be (issue 45).
        existing_group = await self.egs.hub.group(body.name)
        with transaction(self.egs.sessions) as session:
            if queries.get_project_row(session, body.project) is None:
                raise PolicyViolation("project", f"no project named {body.project!r}; ask an admin which to use")
            if queries.get_slice(session, body.name) is not None:
                raise Conflict(f"a workspace named {body.name!r} exists already; ask its admins to add you")
            if queries.pending_workspace_request(session, body.name) is not None:
                raise Conflict(f"a request for a workspace named {body.name!r} is waiting already")
            workspaces.check_group_unreserved(session, body.name, "name")
            if existing_group is not None:
                problem = workspaces.existing_group_problem(existing_group, "name", may_use_existing=False)
                raise PolicyViolation("name", problem)
            row = WorkspaceRequestRow(
                project=body.project,
                name=body.name,
                display_name=body.display_name,
                purpose=body.purpose,
                members=[m for m in body.members if m != self.user_name],
                quota=body.quota.model_dump(),
                clusters=list(body.clusters),
                requested_by=self.user_name,
                status="pending",
                reason="",
                created_at=self.now(),
            )
            session.add(row)
            session.flush()
            self.record(session, "workspace-requested", row, body.purpose or "no purpose given")
            key.record(session, row)
            view = workspace_request_resource(row)
        await self.tell(
            f"{self.user_name} asks for workspace {body.name} in project {body.project}"
            + (f": {body.purpose}" if body.purpose else "")
        )
        self.set_header("Location", f"{self.egs.api_prefix}workspace-requests/{view.id}")
        self.write_json(view, 201)


class WorkspaceRequestHandler(WorkspaceRequestBase):
    @operation(
        "GET /workspace-requests/{id}",
        "One workspace request (its requester, the project's admins)",
        ok="the request",
        answer=WorkspaceRequest,
        errors=(401, 404),
    )
    async def get(self, request_id: str) -> None:
        with self.egs.sessions() as session:
            view = workspace_request_resource(self.load(session, request_id))
        self.write_json(view)


class WorkspaceDecisionHandler(WorkspaceRequestBase):
    """POST /workspace-requests/{id}/approve and /deny: the project's admins and egs-hub admins."""

    def pending(self, request_id: str) -> None:
        with self.egs.sessions() as session:
            row = self.load(session, request_id)
            self.require_manager(row.project)
            if row.status != "pending":
                raise Conflict(f"workspace request {row.id} is {row.status} already")

    async def deny(self, request_id: str, reason: str) -> None:
        with transaction(self.egs.sessions) as session:
            row = self.decided(session, request_id, "denied", reason)
            self.record(session, "workspace-denied", row, reason or "denied")
            view = workspace_request_resource(row)
        await self.tell(f"{self.user_name} denied workspace {view.name} to {view.requested_by}: {reason or '-'}")
        self.write_json(view)

    async def approve(self, request_id: str, edits: WorkspaceApproval) -> None:
        with self.egs.sessions() as session:
            row = self.load(session, request_id)
            if row.requested_by == self.user_name:
                raise web.HTTPError(
                    403, "nobody approves their own workspace request; another admin of the project does"
                )
            asked = row
            clusters = edits.clusters if edits.clusters is not MISSING else tuple(asked.clusters)
            quota = edits.quota or QuotaBody(**asked.quota)
            body = SliceCreate(
                name=asked.name,
                project=asked.project,
                display_name=asked.display_name,
                quota=quota,
                namespaces={cluster: (asked.name,) for cluster in clusters},
                members=(asked.requested_by, *asked.members),
                **({"policy": edits.policy} if edits.policy else {}),
            )
        self.check_clusters(clusters)

        def mark(session) -> None:
            done = self.decided(session, request_id, "approved", edits.reason)
            done.slice = done.name
            self.record(session, "workspace-approved", done, edits.reason or "approved")

        try:
            await workspaces.create_slice(
                self.egs, body, self.user_name, may_use_existing_group=False, group_field="name", also=mark
            )
        except InvalidRequest as e:  # what was asked no longer fits (a name taken meanwhile...)
            raise PolicyViolation(e.field, f"the workspace asked for cannot be made: {e}") from None
        with self.egs.sessions() as session:
            view = workspace_request_resource(self.load(session, request_id))
        await self.tell(f"{self.user_name} approved workspace {view.name} for {view.requested_by}")
        self.write_json(view)

    def decided(self, session, request_id: str, status: str, reason: str) -> WorkspaceRequestRow:
        """The request, locked, marked ``status`` by the caller; 409 when it was decided meanwhile."""
        row = self.load(session, request_id, lock=True)
        if row.status != "pending":
            raise Conflict(f"workspace request {row.id} is {row.status} already")
        row.status, row.reason, row.decided_by, row.decided_at = status, reason, self.user_name, self.now()
        return row


class WorkspaceApproveHandler(WorkspaceDecisionHandler):
    @operation(
        "POST /workspace-requests/{id}/approve",
        "Approve, optionally with another quota, policy or clusters: the workspace is made (the project's admins, "
        "not the requester)",
        ok="approved",
        answer=WorkspaceRequest,
        errors=(401, 403, 404, 409, 422, 503),
        body=WorkspaceApproval,
    )
    async def post(self, request_id: str) -> None:
        self.pending(request_id)
        await self.approve(request_id, parse_body(WorkspaceApproval, self.json_body()))


class WorkspaceDenyHandler(WorkspaceDecisionHandler):
    @operation(
        "POST /workspace-requests/{id}/deny",
        "Deny with a reason (the project's admins)",
        ok="denied",
        answer=WorkspaceRequest,
        errors=(401, 403, 404, 409),
        body=Reason,
    )
    async def post(self, request_id: str) -> None:
        self.pending(request_id)
        await self.deny(request_id, parse_body(Reason, self.json_body()).reason)
