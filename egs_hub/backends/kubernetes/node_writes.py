"""Node writes made from what was read lose no one else's change (issue 46, item 6).

A taint patch replaces the node's whole ``spec.taints`` (objects.py), and a holders annotation its whole
list (shares.py), so a patch made from a node read earlier would drop what another controller wrote in
between (the cluster autoscaler's ``ToBeDeleted`` taint, say). Each such patch carries the
``resourceVersion`` of the node it was made from: the API server refuses it (409 Conflict) when the node
changed since, and the node is read again and the patch made again from it, up to ATTEMPTS times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .api import json_of

ATTEMPTS = 5  # reads and patches of one node before its 409 is the caller's error
CONFLICT = 409


def with_version(patch: Mapping, node: Mapping) -> dict:
    """``patch`` with the node's resourceVersion as its precondition."""
    metadata = {**(patch.get("metadata") or {}), "resourceVersion": node["metadata"]["resourceVersion"]}
    return {**patch, "metadata": metadata}


async def patch_node(core: client.CoreV1Api, node: dict, patch_of: Callable[[dict], Mapping | None], **options) -> dict:
    """Patch ``node`` with what ``patch_of`` makes of it (None: nothing to write), made again from a fresh
    read on each 409; the node as written (or as read, when nothing was). ``options`` go to each call
    (``_request_timeout``)."""
    name, attempt = node["metadata"]["name"], 1
    while True:
        patch = patch_of(node)
        if patch is None:
            return node
        try:
            return await json_of(
                await core.patch_node(name, with_version(patch, node), _preload_content=False, **options)
            )
        except ApiException as e:
            if e.status != CONFLICT or attempt == ATTEMPTS:
                raise
        attempt += 1
        node = await json_of(await core.read_node(name, _preload_content=False, **options))
