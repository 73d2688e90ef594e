"""The server's way to the EGS service: one request, sent with the server's token.

Vocabulary: the *service URL* is the EGS REST API v1 base (ends in
``/api/v1/``); a *service path* is what follows it (``gprs/3/release``),
still percent-encoded as the browser sent it; an *answer* is the service's
status, body and content type, handed back unchanged. When there is no answer
(no service configured, or it cannot be reached) ``ServiceUnavailable`` says
what is wrong with the status to answer (503 or 502).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

CONFIGURE_HINT = (
    "set c.EGSExtension.service_url (default $EGS_API_URL, e.g. https://hub.example.org/services/egs/api/v1/) "
    "and c.EGSExtension.token (default $EGS_API_TOKEN, then $JUPYTERHUB_API_TOKEN) in jupyter_server_config.py"
)


class ServiceUnavailable(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class BadServicePath(ValueError):
    """A service path that could leave the API (``..`` or ``.`` segments)."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes
    content_type: str | None


def service_target(service_url: str, path: str, query: str) -> str:
    """The URL of ``path`` (percent-encoded, relative) with ``query`` under ``service_url``.

    Dot segments are refused, encoded or not: a server between here and the service could
    resolve them, and the request carries the server's hub token.
    """
    segments = path.split("/")
    if any(unquote(segment) in (".", "..") for segment in segments) or path.startswith("/"):
        raise BadServicePath(f"the service path {path!r} must not start with '/' or contain '.' or '..' segments")
    return service_url + path + (f"?{query}" if query else "")


class ServiceProxy:
    """Sends requests to the EGS service as the token's owner."""

    def __init__(self, service_url: str, token: str, timeout: float):
        self.service_url = service_url
        self.token = token
        self.timeout = timeout

    def missing(self) -> list[str]:
        """The settings still unset, by trait name."""
        return [name for name, value in (("service_url", self.service_url), ("token", self.token)) if not value]

    async def send(
        self,
        method: str,
        path: str,
        query: str = "",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """The service's answer to ``method path?query`` with a JSON ``body`` and more ``headers`` (the
        browser's Idempotency-Key), whatever its status."""
        missing = self.missing()
        if missing:
            raise ServiceUnavailable(
                503, f"no EGS service is configured ({' and '.join(missing)} unset): {CONFIGURE_HINT}"
            )
        url = service_target(self.service_url, path, query)
        request = HTTPRequest(
            url,
            method=method,
            headers={
                **(headers or {}),
                "Authorization": f"token {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
            # tornado needs a body (maybe empty) for these and none for GET.
            body=(body or b"") if method in ("POST", "PUT", "PATCH") else (body or None),
            allow_nonstandard_methods=True,
            follow_redirects=False,
            request_timeout=self.timeout,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except HTTPClientError as e:  # no answer (599): timeout, connection reset
            raise ServiceUnavailable(502, self._unreachable(e.message)) from None
        except OSError as e:
            raise ServiceUnavailable(502, self._unreachable(str(e))) from None
        return Answer(response.code, response.reason, response.body or b"", response.headers.get("Content-Type"))

    def _unreachable(self, why: str) -> str:
        return f"the EGS service at {self.service_url} is unreachable ({why}); try again shortly"
