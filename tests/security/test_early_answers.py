"""Answers sent before the request was read (issue 45): they say ``Connection: close``.

Found by CI: an unknown path (404) or a path holding NUL (400) is answered before the request's body is
read, and tornado then closes the connection without saying so in the answer. The hub's proxy keeps the
connection for its next request and answers that one 503 (``GET /gprs answered 503``). Here the service
is asked directly, over one kept-alive connection: an early answer must say the connection ends, and an
answer after the body must keep it.
"""

from __future__ import annotations

import http.client
from urllib.parse import urlparse

import pytest

from ..service.hub import Hub

EARLY = [
    ("GET", "gpr", 404),  # no such API path: NotFoundHandler answers in prepare
    ("POST", "gpr", 404),
    ("GET", "gpus/GPU-%00/metrics", 400),  # a path argument holding NUL, refused as it is decoded
]


def connection(hub: Hub) -> tuple[http.client.HTTPConnection, str]:
    base = urlparse(hub.direct_client(hub.admin_token).base)
    return http.client.HTTPConnection(base.hostname, base.port, timeout=30), base.path


@pytest.mark.parametrize(("method", "path", "status"), EARLY, ids=[f"{m} {p}" for m, p, _ in EARLY])
def test_an_answer_before_the_body_says_the_connection_closes(hub: Hub, method, path, status):
    conn, base = connection(hub)
    headers = {"Authorization": f"token {hub.admin_token}", "Content-Type": "application/json"}
    conn.request(method, base + path, body=b"{}" if method == "POST" else None, headers=headers)
    answer = conn.getresponse()
    assert answer.status == status
    assert answer.getheader("Connection") == "close"
    assert answer.read()
    conn.close()


def test_an_answer_after_the_body_keeps_the_connection(hub: Hub):
    conn, base = connection(hub)
    headers = {"Authorization": f"token {hub.admin_token}"}
    for _ in range(3):
        conn.request("GET", base + "gprs?limit=1", headers=headers)
        answer = conn.getresponse()
        assert answer.status == 200 and answer.getheader("Connection") != "close"
        answer.read()
    conn.close()


def test_the_proxy_answers_every_request_after_early_answers(hub: Hub):
    """Through the hub's proxy, early answers and ordinary ones alternate without a 503."""
    client = hub.client(hub.admin_token)
    for _ in range(20):
        client.get("gpr", expect=404)
        client.get("gpus/GPU-%00/metrics", expect=400)
        client.get("gprs?limit=1", expect=200)
