"""A standby replica's HTTP face (leadership.py): it answers /health itself and forwards every other
request, as it came (method, path, query, headers, body), to the leader's URL, and the leader's
answer back as it came. A client, the hub's proxy or a Kubernetes Service may so send a request
to any replica.

- ``GET <api>health``: 200 ``{"status": "ok", "role": "standby", "leader"}``; 503 when the database
  does not answer;
- anything else: the leader's answer;
- when no replica leads, or the leader does not answer: 503 ``{"status", "message"}`` with
  ``Retry-After``; a GET may be sent again, another request may or may not have been done.
"""

from __future__ import annotations

from collections.abc import Callable

from tornado import httpclient, web

from ..core.resources import Error, Health
from .body_limits import BoundedApplication, Limit
from .leadership import Leadership

RETRY_AFTER_SECONDS = 2
FORWARD_TIMEOUT_SECONDS = 120.0
# Headers of one hop, not passed on (RFC 9110 7.6.1); Content-Length is set again for the body sent.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "content-length"}
)


class StandbyHealthHandler(web.RequestHandler):
    def get(self) -> None:
        leadership: Leadership = self.settings["leadership"]
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        if not leadership.database_answers():
            self.set_status(503)
            self.finish(Health(status="unavailable", role="standby", database="failing").model_dump_json())
            return
        health = Health(status="ok", role="standby", database="ok", leader=leadership.leader_url())
        self.finish(health.model_dump_json())


class ForwardHandler(web.RequestHandler):
    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

    def check_xsrf_cookie(self) -> None:
        """The leader checks it (the request reaches it as it came)."""

    async def _forward(self, *_args) -> None:
        leadership: Leadership = self.settings["leadership"]
        leader = leadership.leader_url()
        if leader is None or leader.rstrip("/") == leadership.url.rstrip("/"):
            self._unavailable("no replica leads yet")
            return
        headers = {k: v for k, v in self.request.headers.get_all() if k.lower() not in HOP_BY_HOP}
        request = httpclient.HTTPRequest(
            leader.rstrip("/") + self.request.uri,
            method=self.request.method,
            headers=headers,
            body=self.request.body if self.request.method in ("POST", "PUT", "PATCH") else self.request.body or None,
            follow_redirects=False,
            decompress_response=False,
            allow_nonstandard_methods=True,
            request_timeout=FORWARD_TIMEOUT_SECONDS,
        )
        try:
            response = await httpclient.AsyncHTTPClient().fetch(request, raise_error=False)
        except (OSError, httpclient.HTTPClientError) as e:  # no HTTP answer: refused, reset, timed out
            self._unavailable(f"the leading replica at {leader} does not answer ({e})")
            return
        self.set_status(response.code, response.reason)
        self.clear_header("Content-Type")
        for name, value in response.headers.get_all():
            if name.lower() not in HOP_BY_HOP:
                self.add_header(name, value)
        if response.code not in (204, 304) and self.request.method != "HEAD":
            self.write(response.body)
        self.finish()

    def _unavailable(self, why: str) -> None:
        self.set_status(503)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Retry-After", str(RETRY_AFTER_SECONDS))
        message = f"this replica stands by and {why}; send the request again in a few seconds"
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            message += " (it may or may not have been done: look before you repeat it)"
        self.finish(Error(status=503, message=message).model_dump_json(exclude_none=True))

    get = head = post = put = patch = delete = options = _forward


def make_app(leadership: Leadership, api_prefix: str, body_limit: Callable[[str], Limit]) -> web.Application:
    """The standby's app; bodies over ``body_limit`` are refused here as the leader would (body_limits.py)."""
    return BoundedApplication(
        [(api_prefix + "health", StandbyHealthHandler), (r".*", ForwardHandler)],
        leadership=leadership,
        body_limit=body_limit,
    )
