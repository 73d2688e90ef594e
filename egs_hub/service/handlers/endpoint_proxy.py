"""An endpoint at the hub: ``<prefix>endpoints/{slice}/{name}/<path>`` passes to one of its ready replicas
(the one with the fewest requests in flight) as ``/<path>``, for the slice's members (a hub token, the
hub's login cookie, or a token holding only the endpoint scope ``custom:egs:endpoints`` with a filter
that reaches this endpoint: core/endpoints.py::scope_reaches): 401 without one, to others a 404 as if
it did not exist. The
answer streams back as the replica sends it (server-sent events too), so the OpenAI-compatible paths of
vLLM pass through unchanged.

The caller's token and cookies stay here: the replica sees neither. A request at an endpoint with no
ready replica counts as load (a scaled-to-zero endpoint files a GPR) and waits for one up to
``EGSService.endpoint_wait_seconds``; when none is ready by then, or its GPRs are estimated to start
later than that, the answer is a 503 with ``Retry-After``.
"""

from __future__ import annotations

import time

from tornado import httputil, web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ...core.endpoints import scope_reaches
from ...core.errors import InvalidRequest, NotFound
from ...core.requests import check_slice_name
from ...roles import ENDPOINT_SCOPE
from ..standby import HOP_BY_HOP
from .base import APIHandler, authenticated

NOT_PASSED = HOP_BY_HOP | {"host", "authorization", "proxy-authorization", "cookie"}
NOT_RETURNED = HOP_BY_HOP | {"set-cookie"}
CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 3600.0  # a generation may stream for long
MAX_CLIENTS = 1000


class Unready(web.HTTPError):
    def __init__(self, message: str, retry_after: int):
        super().__init__(503, message)
        self.retry_after = retry_after


class EndpointProxyHandler(APIHandler):
    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
    _client: AsyncHTTPClient | None = None

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")

    @classmethod
    def client(cls) -> AsyncHTTPClient:
        if cls._client is None:
            cls._client = AsyncHTTPClient(force_instance=True, max_clients=MAX_CLIENTS)
        return cls._client

    def allowed_without_access(self, model: dict) -> bool:
        """A token without the service's access scope passes when its endpoint scope reaches this
        endpoint (another endpoint, or any other path, answers 401 to it); its owner must still be a
        member (handle). The slice's group is read only for a token that holds the endpoint scope."""
        scopes = model.get("scopes") or ()
        if not any(s.partition("!")[0] == ENDPOINT_SCOPE for s in scopes) or len(self.path_args) < 2:
            return False
        slice_name, name = self.path_args[:2]
        try:
            check_slice_name(slice_name)
            check_slice_name(name, "name")
        except InvalidRequest:
            return False
        known = self.egs.endpoints.find(slice_name, name, lambda: self.planning_state().groups)
        group = known.group if known is not None else self.planning_state().groups.get(slice_name, "")
        return scope_reaches(
            scopes, ENDPOINT_SCOPE, owner=model.get("name", ""), slice_name=slice_name, name=name, group=group
        )

    @authenticated
    async def handle(self, slice_name: str, name: str, path: str) -> None:
        endpoints = self.egs.endpoints
        check_slice_name(slice_name)
        check_slice_name(name, "name")
        known = endpoints.find(slice_name, name, lambda: self.planning_state().groups)
        if known is None:
            raise NotFound(f"no endpoint named {name!r} in slice {slice_name!r}")
        self.require_member_of(slice_name, known.group, f"endpoint named {name!r} in slice {slice_name!r}")
        started = time.monotonic()
        endpoints.traffic.begin(known.id, self.now())
        failed = True
        try:
            server = await self._ready_server(known.id, slice_name, name)
            server.in_flight += 1
            try:
                failed = await self._forward(server.url, path)
            finally:
                server.in_flight -= 1
        finally:
            endpoints.traffic.end(known.id, self.now(), time.monotonic() - started, failed)

    get = head = post = put = patch = delete = options = handle

    async def _ready_server(self, endpoint_id: int, slice_name: str, name: str):
        endpoints = self.egs.endpoints
        server = endpoints.ready_server(endpoint_id)
        if server is not None:
            return server
        deadline = time.monotonic() + self.egs.endpoint_wait_seconds
        endpoints.traffic.wait(endpoint_id, 1)
        try:
            endpoints.wake()
            while (server := endpoints.ready_server(endpoint_id)) is None:
                left = deadline - time.monotonic()
                message, retry_after = endpoints.not_ready(endpoint_id, slice_name, name, self.now())
                if left <= 0 or retry_after > left + 5:
                    raise Unready(message, retry_after)
                await endpoints.passed(min(left, 1.0))
        finally:
            endpoints.traffic.wait(endpoint_id, -1)
        return server

    async def _forward(self, base: str, path: str) -> bool:
        """Pass the request to the replica at ``base``; True when it failed (5xx, or no answer)."""
        url = f"{base}/{path}" + (f"?{self.request.query}" if self.request.query else "")
        headers = httputil.HTTPHeaders()
        for key, value in self.request.headers.get_all():
            if key.lower() not in NOT_PASSED:
                headers.add(key, value)
        headers["X-Forwarded-Prefix"] = self.request.path[: len(self.request.path) - len(path)]
        headers["X-Forwarded-For"] = self.request.remote_ip or ""
        self._head: list[str] = []
        self._answered = None
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH", "DELETE") else None
        request = HTTPRequest(
            url,
            method=self.request.method,
            headers=headers,
            body=body,
            allow_nonstandard_methods=True,
            follow_redirects=False,
            decompress_response=False,
            connect_timeout=CONNECT_TIMEOUT,
            request_timeout=REQUEST_TIMEOUT,
            header_callback=self._header_line,
            streaming_callback=self._chunk,
        )
        try:
            answer = await self.client().fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as e:
            if self._answered is not None:  # the answer began: it ends here
                self.finish()
                return True
            raise web.HTTPError(502, f"the endpoint's replica did not answer: {e}") from None
        if self._answered is None:
            if answer.code == 599:
                raise web.HTTPError(502, f"the endpoint's replica did not answer: {answer.error}")
            self._start_answer(answer.code, answer.headers)
        self.finish()
        return answer.code >= 500

    def _header_line(self, line: str) -> None:
        if line.startswith("HTTP/"):
            self._head = [line]
        elif line.strip():
            self._head.append(line)
        elif self._head:
            status = httputil.parse_response_start_line(self._head[0].strip())
            if status.code >= 200:
                self._start_answer(status.code, httputil.HTTPHeaders.parse("".join(self._head[1:])), status.reason)
            self._head = []

    def _start_answer(self, code: int, headers: httputil.HTTPHeaders, reason: str | None = None) -> None:
        self._answered = code
        self.set_status(code, reason)
        self.clear_header("Content-Type")
        for key, value in headers.get_all():
            if key.lower() not in NOT_RETURNED:
                self.add_header(key, value)

    def _chunk(self, chunk: bytes) -> None:
        self.write(chunk)
        self.flush()

    def write_error(self, status_code: int, **kwargs) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, Unready):
            self.set_header("Retry-After", str(error.retry_after))
        super().write_error(status_code, **kwargs)
