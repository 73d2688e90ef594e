"""Slack notifications: a real tornado server on a loopback port plays the incoming webhook."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port
from tornado.web import Application, RequestHandler

from egs_hub.core.alerts import Alert, AlertChange, AlertKind
from egs_hub.service.notify import NotifyError, SlackNotifier, format_alert

SECRET_PATH = "/services/T000/B000/s3cr3t"


@dataclass
class FakeSlack:
    """The webhook at ``url(answer)``: "ok" answers 200, "broken" 500, "slow" only once the test ends."""

    port: int
    received: list[tuple[str, dict]] = field(default_factory=list)  # (content type, JSON body) per POST
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, answer: str) -> str:
        return f"http://127.0.0.1:{self.port}{SECRET_PATH}-{answer}"


class WebhookHandler(RequestHandler):
    def initialize(self, slack: FakeSlack) -> None:
        self.slack = slack

    async def post(self, answer: str) -> None:
        self.slack.received.append((self.request.headers["Content-Type"], json.loads(self.request.body)))
        if answer == "broken":
            self.set_status(500)
            self.write("no_service")
            return
        if answer == "slow":
            await self.slack.release.wait()
        self.write("ok")


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    sock, port = bind_unused_port()
    fake = FakeSlack(port)
    server = HTTPServer(Application([(rf"{SECRET_PATH}-(\w+)", WebhookHandler, {"slack": fake})]))
    server.add_sockets([sock])
    yield fake
    fake.release.set()
    server.stop()
    await server.close_all_connections()


def closed_port_url() -> str:
    sock, port = bind_unused_port()
    sock.close()
    return f"http://127.0.0.1:{port}{SECRET_PATH}-ok"


async def test_send_posts_the_text_as_json(slack: FakeSlack):
    await SlackNotifier(slack.url("ok")).send("GPU 3 on node-a is at 91 °C")
    assert slack.received == [("application/json", {"text": "GPU 3 on node-a is at 91 °C"})]


FAILURES = {
    "a 500 answer": ("broken", "answered HTTP 500 (no_service)"),
    "no answer within the timeout": ("slow", "did not answer within 0.2 s"),
    "a closed port": (None, "could not be reached (Connection refused)"),
}


@pytest.mark.parametrize(("answer", "want_text"), FAILURES.values(), ids=FAILURES.keys())
async def test_send_failure_names_the_host_not_the_url(slack: FakeSlack, answer: str | None, want_text: str):
    url = closed_port_url() if answer is None else slack.url(answer)
    host = url.split("/")[2]
    with pytest.raises(NotifyError) as raised:
        await SlackNotifier(url, timeout=0.2).send("hello")
    message = str(raised.value)
    assert message.startswith(f"Slack webhook at {host} ")
    assert want_text in message  # want_text: what happened, in words
    assert "/services" not in message
    assert "s3cr3t" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_webhook_url_must_be_http():
    with pytest.raises(ValueError, match="webhook_url must be an http") as raised:
        SlackNotifier("hooks.slack.com/services/T000/B000/s3cr3t")
    assert "s3cr3t" not in str(raised.value)


RAISED_AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CLEARED_AT = datetime(2026, 3, 2, 9, 20, tzinfo=UTC)
HOT = Alert(
    AlertKind.TEMPERATURE,
    "GPU-1234",
    "node-a",
    91.0,
    85.0,
    "GPU 3 on node-a is at 91 °C (alert at 85 °C, clears below 80 °C)",
    RAISED_AT,
)
LOST = Alert(AlertKind.GPU_LOST, "GPU-9", None, 75.0, 60.0, "GPU GPU-9 has not reported for <75 s> & more", RAISED_AT)


@dataclass(frozen=True)
class FormatCase:
    change: AlertChange
    slice: str | None
    gpr_id: int | None
    want: str  # the whole Slack line


FORMATS = {
    "raise with workspace and GPR": FormatCase(
        AlertChange(HOT, True, RAISED_AT),
        "team-a",
        42,
        want=":red_circle: *temperature* raised on GPU GPU-1234 on node-a (workspace team-a, GPR 42) "
        "at 2026-03-02 09:00:00 UTC: GPU 3 on node-a is at 91 °C (alert at 85 °C, clears below 80 °C)",
    ),
    "clear recalls the raise": FormatCase(
        AlertChange(HOT, False, CLEARED_AT),
        None,
        None,
        want=":white_check_mark: *temperature* cleared on GPU GPU-1234 on node-a at 2026-03-02 09:20:00 UTC "
        "(raised at 2026-03-02 09:00:00 UTC: GPU 3 on node-a is at 91 °C (alert at 85 °C, clears below 80 °C))",
    ),
    "no node, GPR only, mrkdwn escaped": FormatCase(
        AlertChange(LOST, True, RAISED_AT),
        None,
        7,
        want=":red_circle: *gpu-lost* raised on GPU GPU-9 (GPR 7) at 2026-03-02 09:00:00 UTC: "
        "GPU GPU-9 has not reported for &lt;75 s&gt; &amp; more",
    ),
}


@pytest.mark.parametrize("case", FORMATS.values(), ids=FORMATS.keys())
def test_format_alert(case: FormatCase):
    assert format_alert(case.change, slice=case.slice, gpr_id=case.gpr_id) == case.want


async def test_formatted_alert_reaches_slack(slack: FakeSlack):
    text = format_alert(AlertChange(HOT, True, RAISED_AT), slice="team-a")
    await SlackNotifier(slack.url("ok")).send(text)
    assert slack.received == [("application/json", {"text": text})]
