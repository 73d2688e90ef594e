"""AsyncEGSClient: the REST API over an httpx.AsyncClient."""

from __future__ import annotations

import os

import httpx

from .api import Call, Operations, Pages, Result, read_answer
from .config import resolve_settings
from .transport import connection_error, headers


class AsyncEGSClient(Operations):
    """The EGS REST API v1 for asyncio: the methods of ``EGSClient``, each to be awaited.

    ``url`` defaults to $EGS_API_URL; ``token`` to $EGS_API_TOKEN, then $JUPYTERHUB_API_TOKEN.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0):
        self.settings = resolve_settings(url, token, timeout, os.environ)
        self._http = httpx.AsyncClient(headers=headers(self.settings), timeout=timeout)

    @property
    def url(self) -> str:
        return self.settings.url

    async def _send(self, call: Call[Result]) -> Result:
        url = self.settings.url + call.path
        try:
            response = await self._http.request(call.method, url, params=call.params, json=call.body)
        except httpx.TransportError as e:
            raise connection_error(url, self.settings.timeout, e) from None
        return read_answer(call, url, response.status_code, response.headers.get("content-type", ""), response.content)

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
