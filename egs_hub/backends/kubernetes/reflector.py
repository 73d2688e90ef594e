"""Keeps a fresh copy of a kind of a cluster's objects: list once, then watch from the list's resourceVersion.

Vocabulary: a *relist* is a full list that replaces the copy; a *watch* applies
ADDED / MODIFIED / DELETED events and ends when the server closes it (after
``watch_timeout`` seconds), after which it resumes from the last resourceVersion
seen. A watch that fails or answers 410 Gone is followed by a relist at once;
a relist that fails sets ``error`` and is retried with exponential backoff until
one succeeds, which clears ``error``. Objects are kept by (namespace, name);
namespace None for cluster-scoped kinds.

``NodeReflector`` keeps the Nodes of the inventory (backend.py);
``GPRResourceAPI.reflector`` the GPR custom resources in every namespace (gpr_api.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from .api import API_ERRORS, describe_error, json_of

log = logging.getLogger(__name__)


class Reflector:
    """``list_objects`` is a kubernetes_asyncio list call (also used to watch), called with ``arguments``;
    ``what`` names the objects in logs and errors."""

    def __init__(
        self,
        list_objects: Callable[..., Awaitable],
        arguments: dict,
        what: str,
        on_change: Callable[[], None],
        *,
        request_timeout: float,
        watch_timeout: int,
        backoff: tuple[float, float] = (0.5, 30.0),
    ):
        self.list_objects = list_objects
        self.arguments = arguments
        self.what = what
        self.on_change = on_change
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.objects: dict[tuple[str | None, str], dict] = {}
        self.error: str | None = None
        self.resource_version: str | None = None
        self.listed = False
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """List (raising what the API raises), then keep watching in the background."""
        await self.relist()
        self._task = asyncio.ensure_future(self._run())

    def start_listing(self) -> None:
        """List in the background until a list succeeds (``error`` says why one fails), then keep watching."""
        self._task = asyncio.ensure_future(self._list_then_run())

    async def _list_then_run(self) -> None:
        await self._relist_until_done()
        await self._run()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def relist(self) -> None:
        listed = await json_of(
            await self.list_objects(**self.arguments, _preload_content=False, _request_timeout=self.request_timeout)
        )
        self.objects = {_key(o): o for o in listed.get("items") or []}
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.error = None
        self.listed = True
        self.on_change()

    async def watch_once(self) -> None:
        """Apply events until the server ends the watch; raises what the API raises (410 included)."""
        stream = watch.Watch().stream(
            self.list_objects,
            **self.arguments,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout,
            _request_timeout=self.watch_timeout + self.request_timeout,
        )
        async with stream:
            async for event in stream:
                obj = event["raw_object"]
                if event["type"] == "DELETED":
                    self.objects.pop(_key(obj), None)
                else:
                    self.objects[_key(obj)] = obj
                self.resource_version = obj["metadata"]["resourceVersion"]
                self.on_change()

    async def _run(self) -> None:
        while True:
            try:
                await self.watch_once()
                continue
            except API_ERRORS as e:
                if not (isinstance(e, ApiException) and e.status == 410):
                    log.info("watch of %s ended: %s; listing again", self.what, describe_error(e))
            except RuntimeError as e:
                # aiohttp's "Connection closed." when the server goes away in the middle of a watch.
                log.warning("watch of %s broke off: %s; listing again", self.what, e)
            await self._relist_until_done()

    async def _relist_until_done(self) -> None:
        delay, longest = self.backoff
        while True:
            try:
                await self.relist()
                return
            except API_ERRORS as e:
                self.error = describe_error(e)
                log.warning("cannot list %s (%s); trying again in %.1f s", self.what, self.error, delay)
            except Exception as e:
                # Not an API error: a response that is no list. Keep trying rather than stop watching.
                self.error = f"unexpected answer to listing {self.what}: {e!r}"
                log.exception("cannot list %s; trying again in %.1f s", self.what, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)


def _key(obj: dict) -> tuple[str | None, str]:
    meta = obj["metadata"]
    return meta.get("namespace"), meta["name"]


class NodeReflector(Reflector):
    """The Nodes matching ``label_selector``."""

    def __init__(self, core: client.CoreV1Api, label_selector: str, on_change: Callable[[], None], **options):
        super().__init__(core.list_node, {"label_selector": label_selector}, "nodes", on_change, **options)
