"""The routes of the server extension, under the server's base URL.

- ``/egs/api/<path>``: GET, POST, PATCH, PUT, DELETE forwarded with query,
  body and ``Idempotency-Key`` to ``<service_url><path>`` with the server's
  token; the service's status, body and content type come back unchanged.
- ``GET /egs/config``: who and where this server is, and whether a service is set.
- ``POST /egs/restart``: the service restarts this very server (202).

Every route needs an authenticated jupyter-server user, and jupyter-server
checks XSRF on non-GET requests (JupyterLab's ServerConnection sends the token).
Errors of the extension itself are ``{"status", "message"}``, as the service's,
with ``field`` when a part of the request is at fault: a path or query argument
that is not UTF-8 text is a 400 naming it, as the service answers (bodies go to
the service unread).
"""

from __future__ import annotations

import json
from urllib.parse import quote

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join
from tornado import web

from ..core.decoding import decode_argument
from ..core.errors import InvalidRequest
from .proxy import Answer, BadServicePath, ServiceProxy, ServiceUnavailable

PASSED_HEADERS = ("Idempotency-Key",)  # the request headers forwarded to the service


class EGSHandler(ExtensionHandlerMixin, APIHandler):
    @property
    def proxy(self) -> ServiceProxy:
        return self.extensionapp.proxy

    def write_problem(self, status: int, message: str, field: str | None = None) -> None:
        self.set_status(status)
        self.finish(json.dumps({"status": status, "message": message, **({"field": field} if field else {})}))

    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        return decode_argument(value, name or "path")

    def write_error(self, status_code: int, **kwargs) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, InvalidRequest):
            self.write_problem(400, str(error), error.field)
        else:
            super().write_error(status_code, **kwargs)

    def write_answer(self, answer: Answer) -> None:
        self.set_status(answer.status, answer.reason)
        self.finish(answer.body or None, set_content_type=answer.content_type or "application/json")


class ForwardHandler(EGSHandler):
    async def forward(self) -> None:
        # The raw path, not tornado's decoded argument: an encoded '/' in a name must stay encoded.
        prefix = url_path_join(self.base_url, "egs/api/")
        path = self.request.path[len(prefix) :]
        try:
            answer = await self.proxy.send(
                self.request.method, path, self.request.query, self.request.body or None, self.passed_headers()
            )
        except ServiceUnavailable as e:
            self.write_problem(e.status, str(e))
        except BadServicePath as e:
            self.write_problem(400, str(e))
        else:
            self.write_answer(answer)

    def passed_headers(self) -> dict[str, str]:
        """The browser's headers the service reads: a create's Idempotency-Key, so that the sidebar's retry of
        a create makes it once (issue 45)."""
        return {name: value for name in PASSED_HEADERS if (value := self.request.headers.get(name)) is not None}

    @web.authenticated
    async def get(self, _path: str) -> None:
        await self.forward()

    @web.authenticated
    async def post(self, _path: str) -> None:
        await self.forward()

    @web.authenticated
    async def put(self, _path: str) -> None:
        await self.forward()

    @web.authenticated
    async def patch(self, _path: str) -> None:
        await self.forward()

    @web.authenticated
    async def delete(self, _path: str) -> None:
        await self.forward()


class ConfigHandler(EGSHandler):
    @web.authenticated
    def get(self) -> None:
        me = self.extensionapp.identity
        self.finish(
            json.dumps(
                {
                    "user": me.user,
                    "server": me.server,
                    "slice": me.slice,
                    "service_configured": not self.proxy.missing(),
                }
            )
        )


class RestartHandler(EGSHandler):
    @web.authenticated
    async def post(self) -> None:
        me = self.extensionapp.identity
        if me.user is None:
            self.write_problem(
                409,
                "this server was not started by JupyterHub ($JUPYTERHUB_USER is unset), "
                "so the EGS service cannot restart it; restart it yourself",
            )
            return
        path = f"server-restarts/{quote(me.user, safe='')}"
        if me.server:
            path += f"/{quote(me.server, safe='')}"
        try:
            answer = await self.proxy.send("POST", path)
        except ServiceUnavailable as e:
            self.write_problem(e.status, str(e))
            return
        if answer.status == 202:
            self.set_status(202)
            self.finish(json.dumps({"restarting": True}))
        else:
            self.write_answer(answer)


def make_handlers() -> list[tuple[str, type[EGSHandler]]]:
    """Routes relative to the server's base URL (the ExtensionApp prepends it)."""
    return [
        (r"/egs/api/(.*)", ForwardHandler),
        (r"/egs/config", ConfigHandler),
        (r"/egs/restart", RestartHandler),
    ]
