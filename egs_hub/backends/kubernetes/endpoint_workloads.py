"""Inference endpoints' workloads on one cluster (endpoint_objects.py says what they are): each pass
makes what is wanted, rewrites what changed, deletes what no replica keeps, and says how each replica is.

A pass costs one list each of the endpoint Deployments, Services and pods (and InferenceServices where
KServe is installed), by label across namespaces, whatever the number of endpoints; a write only for a
wanted object missing or changed (its SPEC_HASH). A cluster with nothing wanted is read until a pass
finds nothing of egs-hub's there, then no more (one that cannot be read then is tried again every
IDLE_RETRY seconds, not at every pass). An API that cannot be reached fails no replica: each stays
``starting`` with the error as its message, and the next pass tries again.

The requests waiting in a ready pod's own queue (vLLM's ``vllm:num_requests_waiting``) are read from
its metrics page through the API server's pod proxy (``pods/proxy``), so the service needs no route to
the pods.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ...core.endpoints import queued_in
from . import endpoint_objects as eo
from .api import API_ERRORS, describe_error, json_of, text_of
from .backend import ClusterUnavailable
from .nodes import GPR_LABEL

log = logging.getLogger(__name__)
Key = tuple[int, int]  # (endpoint id, GPR id)
ObjectKey = tuple[str, str, str]  # (kind, namespace, name)
IDLE_RETRY = 30.0  # seconds between reads of a cluster that keeps nothing and could not be read


@dataclass(frozen=True)
class Wanted:
    """A replica as it should run on the cluster: its ``workload`` (a Deployment or InferenceService),
    the endpoint's ``service`` (None for an InferenceService: KServe makes its own), and where its
    runtime says how many requests wait (``metrics_path``)."""

    key: Key
    workload: Mapping
    service: Mapping | None = None
    metrics_path: str | None = None


def _key(obj: Mapping) -> ObjectKey:
    meta = obj["metadata"]
    return obj["kind"], meta["namespace"], meta["name"]


class EndpointWorkloads:
    def __init__(self, cluster: str, api: Callable[[], Awaitable[client.ApiClient]], request_timeout: float = 10.0):
        """``api``: the cluster backend's client (KubernetesBackend.api_client)."""
        self.cluster = cluster
        self.api = api
        self.options = {"_preload_content": False, "_request_timeout": request_timeout}
        self._kserve = False  # KServe was found installed (it is asked again until it is)
        self._clean = False  # the last pass found nothing of egs-hub's and wanted nothing
        self._idle_retry_at = 0.0  # with nothing wanted, the cluster is not read before then (time.monotonic)

    async def has_kserve(self) -> bool:
        """Whether the cluster serves InferenceServices (its CRD is installed); API_ERRORS when unreachable."""
        if not self._kserve:
            api = await self.api()
            groups = await json_of(await client.ApisApi(api).get_api_versions(**self.options))
            self._kserve = any(
                group.get("name") == eo.KSERVE_GROUP
                and any(v.get("version") == eo.KSERVE_VERSION for v in group.get("versions") or [])
                for group in groups.get("groups") or []
            )
        return self._kserve

    async def check(self, wanted: Sequence[Wanted]) -> dict[Key, eo.Seen]:
        """One pass: apply ``wanted``, prune the rest, and say how each wanted replica is."""
        if not wanted and (self._clean or time.monotonic() < self._idle_retry_at):
            return {}
        try:
            api = await self.api()
            found, pods = await self._list(api)
        except (*API_ERRORS, ClusterUnavailable) as e:  # ClusterUnavailable: its kubeconfig cannot be loaded
            self._idle_retry_at = time.monotonic() + IDLE_RETRY
            return self._cannot_read(wanted, str(e) if isinstance(e, ClusterUnavailable) else describe_error(e))
        seen: dict[Key, eo.Seen] = {}
        keep: set[ObjectKey] = set()
        for replica in wanted:
            objects = [replica.workload, *([replica.service] if replica.service is not None else [])]
            keep |= {_key(obj) for obj in objects}
            try:
                for obj in objects:
                    found[_key(obj)] = await self._apply(api, obj, found.get(_key(obj)))
            except API_ERRORS as e:
                seen[replica.key] = eo.Seen("failed" if _refused(e) else "starting", self._said(e, replica.workload))
                continue
            workload = replica.workload
            mine = pods.get((workload["metadata"]["namespace"], workload["metadata"]["labels"][GPR_LABEL]), [])
            seen[replica.key] = eo.seen(found[_key(workload)], mine)
        stale = [obj for key, obj in found.items() if key not in keep]
        for obj in stale:
            await self._delete(api, obj)
        self._clean = not wanted and not found
        return seen

    async def queued(self, workload: Mapping, seen: eo.Seen, metrics_path: str) -> int:
        """The requests waiting in the queues of a replica's ready pods (a pod that does not answer: 0)."""
        api = await self.api()
        namespace = workload["metadata"]["namespace"]
        total = 0
        for pod in seen.ready_pods:
            try:
                call = client.CoreV1Api(api).connect_get_namespaced_pod_proxy_with_path(
                    f"{pod}:{eo.PORT}", namespace, metrics_path.lstrip("/"), **self.options
                )
                total += queued_in(await text_of(await call))
            except API_ERRORS as e:
                log.info("cluster %s: reading pod %s/%s's queue: %s", self.cluster, namespace, pod, describe_error(e))
        return total

    def _cannot_read(self, wanted: Sequence[Wanted], why: str) -> dict[Key, eo.Seen]:
        message = f"cannot read cluster {self.cluster}: {why}"
        return {replica.key: eo.Seen("starting", message) for replica in wanted}

    def _said(self, error: BaseException, workload: Mapping) -> str:
        meta = workload["metadata"]
        where = f"{workload['kind']} {meta['namespace']}/{meta['name']} on cluster {self.cluster}"
        if isinstance(error, ApiException) and error.status == 404:
            return f"cannot make {where}: namespace {meta['namespace']} (or the kind) is not there"
        if isinstance(error, ApiException) and error.status == 403:
            return (
                f"cannot make {where}: egs-hub may not write there; is {meta['namespace']} a namespace of a slice "
                f"set up on the cluster? ({describe_error(error)})"
            )
        return f"cannot make {where}: {describe_error(error)}"

    async def _list(self, api: client.ApiClient) -> tuple[dict[ObjectKey, Mapping], dict[tuple[str, str], list]]:
        """egs-hub's endpoint objects on the cluster by key, and their pods by (namespace, GPR)."""
        selector = {"label_selector": eo.SELECTOR, **self.options}
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        lists = [
            ("Deployment", lambda: client.AppsV1Api(api).list_deployment_for_all_namespaces(**selector)),
            ("Service", lambda: core.list_service_for_all_namespaces(**selector)),
        ]
        if await self.has_kserve():
            where = (eo.KSERVE_GROUP, eo.KSERVE_VERSION, eo.KSERVE_PLURAL)
            lists.append(("InferenceService", lambda: custom.list_cluster_custom_object(*where, **selector)))
        found: dict[ObjectKey, Mapping] = {}
        for kind, call in lists:
            for obj in (await json_of(await call())).get("items") or []:
                obj = {**obj, "kind": kind}
                found[_key(obj)] = obj
        pods: dict[tuple[str, str], list] = defaultdict(list)
        listed = await json_of(await core.list_pod_for_all_namespaces(**selector))
        for pod in listed.get("items") or []:
            labels = pod["metadata"].get("labels") or {}
            pods[(pod["metadata"]["namespace"], labels.get(GPR_LABEL, ""))].append(pod)
        return found, pods

    async def _apply(self, api: client.ApiClient, wanted: Mapping, found: Mapping | None) -> Mapping:
        """``wanted`` made, or written over ``found`` when it changed; the object as the API has it."""
        if found is not None and eo.spec_hash(found) == eo.spec_hash(wanted):
            return found
        kind, namespace, name = _key(wanted)
        calls = _calls(api, kind)
        if found is None:
            call = calls.create(namespace, dict(wanted), **self.options)
        else:
            call = calls.replace(name, namespace, eo.replaced(wanted, found), **self.options)
        doing = "making" if found is None else "updating"
        log.info("cluster %s: %s %s %s/%s", self.cluster, doing, kind, namespace, name)
        return {**(await json_of(await call)), "kind": kind}

    async def _delete(self, api: client.ApiClient, obj: Mapping) -> None:
        kind, namespace, name = _key(obj)
        log.info("cluster %s: deleting %s %s/%s, which no replica keeps", self.cluster, kind, namespace, name)
        try:
            await json_of(await _calls(api, kind).delete(name, namespace, **self.options))
        except API_ERRORS as e:  # gone already, or the next pass deletes it
            log.info("cluster %s: deleting %s %s/%s: %s", self.cluster, kind, namespace, name, describe_error(e))


@dataclass(frozen=True)
class _Calls:
    """A kind's writes: ``create(namespace, body)``, ``replace(name, namespace, body)``, ``delete(name, namespace)``."""

    create: Callable
    replace: Callable
    delete: Callable


def _calls(api: client.ApiClient, kind: str) -> _Calls:
    if kind == "Deployment":
        apps = client.AppsV1Api(api)
        return _Calls(
            apps.create_namespaced_deployment, apps.replace_namespaced_deployment, apps.delete_namespaced_deployment
        )
    if kind == "Service":
        core = client.CoreV1Api(api)
        return _Calls(core.create_namespaced_service, core.replace_namespaced_service, core.delete_namespaced_service)
    custom, group, plural = client.CustomObjectsApi(api), (eo.KSERVE_GROUP, eo.KSERVE_VERSION), eo.KSERVE_PLURAL
    return _Calls(
        lambda ns, body, **o: custom.create_namespaced_custom_object(*group, ns, plural, body, **o),
        lambda name, ns, body, **o: custom.replace_namespaced_custom_object(*group, ns, plural, name, body, **o),
        lambda name, ns, **o: custom.delete_namespaced_custom_object(*group, ns, plural, name, **o),
    )


def _refused(error: BaseException) -> bool:
    """The API refused the object itself (not there to hold it, invalid, forbidden): trying again as is
    will not help."""
    return isinstance(error, ApiException) and error.status in (400, 403, 404, 422)
