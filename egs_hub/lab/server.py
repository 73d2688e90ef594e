"""The jupyter-server extension of egs-hub: ``/egs/...`` on the user's own server.

The browser talks to its own server; the server talks to the EGS service with
its own hub token, so the browser never holds a hub token and the service sees
the real user. Inside a server that JupyterHub spawned with SliceLocalSpawner
nothing needs configuring: ``EGS_API_URL`` and ``JUPYTERHUB_API_TOKEN`` are in
its environment. Elsewhere (``jupyter lab`` on a laptop) point it at a service
in ``jupyter_server_config.py``::

    c.EGSExtension.service_url = "https://hub.example.org/services/egs/api/v1/"
    c.EGSExtension.token = "<a JupyterHub API token of yours>"

or on the command line (``--EGSExtension.service_url=...``). Routes: see
``egs_hub.lab.handlers``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jupyter_server.extension.application import ExtensionApp
from traitlets import Float, TraitError, Unicode, default, validate

from .handlers import make_handlers
from .proxy import ServiceProxy


@dataclass(frozen=True)
class ServerIdentity:
    """Whose server this is, as JupyterHub and the spawner told it (all unset outside a hub)."""

    user: str | None
    server: str
    slice: str | None

    @classmethod
    def from_env(cls, env: dict[str, str]) -> ServerIdentity:
        return cls(
            user=env.get("JUPYTERHUB_USER") or None,
            server=env.get("JUPYTERHUB_SERVER_NAME", ""),
            slice=env.get("EGS_SLICE") or None,
        )


def checked_service_url(url: str) -> str:
    """``url`` with a trailing slash (paths are appended to it), or "" for none; not http(s): an error."""
    url = url.strip()
    if not url:
        return ""
    if not url.startswith(("http://", "https://")):
        raise TraitError(f"EGSExtension.service_url must be an http:// or https:// URL, not {url!r}")
    return url if url.endswith("/") else url + "/"


class EGSExtension(ExtensionApp):
    name = "egs_hub"
    description = "egs-hub in JupyterLab: the EGS service's API through this server, as its owner"

    service_url = Unicode(
        help="""URL of the EGS REST API v1 that this server reaches, ending in /api/v1/, e.g.
        https://hub.example.org/services/egs/api/v1/. Empty: /egs/api/ answers 503.
        Default: $EGS_API_URL (SliceLocalSpawner sets it).

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @default("service_url")
    def _default_service_url(self) -> str:
        # traitlets validates set values only, so the environment's value is checked here.
        return checked_service_url(os.environ.get("EGS_API_URL", ""))

    @validate("service_url")
    def _check_service_url(self, proposal) -> str:
        return checked_service_url(proposal.value)

    token = Unicode(
        help="""JupyterHub API token sent to the EGS service as 'Authorization: token <token>'; the
        service acts for the token's owner. The browser never sees it.
        Default: $EGS_API_TOKEN, else $JUPYTERHUB_API_TOKEN (the server's own token in a hub).

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @default("token")
    def _default_token(self) -> str:
        return os.environ.get("EGS_API_TOKEN") or os.environ.get("JUPYTERHUB_API_TOKEN", "")

    request_timeout = Float(
        30.0,
        help="""Seconds to wait for the EGS service's answer before /egs/api/ answers 502.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @validate("request_timeout")
    def _check_request_timeout(self, proposal) -> float:
        if not proposal.value > 0:
            raise TraitError(f"EGSExtension.request_timeout must be a positive number of seconds, not {proposal.value}")
        return proposal.value

    def initialize_settings(self) -> None:
        self.proxy = ServiceProxy(self.service_url, self.token, self.request_timeout)
        self.identity = ServerIdentity.from_env(dict(os.environ))
        where = self.service_url or "nowhere (see EGSExtension.service_url)"
        self.log.info("egs-hub extension: EGS service at %s", where)

    def initialize_handlers(self) -> None:
        self.handlers.extend(make_handlers())
