"""AsyncEGSClient: the REST API over an httpx.AsyncClient."""

from __future__ import annotations

import asyncio
import os

import httpx

from .api import Call, Operations, Pages, Result, read_answer
from .config import resolve_settings
from .transport import Retries, connection_error, headers


class AsyncEGSClient(Operations):
    """The EGS REST API v1 for asyncio: the methods of ``EGSClient``, each to be awaited.

    ``url`` defaults to $EGS_API_URL; ``token`` to $EGS_API_TOKEN, then $JUPYTERHUB_API_TOKEN;
    ``retries`` and ``backoff`` as ``EGSClient``'s.
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
        self._http = httpx.AsyncClient(headers=headers(self.settings), timeout=timeout)

    @property
    def url(self) -> str:
        return self.settings.url

    async def _send(self, call: Call[Result]) -> Result:
        url = self.settings.url + call.path
        tries = 0
        while True:
            tries += 1
            try:
                response = await self._http.request(
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
            await asyncio.sleep(wait)

    async def _send_pages(self, pages: Pages[Result]) -> Result:
        answers = [await self._send(pages.page(None, self.page_limit))]
        while not pages.done(answers):
            answers.append(await self._send(pages.page(answers[-1]["next_cursor"], self.page_limit)))
        return pages.join(answers)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncEGSClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncEGSClient({self.settings.url!r})"
