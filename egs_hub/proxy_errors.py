"""The hub's proxy error page, in JSON for API clients (issue 45).

When the egs service does not answer (it restarts, say), JupyterHub's proxy asks the hub for an error
page (``/hub/error/<status>?url=<the request's path>``) and sends that to the client. The hub's page is
HTML, which a script, the Python client or the sidebar cannot read. For the service's API and its
endpoints this answers ``{"status", "message"}`` instead, as the service itself does; pages for people
keep the hub's HTML.
"""

from __future__ import annotations

from http.client import responses

from jupyterhub.handlers.pages import ProxyErrorHandler
from jupyterhub.utils import url_path_join

from .core.resources import Error
from .roles import SERVICE_NAME

JSON_PATHS = ("api/", "endpoints/")  # under the service's prefix


class JSONProxyErrorHandler(ProxyErrorHandler):
    async def get(self, status_code_s: str) -> None:
        service = url_path_join(self.base_url, "services", SERVICE_NAME) + "/"
        url = self.get_argument("url", "")
        if not any(url.startswith(service + path) for path in JSON_PATHS):
            await super().get(status_code_s)
            return
        status = int(status_code_s)
        message = f"the egs-hub service did not answer ({responses.get(status, 'error')}); nothing was done there"
        if status == 503:
            message = "the egs-hub service is not answering (it may be restarting); try again in a few seconds"
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.write(Error(status=status, message=message).model_dump_json(exclude_none=True))


HANDLERS = [(r"/error/(\d+)", JSONProxyErrorHandler)]
