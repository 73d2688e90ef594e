"""The client sends a create with an Idempotency-Key of its own (issue 45, item 7), the same on each try,
and tries again on a 502, a 503 or no answer; a GET too; any other call only once. Against a local HTTP
server that answers from a script and records what it was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from egs_hub.client import AsyncEGSClient, EGSClient, EGSConfigError, EGSConnectionError, EGSError
from egs_hub.client.transport import MAX_WAIT, Retries

DROP = "drop"  # close the connection without an answer
HEALTH = {"status": "ok", "database": "ok", "role": "leader"}
ASKED = {
    "id": 4,
    "project": "default",
    "name": "vision",
    "display_name": "",
    "purpose": "",
    "members": [],
    "quota": {"max_gpus": None, "max_gpu_hours": None, "max_cost_month": None},
    "clusters": [],
    "requested_by": "ann",
    "status": "pending",
    "reason": "",
    "decided_by": None,
    "decided_at": None,
    "slice": None,
    "created_at": "2026-12-01T09:00:00Z",
}


def error(status: int) -> tuple[int, dict]:
    return status, {"status": status, "message": f"answered {status}"}


@dataclass
class Seen:
    method: str
    path: str
    key: str | None
    body: bytes


@dataclass
class Script:
    """What the server answers, request after request (the last answer again once they are used up)."""

    answers: list
    seen: list[Seen] = field(default_factory=list)

    def next(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def serve() -> Iterator:
    servers: list[ThreadingHTTPServer] = []

    def start(*answers) -> tuple[str, Script]:
        script = Script(list(answers))

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                script.seen.append(Seen(self.command, self.path, self.headers.get("Idempotency-Key"), body))
                answer = script.next()
                if answer == DROP:
                    self.close_connection = True
                    return
                status, data = answer
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = answer

            def log_message(self, *args) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/api/v1/", script

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_create_is_sent_again_with_its_one_key_after_a_503_a_502_and_no_answer(serve):
    url, script = serve(error(503), error(502), DROP, (201, ASKED))
    with EGSClient(url, "t", backoff=0) as client:
        asked = client.request_workspace("vision", purpose="x")
    assert asked.id == 4
    assert [(s.method, s.path) for s in script.seen] == [("POST", "/api/v1/workspace-requests")] * 4
    keys = {s.key for s in script.seen}
    assert len(keys) == 1 and None not in keys
    assert len({s.body for s in script.seen}) == 1


def test_every_create_sends_a_new_key_and_other_posts_none(serve):
    url, script = serve(error(422))
    with EGSClient(url, "t", backoff=0) as client:
        creates = [
            lambda: client.create_gpr("a", 60, gpus=1),
            lambda: client.create_gpr("a", 60, gpus=1),
            lambda: client.create_slice("a"),
            lambda: client.create_endpoint("a", "e", "vllm", model="m"),
            lambda: client.request_workspace("w"),
        ]
        for create in creates:
            with pytest.raises(EGSError) as refused:
                create()
            assert refused.value.status == 422
        keys = [s.key for s in script.seen]
        assert len(keys) == 5 and None not in keys and len(set(keys)) == 5  # one request each: a 422 is final
        with pytest.raises(EGSError):
            client.create_project("p")
    assert script.seen[-1].key is None


def test_a_get_is_sent_again_but_a_post_that_is_no_create_only_once(serve):
    url, script = serve(DROP, error(503), (200, HEALTH))
    with EGSClient(url, "t", backoff=0) as client:
        assert client.health().status == "ok"
    assert [s.method for s in script.seen] == ["GET"] * 3

    url, script = serve(error(503))
    with EGSClient(url, "t", backoff=0) as client, pytest.raises(EGSError) as refused:
        client.release_gpr(3)
    assert refused.value.status == 503 and len(script.seen) == 1

    url, script = serve(DROP)
    with EGSClient(url, "t", backoff=0) as client, pytest.raises(EGSConnectionError):
        client.cancel_gpr(3)
    assert len(script.seen) == 1


def test_tries_are_bounded(serve):
    url, script = serve(error(503))
    with EGSClient(url, "t", retries=2, backoff=0) as client, pytest.raises(EGSError) as refused:
        client.request_workspace("w")
    assert refused.value.status == 503 and len(script.seen) == 3
    assert len({s.key for s in script.seen}) == 1

    url, script = serve(DROP)
    with EGSClient(url, "t", retries=0) as client, pytest.raises(EGSConnectionError):
        client.health()
    assert len(script.seen) == 1


async def test_the_async_client_sends_a_create_again_with_its_one_key(serve):
    url, script = serve(DROP, error(503), (201, ASKED))
    async with AsyncEGSClient(url, "t", backoff=0) as client:
        asked = await client.request_workspace("vision")
    assert asked.id == 4
    assert len(script.seen) == 3 and len({s.key for s in script.seen}) == 1 and script.seen[0].key


DELAYS = {
    "the first try's backoff, with the least jitter": (1, None, 0.0, 0.25),
    "the first try's backoff, with the most jitter": (1, None, 1.0, 0.5),
    "doubled for each try": (3, None, 1.0, 2.0),
    "at least Retry-After": (1, "3", 0.0, 3.0),
    "a Retry-After that is a date is not read": (1, "Wed, 21 Oct 2026 07:28:00 GMT", 1.0, 0.5),
    "at most MAX_WAIT": (20, "600", 1.0, MAX_WAIT),
}


@pytest.mark.parametrize("tries, retry_after, spread, want", DELAYS.values(), ids=DELAYS.keys())
def test_the_wait_before_a_try(tries, retry_after, spread, want):
    assert Retries(most=30, backoff=0.5).delay(tries, retry_after, spread) == want


def test_what_is_tried_again():
    retries = Retries(most=2, backoff=0)
    assert retries.wait(True, 1, 503) == 0 and retries.wait(True, 2, None) == 0 and retries.wait(True, 1, 502) == 0
    assert retries.wait(True, 3, 503) is None  # no tries left
    assert retries.wait(True, 1, 500) is None and retries.wait(True, 1, 409) is None
    assert retries.wait(False, 1, 503) is None and retries.wait(False, 1, None) is None


@pytest.mark.parametrize("retries, backoff", [(-1, 0.5), (1.5, 0.5), (True, 0.5), (2, -1.0), (2, float("nan"))])
def test_bad_retry_settings_are_refused(retries, backoff):
    with pytest.raises(EGSConfigError):
        EGSClient("http://egs.example/api/v1/", "t", retries=retries, backoff=backoff)
