"""Request bodies bounded before they are read (issue 45).

Vocabulary: a request's *limit* is the most body bytes the service takes on its path (``Limit``:
the bytes and the option that sets them). A request whose ``Content-Length`` is over its limit is
answered 413 ``{"status", "message", "field": "body"}`` as soon as its headers are in, before any
handler runs or a byte of its body is read; a chunked body is counted as it comes and answered the
same once it passes the limit. The rest of the body is then *drained*: read and dropped, never kept,
up to LINGER_BYTES, and the connection closed. A connection closed while the peer still sends is
reset, and a reset proxy (the hub's) answers its client 503 instead of the 413 it was sent: so the
peer is let finish (as nginx's lingering close does), and only a body past LINGER_BYTES is cut.
Tornado's own cap (``max_body_size``, which answers a bare 400 that the hub's proxy turns into a 503)
is set out of the way (``UNBOUNDED``) wherever these limits apply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tornado import httputil, web

from ..core.resources import Error

UNBOUNDED = 2**62  # tornado's HTTPServer max_body_size where these limits apply
LINGER_BYTES = 128 * 1024 * 1024  # of a refused body, drained (read and dropped) before the connection is cut


@dataclass(frozen=True)
class Limit:
    bytes: int
    option: str  # the configuration that sets it, named in the 413


def declared_length(headers: httputil.HTTPHeaders) -> int | None:
    """The ``Content-Length`` a request declares; None when it declares none (chunked) or a malformed one
    (tornado answers that with a 400 itself)."""
    value = headers.get("Content-Length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


def too_large(limit: Limit, length: int | None) -> bytes:
    sent = f"is {length} bytes" if length is not None else "passed that"
    message = (
        f"the request body {sent}: this service takes at most {limit.bytes} bytes here "
        f"({limit.option}); send a smaller body"
    )
    return Error(status=413, message=message, field="body").model_dump_json(exclude_none=True).encode()


class _Bounded(httputil.HTTPMessageDelegate):
    """One request on its way to ``inner`` (the application's delegate), refused at its limit."""

    def __init__(self, inner: httputil.HTTPMessageDelegate, connection: httputil.HTTPConnection, limit_of):
        self.inner = inner
        self.connection = connection
        self.limit_of: Callable[[str], Limit] = limit_of
        self.limit = Limit(0, "")
        self.received = 0
        self.refused = False
        self.cut = False  # a refused body past LINGER_BYTES

    def headers_received(
        self, start_line: httputil.RequestStartLine | httputil.ResponseStartLine, headers: httputil.HTTPHeaders
    ) -> Awaitable[None] | None:
        assert isinstance(start_line, httputil.RequestStartLine)
        self.limit = self.limit_of(start_line.path)
        length = declared_length(headers)
        if length is not None and length > self.limit.bytes:
            self._refuse(length)
            return None
        return self.inner.headers_received(start_line, headers)

    def data_received(self, chunk: bytes) -> Awaitable[None] | None:
        self.received += len(chunk)
        if self.refused:
            if self.received > LINGER_BYTES and not self.cut:
                self.cut = True
                self.connection.finish()  # the answer is complete; the connection is cut
            return None
        if self.received > self.limit.bytes:
            self.inner.on_connection_close()  # what it was given is dropped; it answers nothing
            self._refuse(None)
            return None
        return self.inner.data_received(chunk)

    def finish(self) -> None:
        """The body is all in: a refused request's answer (sent already) is complete."""
        if self.refused:
            if not self.cut:
                self.connection.finish()
        else:
            self.inner.finish()

    def on_connection_close(self) -> None:
        if not self.refused:
            self.inner.on_connection_close()

    def _refuse(self, length: int | None) -> None:
        """Send the 413 now; the request is finished once its body is drained (finish)."""
        self.refused = True
        body = too_large(self.limit, length)
        headers = httputil.HTTPHeaders(
            {
                "Content-Type": "application/json; charset=UTF-8",
                "Content-Length": str(len(body)),
                "Cache-Control": "no-store",
                "Connection": "close",
            }
        )
        self.connection.write_headers(httputil.ResponseStartLine("HTTP/1.1", 413, "Content Too Large"), headers, body)


class BoundedApplication(web.Application):
    """A tornado application whose requests' bodies are bounded by the ``body_limit`` setting: a function
    of the request's path to its Limit. Serve it with ``max_body_size=UNBOUNDED``."""

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return _Bounded(super().start_request(server_conn, request_conn), request_conn, self.settings["body_limit"])
