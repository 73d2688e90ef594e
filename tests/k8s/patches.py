"""PATCH bodies applied the way the API server applies them, by Content-Type.

Vocabulary: a *merge patch* (``application/merge-patch+json``, RFC 7386) merges
mappings, deletes keys set to null and replaces lists; a *strategic merge patch*
(``application/strategic-merge-patch+json``, what kubernetes_asyncio sends for a
dict body) is a merge patch whose lists of a few known fields are merged by a
key; a *JSON patch* (``application/json-patch+json``, RFC 6902) is a list of
operations.

Emulates: the three, with strategic merge keys for the lists in ``MERGE_KEYS``
(every other list is replaced, which is what the API does for ``spec.taints``
and ``spec.tolerations``: they declare no patch strategy).
Does not emulate: server-side apply (``application/apply-patch+yaml``) and the
strategic-merge directives (``$patch``, ``$retainKeys``, ``$setElementOrder/...``,
``$deleteFromPrimitiveList/...``): a body using one is refused, not misapplied.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import jsonpatch

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# List fields merged by a key in a strategic merge patch (a subset of k8s.io/api's patchMergeKey tags).
MERGE_KEYS = {"conditions": "type", "containers": "name", "initContainers": "name", "volumes": "name", "env": "name"}


class PatchError(ValueError):
    """The body cannot be applied; ``status`` is the HTTP code the server answers with."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


def _merge(target: object, patch: object, strategic: bool, field: str = "") -> object:
    if not isinstance(patch, Mapping):
        if strategic and isinstance(patch, list) and isinstance(target, list) and field in MERGE_KEYS:
            return _merge_list(target, patch, MERGE_KEYS[field])
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            raise PatchError(f"strategic merge directive {key!r} is not supported by the emulator", status=415)
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value, strategic, key)
    return result


def _merge_list(target: list, patch: list, key: str) -> list:
    merged = [copy.deepcopy(item) for item in target]
    for item in patch:
        position = next((i for i, old in enumerate(merged) if old.get(key) == item.get(key)), None)
        if position is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[position] = _merge(merged[position], item, strategic=True)
    return merged


def apply_patch(obj: Mapping, body: object, content_type: str) -> dict:
    """A new object: ``obj`` with ``body`` applied; PatchError when it cannot be."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == JSON_PATCH:
        if not isinstance(body, list):
            raise PatchError("a JSON patch must be a list of operations")
        try:
            return jsonpatch.apply_patch(copy.deepcopy(dict(obj)), body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            raise PatchError(f"JSON patch does not apply: {e}") from None
    if kind in (MERGE, STRATEGIC):
        if not isinstance(body, Mapping):
            raise PatchError(f"a {kind} body must be a JSON object")
        return _merge(obj, body, strategic=kind == STRATEGIC)
    raise PatchError(f"unsupported patch Content-Type {content_type!r}", status=415)
