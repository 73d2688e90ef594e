"""Keeps a fresh copy of a cluster's Nodes: list once, then watch from the list's resourceVersion.

Vocabulary: a *relist* is a full list that replaces the copy; a *watch* applies
ADDED / MODIFIED / DELETED events and ends when the server closes it (after
``watch_timeout`` seconds), after which it resumes from the last resourceVersion
seen. A watch that fails or answers 410 Gone is followed by a relist at once;
a relist that fails sets ``error`` and is retried with exponential backoff until
one succeeds, which clears ``error``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from .api import API_ERRORS, describe_error, json_of

log = logging.getLogger(__name__)


class NodeReflector:
    def __init__(
        self,
        core: client.CoreV1Api,
        label_selector: str,
        on_change: Callable[[], None],
        *,
        request_timeout: float,
        watch_timeout: int,
        backoff: tuple[float, float] = (0.5, 30.0),
    ):
        self.core = core
        self.label_selector = label_selector
        self.on_change = on_change
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.objects: dict[str, dict] = {}
        self.error: str | None = None
        self.resource_version: str | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """List the nodes (raising what the API raises), then keep watching in the background."""
        await self.relist()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def relist(self) -> None:
        listed = await json_of(
            await self.core.list_node(
                label_selector=self.label_selector, _preload_content=False, _request_timeout=self.request_timeout
            )
        )
        self.objects = {o["metadata"]["name"]: o for o in listed.get("items") or []}
        self.resource_version = listed["metadata"]["resourceVersion"]
        self.error = None
        self.on_change()

    async def watch_once(self) -> None:
        """Apply events until the server ends the watch; raises what the API raises (410 included)."""
        stream = watch.Watch().stream(
            self.core.list_node,
            label_selector=self.label_selector,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout,
            _request_timeout=self.watch_timeout + self.request_timeout,
        )
        async with stream:
            async for event in stream:
                obj = event["raw_object"]
                name = obj["metadata"]["name"]
                if event["type"] == "DELETED":
                    self.objects.pop(name, None)
                else:
                    self.objects[name] = obj
                self.resource_version = obj["metadata"]["resourceVersion"]
                self.on_change()

    async def _run(self) -> None:
        while True:
            try:
                await self.watch_once()
                continue
            except API_ERRORS as e:
                if not (isinstance(e, ApiException) and e.status == 410):
                    log.info("watch of nodes ended: %s; listing again", describe_error(e))
            await self._relist_until_done()

    async def _relist_until_done(self) -> None:
        delay, longest = self.backoff
        while True:
            try:
                await self.relist()
                return
            except API_ERRORS as e:
                self.error = describe_error(e)
                log.warning("cannot list nodes (%s); trying again in %.1f s", self.error, delay)
            except Exception as e:
                # Not an API error: a response that is no NodeList. Keep trying rather than stop watching.
                self.error = f"unexpected answer to listing nodes: {e!r}"
                log.exception("cannot list nodes; trying again in %.1f s", delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)
