"""Alert notifications to Slack through an incoming webhook.

Vocabulary: a *webhook URL* is the Slack incoming-webhook address; its path is
a secret, so messages and errors name only its *host*. A *notification* is one
line of Slack text for one alert change (see ``egs_hub.core.alerts``).
"""

from __future__ import annotations

import json
from datetime import datetime
from urllib.parse import urlsplit

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.simple_httpclient import HTTPTimeoutError

from egs_hub.core.alerts import AlertChange, name_gpu_by_uuid


class NotifyError(Exception):
    """A notification was not delivered; ``str(e)`` names the webhook host, never its URL."""


class SlackNotifier:
    """Posts ``{"text": ...}`` to one Slack incoming webhook; ``timeout`` (seconds) bounds connecting and answering."""

    def __init__(self, webhook_url: str, timeout: float = 10.0):
        parts = urlsplit(webhook_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("webhook_url must be an http(s) URL, like https://hooks.slack.com/services/...")
        self._webhook_url = webhook_url  # holds a secret: never log it
        self.timeout = timeout
        self.host = parts.hostname + (f":{parts.port}" if parts.port else "")

    async def send(self, text: str) -> None:
        """Post ``text``; raise NotifyError on a connection error, a timeout or a non-2xx answer."""
        request = HTTPRequest(
            self._webhook_url,
            method="POST",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"text": text}),
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
            follow_redirects=False,
        )
        try:
            await AsyncHTTPClient().fetch(request)
        # `from None`: the chained errors are not ours to vouch for, and the URL must not reach the logs.
        except HTTPTimeoutError:
            raise NotifyError(f"Slack webhook at {self.host} did not answer within {self.timeout:g} s") from None
        except HTTPClientError as e:
            raise NotifyError(f"Slack webhook at {self.host} {describe_failure(e)}") from None
        except OSError as e:
            raise NotifyError(
                f"Slack webhook at {self.host} could not be reached ({e.strerror or e}); check the network"
            ) from None


def describe_failure(error: HTTPClientError) -> str:
    """What went wrong, e.g. 'answered HTTP 404 (no_service)': the status and the start of Slack's answer."""
    if error.response is None:
        return f"gave no answer ({error.message})"
    body = error.response.body.decode(errors="replace").strip()[:200]
    return f"answered HTTP {error.code}" + (f" ({body})" if body else "")


def format_alert(change: AlertChange, *, slice: str | None = None, gpr_id: int | str | None = None) -> str:
    """One line of Slack text for ``change``; ``slice`` and ``gpr_id`` say whose GPUs these are, when known."""
    alert = change.alert
    where = name_gpu_by_uuid(alert.uuid, alert.node)
    holders = []
    if slice is not None:
        holders.append(f"workspace {slice}")
    if gpr_id is not None:
        holders.append(f"GPR {gpr_id}")
    if holders:
        where += f" ({', '.join(holders)})"
    if change.raised:
        line = f":red_circle: *{alert.kind}* raised on {where} at {timestamp(change.time)}: {alert.message}"
    else:
        line = (
            f":white_check_mark: *{alert.kind}* cleared on {where} at {timestamp(change.time)} "
            f"(raised at {timestamp(alert.raised_at)}: {alert.message})"
        )
    return escape(line)


def timestamp(time: datetime) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def escape(text: str) -> str:
    """Slack mrkdwn escapes: only &, < and > have meaning in plain text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
