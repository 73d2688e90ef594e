"""Pages for people, behind JupyterHub login: the portal at /services/egs/, the
user pages beside it and the admin pages under /services/egs/admin/.

Vocabulary: a *page* is one template with one JavaScript module; every page
reads and writes through the same REST API as every other client (static/api.js
does the calls), so a page hands its script only the caller's identity, the
API prefix and the XSRF token that cookie-authenticated API calls must send.
An *admin page* needs the scope ``custom:egs:admin``; others get a readable 403.
The *nav* lists the pages the caller may open.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyterhub.services.auth import HubOAuthCallbackHandler
from tornado import web

from ...core.resources import NODE_HEALTH
from ...roles import ADMIN_SCOPE
from .base import APIHandler

CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'self'"


@dataclass(frozen=True)
class Page:
    path: str  # under the service prefix; "" is the portal
    template: str
    title: str
    admin: bool = False
    view: str = "user"  # "user": the caller's slices, no admin actions; "admin": all, with them


USER_PAGES = (
    Page("", "portal.html", "GPUs"),
    Page("requests", "requests.html", "GPU requests"),
    Page("workloads", "workloads.html", "AI workloads"),
    Page("endpoints", "endpoints.html", "Endpoints"),
    Page("workspaces", "workspaces.html", "Workspaces"),
)
ADMIN_PAGES = (
    Page("admin/", "dashboard.html", "Dashboard", admin=True, view="admin"),
    Page("admin/requests", "requests.html", "GPU requests", admin=True, view="admin"),
    Page("admin/schedule", "schedule.html", "Inventory schedule", admin=True, view="admin"),
    Page("admin/slices", "slices.html", "Slices", admin=True, view="admin"),
    Page("admin/clusters", "clusters.html", "Clusters", admin=True, view="admin"),
    Page("admin/nodes", "nodes.html", "Nodes", admin=True, view="admin"),
    Page("admin/workloads", "workloads.html", "AI workloads", admin=True, view="admin"),
    Page("admin/endpoints", "endpoints.html", "Endpoints", admin=True, view="admin"),
    Page("admin/events", "events.html", "Events", admin=True, view="admin"),
    Page("admin/cost", "cost.html", "Cost and usage", admin=True, view="admin"),
    Page("admin/capacity", "capacity.html", "Capacity planning", admin=True, view="admin"),
    Page("admin/workspaces", "workspaces.html", "Workspace requests", admin=True, view="admin"),
)


class PageHandler(APIHandler):
    """One page: its template rendered for the caller, or a readable error page."""

    def initialize(self, page: Page) -> None:
        self.page = page

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("Cache-Control", "no-store")

    @web.authenticated
    def get(self) -> None:
        if self.page.admin and not self.is_admin:
            raise web.HTTPError(
                403,
                f"The admin pages need the JupyterHub scope {ADMIN_SCOPE}, which {self.user_name} does not have. "
                "Ask a hub admin for the egs-admin role, or use the pages in the menu above.",
            )
        # node_health: the Nodes page's health filter offers what GET /nodes?health= takes
        self.finish(self._render(self.page.template, page=self.page, node_health=NODE_HEALTH))

    def _render(self, template: str, **context) -> str:
        prefix = self.egs.prefix
        user = self.current_user
        listed = () if not user else (USER_PAGES[0], *ADMIN_PAGES) if self.is_admin else USER_PAGES
        nav = [(p, prefix + p.path) for p in listed]
        return (
            self.settings["jinja_env"]
            .get_template(template)
            .render(
                user=user["name"] if user else None,
                is_admin=bool(user) and self.is_admin,
                xsrf=self.xsrf_token.decode() if isinstance(self.xsrf_token, bytes) else self.xsrf_token,
                api=self.egs.api_prefix,
                static=prefix + "static/",
                hub=self.egs.hub_prefix,
                nav=nav,
                current=getattr(self, "page", None),
                **context,
            )
        )

    def write_error(self, status_code: int, **kwargs) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        message = error.log_message if isinstance(error, web.HTTPError) and error.log_message else self._reason
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(self._render("error.html", status=status_code, reason=self._reason, message=message))


def page_routes(prefix: str) -> list[tuple]:
    """The routes of every page under ``prefix`` (the service prefix, ending in /)."""
    routes: list[tuple] = [(prefix + p.path, PageHandler, {"page": p}) for p in (*USER_PAGES, *ADMIN_PAGES)]
    routes.append((prefix + "admin", web.RedirectHandler, {"url": prefix + "admin/"}))
    return routes


class OAuthCallbackHandler(HubOAuthCallbackHandler):
    @property
    def hub_auth(self):
        return self.settings["hub_auth"]
