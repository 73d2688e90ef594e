"""A slice set up on, and removed from, one cluster: namespaces, grants, ServiceAccount, RBAC and GPU quota.

Vocabulary as in slice_objects.py, which decides; this module reads the
cluster, asks it, and applies the answer. Every call is idempotent: it reads
what is there and makes it match (a call after a failed one finishes its work),
and it checks every wanted namespace before it changes anything.

| call             | when the service calls it                                          |
|------------------|--------------------------------------------------------------------|
| ensure_slice     | a slice gets namespaces on the cluster, or they or its GPUs change |
| set_slice_gpus   | the GPUs the slice holds on the cluster change (entry, exit)       |
| remove_slice     | the slice is deleted, or no longer has namespaces on the cluster   |
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from . import slice_objects as so
from .api import json_of
from .nodes import SLICE_LABEL
from .roles import NamespaceGrant, RoleTemplate


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


class SliceObjects:
    """The calls for the managed kinds: ``CoreV1Api`` or ``RbacAuthorizationV1Api`` by kind, plain dicts out."""

    def __init__(self, api: client.ApiClient, request_timeout: float):
        self.core = client.CoreV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.timeout = request_timeout

    def _call(self, verb: str, kind: str):
        owner = self.rbac if kind.startswith("Role") else self.core
        return getattr(owner, f"{verb}_namespaced_{_snake(kind)}")

    async def read(self, obj: Mapping) -> dict | None:
        meta = obj["metadata"]
        try:
            call = self._call("read", obj["kind"])
            return await json_of(
                await call(meta["name"], meta["namespace"], _preload_content=False, _request_timeout=self.timeout)
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def apply(self, desired: Mapping) -> bool:
        """Create the object, or replace it where it differs; whether anything was written."""
        meta = desired["metadata"]
        current = await self.read(desired)
        if current is None:
            await self._call("create", desired["kind"])(meta["namespace"], dict(desired), _request_timeout=self.timeout)
            return True
        if not so.differs(desired, current):
            return False
        body = {**desired, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
        await self._call("replace", desired["kind"])(
            meta["name"], meta["namespace"], body, _request_timeout=self.timeout
        )
        return True

    async def delete(self, obj: Mapping) -> None:
        meta = obj["metadata"]
        try:
            await self._call("delete", obj["kind"])(meta["name"], meta["namespace"], _request_timeout=self.timeout)
        except ApiException as e:
            if e.status != 404:
                raise

    async def grant(self, binding: Mapping) -> None:
        """Make a grant's RoleBinding: created before anything is read in the namespace (until it is there, its
        rights are not the service's), else made to match."""
        meta = binding["metadata"]
        try:
            await self.rbac.create_namespaced_role_binding(
                meta["namespace"], dict(binding), _request_timeout=self.timeout
            )
        except ApiException as e:
            if e.status != 409:
                raise
            await self.apply(binding)

    async def found(self, slice_name: str, namespace: str) -> list[dict]:
        """The slice's managed objects in the namespace, each with its kind."""
        found = []
        for kind in so.MANAGED_KINDS:
            listed = await json_of(
                await self._call("list", kind)(
                    namespace,
                    label_selector=so.managed_selector(slice_name),
                    _preload_content=False,
                    _request_timeout=self.timeout,
                )
            )
            found += [{**item, "kind": kind} for item in listed.get("items") or []]
        return found


async def _read_namespace(core: client.CoreV1Api, name: str, timeout: float) -> dict | None:
    try:
        return await json_of(await core.read_namespace(name, _preload_content=False, _request_timeout=timeout))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


async def snapshot(objects: SliceObjects, slice_name: str, wanted: Sequence[str]) -> dict[str, dict]:
    """The wanted namespaces that exist and every namespace labelled for the slice, by name."""
    core = objects.core
    listed = await json_of(
        await core.list_namespace(
            label_selector=f"{SLICE_LABEL}={slice_name}", _preload_content=False, _request_timeout=objects.timeout
        )
    )
    existing = {n["metadata"]["name"]: n for n in listed.get("items") or []}
    for name in wanted:
        if name not in existing:
            obj = await _read_namespace(core, name, objects.timeout)
            if obj is not None:
                existing[name] = obj
    return existing


async def _release(
    objects: SliceObjects, slice_name: str, plan: so.NamespacePlan, grants: Sequence[NamespaceGrant]
) -> None:
    """Empty adopted namespaces of what egs-hub put there (the grants last) and unlabel them; delete the created
    ones."""
    for name in plan.release:
        for obj in so.deletion_order(await objects.found(slice_name, name), grants):
            await objects.delete(obj)
        await objects.core.patch_namespace(name, so.release_patch(), _request_timeout=objects.timeout)
    for name in plan.delete:
        try:
            await objects.core.delete_namespace(name, _request_timeout=objects.timeout)
        except ApiException as e:
            if e.status != 404:
                raise


async def ensure_slice(
    api: client.ApiClient,
    slice_name: str,
    namespaces: Sequence[str],
    templates: Mapping[str, RoleTemplate],
    quota: Mapping[str, int],
    grants: Sequence[NamespaceGrant] = (),
    *,
    request_timeout: float = 10.0,
) -> so.NamespacePlan:
    """Make the cluster hold the slice as asked; SliceConflict (nothing changed) when a namespace cannot be used.

    Namespaces that were the slice's and are no longer wanted are released or deleted, and managed objects
    no longer wanted (a dropped template, a new home namespace) are deleted. Returns what was done.
    """
    objects = SliceObjects(api, request_timeout)
    granted = so.grant_bindings(slice_name, namespaces, grants)
    desired = so.managed_objects(slice_name, namespaces, templates, quota)
    # 1. snapshot
    existing = await snapshot(objects, slice_name, namespaces)
    # 2. decide
    plan = so.plan_namespaces(slice_name, namespaces, existing)
    if plan.conflicts:
        raise so.SliceConflict(f"slice {slice_name}: " + "; ".join(plan.conflicts))
    # 3. act
    for name in plan.create:
        try:
            await objects.core.create_namespace(so.new_namespace(slice_name, name), _request_timeout=request_timeout)
        except ApiException as e:
            if e.status != 409:  # created since the snapshot: adopt it
                raise
            await objects.core.patch_namespace(name, so.adopt_patch(slice_name), _request_timeout=request_timeout)
    for name in plan.adopt:
        await objects.core.patch_namespace(name, so.adopt_patch(slice_name), _request_timeout=request_timeout)
    for binding in granted:
        await objects.grant(binding)
    for obj in desired:
        await objects.apply(obj)
    for name in namespaces:
        for obj in so.stale(granted + desired, await objects.found(slice_name, name)):
            await objects.delete(obj)
    await _release(objects, slice_name, plan, grants)
    return plan


async def set_slice_gpus(
    api: client.ApiClient,
    slice_name: str,
    namespaces: Sequence[str],
    quota: Mapping[str, int],
    *,
    request_timeout: float = 10.0,
) -> None:
    """Set the GPU quota in each of the slice's namespaces (set up by ensure_slice) to ``quota`` (resource ->
    count); none while it is empty."""
    objects = SliceObjects(api, request_timeout)
    for name in namespaces:
        obj = so.gpu_quota(slice_name, name, quota)
        await (objects.apply(obj) if quota else objects.delete(obj))


async def remove_slice(
    api: client.ApiClient,
    slice_name: str,
    grants: Sequence[NamespaceGrant] = (),
    *,
    request_timeout: float = 10.0,
) -> so.NamespacePlan:
    """Delete the namespaces egs-hub created for the slice; release the adopted ones. Returns what was done."""
    objects = SliceObjects(api, request_timeout)
    plan = so.plan_namespaces(slice_name, (), await snapshot(objects, slice_name, ()))
    await _release(objects, slice_name, plan, grants)
    return plan
