"""Pages for people: the portal at /services/egs/, behind JupyterHub login.

Pages are templates with a little JavaScript that calls the same REST API as
every other client; the page only hands it the caller's identity and the
XSRF token that cookie-authenticated API calls must send.
"""

from __future__ import annotations

from jupyterhub.services.auth import HubOAuthCallbackHandler
from tornado import web

from .base import APIHandler


class PortalHandler(APIHandler):
    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.set_header(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'self'",
        )
        self.set_header("Cache-Control", "no-store")

    @web.authenticated
    def get(self) -> None:
        template = self.settings["jinja_env"].get_template("portal.html")
        self.finish(
            template.render(
                user=self.user_name,
                is_admin=self.is_admin,
                xsrf=self.xsrf_token.decode() if isinstance(self.xsrf_token, bytes) else self.xsrf_token,
                api=self.egs.api_prefix,
                static=self.egs.prefix + "static/",
                hub=self.egs.hub_prefix,
            )
        )

    def write_error(self, status_code: int, **kwargs) -> None:
        self.set_header("Content-Type", "text/plain; charset=UTF-8")
        self.finish(f"{status_code}: {self._reason}")


class OAuthCallbackHandler(HubOAuthCallbackHandler):
    @property
    def hub_auth(self):
        return self.settings["hub_auth"]
