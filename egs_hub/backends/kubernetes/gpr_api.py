"""The GPR custom resources of one cluster through its API: watch them, patch their finalizers and status,
record Events about them. The dicts come from gpr_resources.py; what to do is service/gpr_sync.py's.

Every call raises what the API raises (api.API_ERRORS), for the caller to log and try again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from kubernetes_asyncio import client

from .api import json_of
from .events import Notice, create_event, object_event
from .gpr_resources import GROUP, PLURAL, VERSION, ResourceRef
from .reflector import Reflector

MERGE_PATCH = "application/merge-patch+json"


class GPRResourceAPI:
    def __init__(self, api: client.ApiClient, *, request_timeout: float, watch_timeout: int):
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout

    def reflector(self, on_change: Callable[[], None]) -> Reflector:
        """A reflector of the GPR resources in every namespace (not started)."""
        return Reflector(
            self.custom.list_cluster_custom_object,
            {"group": GROUP, "version": VERSION, "plural": PLURAL},
            "GPR resources",
            on_change,
            request_timeout=self.request_timeout,
            watch_timeout=self.watch_timeout,
        )

    async def patch(self, ref: ResourceRef, patch: dict) -> dict:
        """Merge-patch the resource (its metadata: finalizers)."""
        return await self._merge_patch(self.custom.patch_namespaced_custom_object, ref, patch)

    async def patch_status(self, ref: ResourceRef, patch: dict) -> dict:
        """Merge-patch the resource's status subresource."""
        return await self._merge_patch(self.custom.patch_namespaced_custom_object_status, ref, patch)

    async def _merge_patch(self, call: Callable, ref: ResourceRef, patch: dict) -> dict:
        return await json_of(
            await call(
                GROUP,
                VERSION,
                ref.namespace,
                PLURAL,
                ref.name,
                patch,
                _content_type=MERGE_PATCH,
                _preload_content=False,
                _request_timeout=self.request_timeout,
            )
        )

    async def record_event(self, ref: ResourceRef, notice: Notice, now: datetime) -> None:
        """One Event about the resource, in its namespace."""
        event = object_event(ref.involved_object(), notice, now)
        await create_event(self.api, event, request_timeout=self.request_timeout)
