"""EGSClient: the REST API over a blocking httpx.Client."""

from __future__ import annotations

import os
import time

import httpx

from .api import Call, Operations, Pages, Result, read_answer
from .config import resolve_settings
from .transport import Retries, connection_error, headers


class EGSClient(Operations):
    """The EGS REST API v1, one method per operation (see ``Operations``).

    ``url`` defaults to $EGS_API_URL; ``token`` to $EGS_API_TOKEN, then $JUPYTERHUB_API_TOKEN.
    Errors raise ``EGSError`` with the service's status, message and field. A GET, or a create (sent
    with an Idempotency-Key of its own), that gets no answer or a 502/503 is sent again up to ``retries``
    times, after ``backoff`` seconds, doubling (transport.py).
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
    ):
        self.settings = resolve_settings(url, token, timeout, os.environ)
        self.retries = Retries(retries, backoff)
        self._http = httpx.Client(headers=headers(self.settings), timeout=timeout)

    @property
    def url(self) -> str:
        return self.settings.url

    def _send(self, call: Call[Result]) -> Result:
        url = self.settings.url + call.path
        tries = 0
        while True:
            tries += 1
            try:
                response = self._http.request(
                    call.method, url, params=call.params, json=call.body, headers=call.headers
                )
            except httpx.TransportError as e:
                wait = self.retries.wait(call.retried, tries, None)
                if wait is None:
                    raise connection_error(url, self.settings.timeout, e) from None
            else:
                status = response.status_code
                wait = self.retries.wait(call.retried, tries, status, response.headers.get("retry-after"))
                if wait is None:
                    return read_answer(call, url, status, response.headers.get("content-type", ""), response.content)
            time.sleep(wait)

    def _send_pages(self, pages: Pages[Result]) -> Result:
        answers = [self._send(pages.page(None, self.page_limit))]
        while not pages.done(answers):
            answers.append(self._send(pages.page(answers[-1]["next_cursor"], self.page_limit)))
        return pages.join(answers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EGSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EGSClient({self.settings.url!r})"
