"""A Kubernetes API server in memory, served over HTTP on loopback for the real client.

Vocabulary: the *emulator* is one cluster's API; a *resource* is a plural path
(``v1/nodes``); every write bumps the cluster's *resourceVersion* and appends a
*watch event* (ADDED, MODIFIED, DELETED) to a bounded *event log* that watches
replay from a resourceVersion.

Built on kmock's ``KubernetesEmulator``, from which it keeps the HTTP server,
the parsing of URLs into resource / namespace / name / subresource, API
discovery (``/api``, ``/apis``), Status error bodies, and the ``objects`` store
with every object's history (so tests can assert on past versions). It replaces
kmock's object handlers, which keep no metadata, ignore selectors and
resourceVersion, and merge every PATCH the same way.

Emulates:
- API discovery of the resources in ``RESOURCES`` and ``DISCOVERED_ONLY`` (the latter
  answer 404 to every request), with or without a trailing slash (``/apis/``);
- the resources in ``RESOURCES`` (cluster-scoped nodes and namespaces, namespaced
  pods, events, PodDisruptionBudgets, ServiceAccounts, Roles, RoleBindings,
  cluster-scoped ClusterRoles and ClusterRoleBindings, ResourceQuotas, Secrets and
  ConfigMaps (helm's ``lookup`` reads them),
  PersistentVolumeClaims (members' home volumes), cluster-scoped PersistentVolumes and
  StorageClasses (``storage.k8s.io/v1``), Jobs (``batch/v1``, with their status subresource) and the
  custom resource ``gpuprovisionrequests.egs.io/v1`` with its status subresource, PodTemplates and the
  Cluster Autoscaler's ``provisioningrequests.autoscaling.x-k8s.io/v1`` (with its status subresource; no
  autoscaler sets it: tests do), Services and Deployments (``apps/v1``), each with its status
  subresource, and KServe's ``inferenceservices.serving.kserve.io/v1beta1`` (with its status
  subresource) unless the emulator is made with ``kserve=False``, when its group is in no discovery
  document and its requests answer 404, as on a cluster without the CRD,
  listed and watched in one namespace or all); others answer 404 as on a real server;
- ``metadata.generation`` on custom resources and Deployments: 1 at create, one more whenever
  anything but metadata and status changes (so never through ``status``);
- bearer-token authentication: the emulator's own ``token`` may do anything
  (and each such request is shown to ``OBSERVERS``),
  a token issued by the TokenRequest API (``serviceaccounts/{name}/token``) is
  valid until it expires or its ServiceAccount is deleted, and may do what the
  Roles and ClusterRoles bound to its ServiceAccount allow, writing Roles and
  RoleBindings only as RBAC's escalation prevention lets it (rbac.py; 403
  otherwise); 401 for any other token;
- create with ``metadata.generateName``, uid, creationTimestamp, resourceVersion;
  409 when the object exists, 404 when its namespace does not; a pod's status is
  set to ``{"phase": "Pending"}`` whatever the body says, as the API server does
  (without the ``qosClass`` it also sets);
- get, list and watch with ``labelSelector`` and ``fieldSelector``; watch from a
  ``resourceVersion`` (410 Gone once the log no longer reaches back that far, see
  ``compact``), with ``timeoutSeconds``; an object leaving (entering) a watch's
  selector is sent as DELETED (ADDED), as the API server does;
- PATCH as merge, strategic merge and JSON patch (patches.py), PUT replace, both
  with a resourceVersion precondition (409 on mismatch); the ``status``
  subresource changes only ``.status`` and the main resource never does; another
  writer's change just before a PATCH (``before_next_patch``), for lost-update races;
- DELETE with finalizers (deletionTimestamp until they are gone); deleting a
  namespace deletes what is in it;
- ``/version``: the Kubernetes version ``kubernetes_version`` (helm checks a chart's kubeVersion against it);
- a pod's log (``pods/{name}/log``): the text a test sets in ``pod_logs[(namespace, name)]`` (empty
  when none), as ``text/plain``, cut to its last ``tailLines`` lines and then its first ``limitBytes``
  bytes; 404 when the pod does not exist;
- a pod's proxy (``pods/{name}/proxy/{path}``, also ``{name}:{port}``; RBAC resource ``pods/proxy``), GET
  only: the text a test sets in ``pod_pages[(namespace, name, path)]`` (the path without its leading
  slash, whatever the port) as ``text/plain`` with 200; 404 when the pod does not exist or no page is set;
- the Eviction API (``pods/{name}/eviction``): 429 when a PodDisruptionBudget
  selecting the pod allows no disruption, otherwise the pod is deleted at once;
- an outage switch (``outage``) that ends every watch and answers 503.

Does not emulate: controllers and kubelets (nothing schedules, runs or
terminates pods gracefully: deletion is immediate; no node heartbeats; no Job
controller makes a Job's pods or sets its status; no Deployment controller makes
ReplicaSets or pods or sets a Deployment's status, and no KServe controller acts on
an InferenceService: tests set their status; Services get no clusterIP or endpoints
(no defaulting: a test may set ``spec.clusterIP``); a pod's proxy reaches no server
and other methods on it than GET are not served; no garbage collector deletes
what a deleted object owned, whatever ``propagationPolicy`` says), admission,
ClusterRoles and ClusterRoleBindings, quota enforcement, server-side apply, watch bookmarks,
``continue`` pagination, deletecollection, and defaulting or validation of
object schemas.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import math
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import attrs
from kmock import KubernetesEmulator, ResourceInfo, Response, action, method, resource, subresource
from kmock._internal.k8s import (
    KubernetesError,
    KubernetesObjectConflictError,
    KubernetesObjectNotFoundError,
    KubernetesResourceNotFoundError,
    KubernetesScaffold,
)

from egs_hub.backends.kubernetes.nodes import SLICE_LABEL

from . import rbac
from .patches import PatchError, apply_patch
from .selectors import SelectorError, field_selector, label_selector, structured_label_selector

# KServe's custom resource: served only by an emulator made with ``kserve=True`` (the CRD installed).
KSERVE = ("serving.kserve.io", "v1beta1", "inferenceservices")
# (group, version, plural) -> (kind, namespaced, subresources)
RESOURCES: dict[tuple[str, str, str], tuple[str, bool, tuple[str, ...]]] = {
    ("", "v1", "nodes"): ("Node", False, ("status",)),
    ("", "v1", "namespaces"): ("Namespace", False, ("status",)),
    ("", "v1", "pods"): ("Pod", True, ("status", "eviction", "log")),
    ("", "v1", "events"): ("Event", True, ()),
    ("policy", "v1", "poddisruptionbudgets"): ("PodDisruptionBudget", True, ("status",)),
    ("", "v1", "serviceaccounts"): ("ServiceAccount", True, ("token",)),
    ("", "v1", "resourcequotas"): ("ResourceQuota", True, ("status",)),
    ("", "v1", "secrets"): ("Secret", True, ()),
    ("", "v1", "configmaps"): ("ConfigMap", True, ()),
    ("", "v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True, ("status",)),
    ("", "v1", "persistentvolumes"): ("PersistentVolume", False, ("status",)),
    ("storage.k8s.io", "v1", "storageclasses"): ("StorageClass", False, ()),
    ("batch", "v1", "jobs"): ("Job", True, ("status",)),
    ("rbac.authorization.k8s.io", "v1", "roles"): ("Role", True, ()),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"): ("RoleBinding", True, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterroles"): ("ClusterRole", False, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"): ("ClusterRoleBinding", False, ()),
    ("egs.io", "v1", "gpuprovisionrequests"): ("GpuProvisionRequest", True, ("status",)),
    ("", "v1", "podtemplates"): ("PodTemplate", True, ()),
    ("autoscaling.x-k8s.io", "v1", "provisioningrequests"): ("ProvisioningRequest", True, ("status",)),
    ("", "v1", "services"): ("Service", True, ("status",)),
    ("apps", "v1", "deployments"): ("Deployment", True, ("status",)),
    KSERVE: ("InferenceService", True, ("status",)),
}
# Listed in API discovery but not served (404), as kinds a real cluster has: helm maps every kind of a
# chart to its resource through discovery before it renders with --dry-run=server (tests/chart/test_upgrade.py).
DISCOVERED_ONLY: dict[tuple[str, str, str], tuple[str, bool]] = {
    ("apps", "v1", "statefulsets"): ("StatefulSet", True),
    ("apps", "v1", "daemonsets"): ("DaemonSet", True),
    ("networking.k8s.io", "v1", "networkpolicies"): ("NetworkPolicy", True),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"): ("MutatingWebhookConfiguration", False),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"): ("ValidatingAdmissionPolicy", False),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"): (
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
}
# Custom resources (CRDs installed) get metadata.generation, as the API server gives them; of the built-in
# kinds (most of which it gives one too) only those in GENERATED get it here.
CUSTOM_GROUPS = ("egs.io", "autoscaling.x-k8s.io", KSERVE[0])
GENERATED = (("apps", "v1", "deployments"),)
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
NAMESPACES = resource("", "v1", "namespaces")
# kmock reads /api/v1/namespaces[/name] as a namespace prefix (and fails on the bare list); see __call__.
_NAMESPACE_PATH = re.compile(r"^/api/v1/namespaces(/[^/]+)?(/status|/finalize)?/?$")
_NAMESPACE_ALIAS = "/api/v1/cluster-namespaces"
# Discovery with a trailing slash, as kubernetes_asyncio asks for it (ApisApi: /apis/, AppsV1Api: /apis/apps/v1/);
# kmock serves it only without.
_DISCOVERY_SLASH = re.compile(r"^/(api(/[^/]+)?|apis(/[^/]+){0,2})/$")
# kmock reads what follows a name as the subresource: "proxy/metrics" for pods/{name}/proxy/metrics.
_PROXY = re.compile(r"proxy(/.*)?")
PODS = resource("", "v1", "pods")
PVCS = resource("", "v1", "persistentvolumeclaims")
PDBS = resource("policy", "v1", "poddisruptionbudgets")
SERVICE_ACCOUNTS = resource("", "v1", "serviceaccounts")
ROLES = resource("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = resource("rbac.authorization.k8s.io", "v1", "rolebindings")
CLUSTER_ROLES = resource("rbac.authorization.k8s.io", "v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
MIN_TOKEN_SECONDS = 600
# Called with (attributes, User-Agent, scope_of its namespace) for every request the emulator's own token
# makes (what the code under test does with its cluster credentials); tests/chart/api_requests.py records them.
OBSERVERS: list[Callable[[rbac.Attributes, str, str], None]] = []


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One write: ``old`` is the object before it (None for ADDED), ``new`` after (the last state for DELETED)."""

    rv: int
    resource: resource
    type: str
    old: dict | None
    new: dict


@dataclasses.dataclass(frozen=True)
class IssuedToken:
    """A token from the TokenRequest API: its ServiceAccount (namespace, name, uid) and expiry."""

    namespace: str
    name: str
    uid: str
    expires: datetime.datetime


def _header(request, name: str) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == name.lower()), "")


def _status(code: int, reason: str, message: str) -> KubernetesError:
    return KubernetesError(status=code, reason=reason, message=message, details={})


def _spec_of(obj: dict) -> dict:
    """What a change of bumps the generation: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _now() -> str:
    return _format(datetime.datetime.now(datetime.UTC))


def _format(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define(kw_only=True)
class ClusterEmulator(KubernetesEmulator):
    token: str = attrs.field(factory=lambda: secrets.token_urlsafe(16))
    history_limit: int = 10_000  # watch events kept; a watch from an older resourceVersion gets 410 Gone
    outage: bool = False
    kserve: bool = True  # whether KServe's InferenceService CRD is installed (False: its API is not there)
    kubernetes_version: str = "1.32.0"

    _rv: int = attrs.field(default=0, init=False)
    _compacted_rv: int = attrs.field(default=0, init=False)
    _log: list[WatchEvent] = attrs.field(factory=list, init=False)
    # Set by the next write (or outage) and then replaced: watches wait on it without a lock, because a
    # watch cancelled in asyncio.Condition.wait (its client gone) can leave the lock held on Python 3.11
    # and block every later write.
    _changed: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    issued: dict[str, IssuedToken] = attrs.field(factory=dict, init=False)
    # A pod's log by (namespace, name), as its container printed it; tests set it.
    pod_logs: dict[tuple[str, str], str] = attrs.field(factory=dict, init=False)
    # What a pod's server answers through the pod proxy, by (namespace, pod name, path without its
    # leading slash); tests set it.
    pod_pages: dict[tuple[str, str, str], str] = attrs.field(factory=dict, init=False)
    # Another writer's change of an object, by (plural, name), made just as the next PATCH of it arrives
    # (before_next_patch); tests set it.
    _interleaved: dict[tuple[str, str], Callable[[dict], dict]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        # kmock's discovery routes, without KubernetesEmulator's object handlers: these replace them.
        KubernetesScaffold.__attrs_post_init__(self)
        for (group, version, plural), (kind, namespaced, subresources) in RESOURCES.items():
            if (group, version, plural) == KSERVE and not self.kserve:
                continue
            self.resources[resource(group, version, plural)] = ResourceInfo(
                kind=kind, namespaced=namespaced, verbs=set(VERBS), subresources=set(subresources)
            )
        for (group, version, plural), (kind, namespaced) in DISCOVERED_ONLY.items():
            self.resources[resource(group, version, plural)] = ResourceInfo(
                kind=kind, namespaced=namespaced, verbs=set(VERBS), subresources=set()
            )
        self.fallback[method.POST, subresource("eviction")] << self._serve_eviction
        self.fallback[method.POST, subresource("token")] << self._serve_token
        self.fallback[method.GET, subresource("log")] << self._serve_log
        self.fallback[method.GET, subresource(_PROXY)] << self._serve_proxy
        self.fallback[method.PUT] << self._serve_replace
        self.fallback[action.WATCH] << self._serve_watch
        self.fallback[action.LIST] << self._serve_list
        self.fallback[action.FETCH] << self._serve_fetch
        self.fallback[action.CREATE] << self._serve_create
        self.fallback[action.UPDATE] << self._serve_patch
        self.fallback[action.DELETE] << self._serve_delete

    async def _serve_server_version(self, request) -> dict:
        major, minor, _ = self.kubernetes_version.split(".")
        return {"major": major, "minor": minor, "gitVersion": f"v{self.kubernetes_version}", "platform": "linux/amd64"}

    async def _serve_version(self, request) -> dict:
        # kmock names the core group's version "/v1"; the API server (and client-go, which then finds
        # no core kinds) has "v1".
        listed = await super()._serve_version(request)
        return {**listed, "groupVersion": listed["groupVersion"].lstrip("/")}

    async def __call__(self, raw_request):
        path = raw_request.path
        if _NAMESPACE_PATH.match(path):
            path = path.replace("/api/v1/namespaces", _NAMESPACE_ALIAS, 1)
        elif _DISCOVERY_SLASH.match(path):
            path = path.rstrip("/")
        if path != raw_request.path:
            url = raw_request.rel_url
            raw_request = raw_request.clone(rel_url=url.with_path(path).with_query(url.query))
        return await super().__call__(raw_request)

    async def _handle(self, request):
        if request.resource is not None and request.resource.plural == _NAMESPACE_ALIAS.rsplit("/", 1)[1]:
            request = attrs.evolve(request, resource=NAMESPACES)
            self._requests[request.id] = request  # kmock finds a request's reactions by identity
        if request.resource is not None and request.resource.plural is not None:
            if self.outage:
                raise _status(503, "ServiceUnavailable", "the emulated API server is down (outage)")
            self._kind_of(request.resource)
            self._authorize(request)
        # Skip KubernetesEmulator._handle: it would write kmock's metadata-less objects first.
        return await KubernetesScaffold._handle(self, request)

    # Authentication and authorization

    def _attributes(self, request) -> rbac.Attributes:
        res = request.resource
        # pods/{name}/proxy/{path} is the subresource pods/proxy, whatever the path
        sub = None if request.subresource is None else request.subresource.split("/", 1)[0]
        plural = res.plural if sub is None else f"{res.plural}/{sub}"
        watch = request.params.get("watch", "").lower() in ("true", "1")
        return rbac.Attributes(
            verb=rbac.verb_of(request.method.value, request.name, watch),
            group=res.group,
            resource=plural,
            namespace=request.namespace if self._kind_of(res)[1] else None,
            name=request.name,
        )

    def scope_of(self, namespace: str | None) -> str:
        """Where a request is made: ``cluster`` (cluster-scoped, or across namespaces), ``slice`` (a namespace
        labelled egs.io/slice), ``namespace`` (any other) or ``absent`` (a namespace that is not there)."""
        if namespace is None:
            return "cluster"
        found = self.get(NAMESPACES, None, namespace)
        if found is None:
            return "absent"
        return "slice" if SLICE_LABEL in (found.get("metadata") or {}).get("labels", {}) else "namespace"

    def _authorize(self, request) -> None:
        """The emulator's token may do anything; an issued token what its ServiceAccount's Roles allow."""
        given = _header(request, "Authorization").removeprefix("Bearer ")
        attributes = self._attributes(request)
        if given == self.token:
            scope = self.scope_of(attributes.namespace)
            for observe in OBSERVERS:
                observe(attributes, _header(request, "User-Agent"), scope)
            return
        issued = self.issued.get(given)
        account = None if issued is None else self.get(SERVICE_ACCOUNTS, issued.namespace, issued.name)
        now = datetime.datetime.now(datetime.UTC)
        if issued is None or account is None or account["metadata"]["uid"] != issued.uid or now >= issued.expires:
            raise _status(401, "Unauthorized", "Unauthorized")
        res = request.resource
        plural = attributes.resource
        namespace = attributes.namespace
        account = (issued.namespace, issued.name)
        policy = rbac.Policy(
            self._live(CLUSTER_ROLES),
            self._live(CLUSTER_ROLE_BINDINGS),
            self._live(ROLES, namespace) if namespace else [],
            self._live(ROLE_BINDINGS, namespace) if namespace else [],
        )
        user = f"system:serviceaccount:{issued.namespace}:{issued.name}"
        if not rbac.allowed(account, attributes, policy):
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise _status(
                403,
                "Forbidden",
                f'{plural} is forbidden: User "{user}" cannot {attributes.verb} resource "{plural}" '
                f'in API group "{res.group}" {where}',
            )
        body = request.data if isinstance(request.data, Mapping) else {}
        if (why := rbac.escalation_refused(account, attributes, body, policy)) is not None:
            raise _status(403, "Forbidden", f'{plural} is forbidden: User "{user}": {why}')

    async def _serve_token(self, request) -> dict:
        if request.resource != SERVICE_ACCOUNTS:
            raise _status(404, "NotFound", "only serviceaccounts have the token subresource")
        account = self._existing(request)
        body = request.data if isinstance(request.data, Mapping) else {}
        spec = body.get("spec") or {}
        seconds = spec.get("expirationSeconds", 3600)
        if not isinstance(seconds, int) or seconds < MIN_TOKEN_SECONDS:
            raise _status(
                422,
                "Invalid",
                f"spec.expirationSeconds: Invalid value: {seconds!r}: may not specify a duration less than 10 minutes",
            )
        token = secrets.token_urlsafe(32)
        expires = datetime.datetime.now(datetime.UTC).replace(microsecond=0) + datetime.timedelta(seconds=seconds)
        self.issued[token] = IssuedToken(request.namespace, request.name, account["metadata"]["uid"], expires)
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": request.name, "namespace": request.namespace},
            "spec": {**spec, "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": _format(expires)},
        }

    def expire_tokens(self) -> None:
        """Let every issued token expire now."""
        past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
        self.issued = {t: dataclasses.replace(i, expires=past) for t, i in self.issued.items()}

    # Pod logs

    async def _serve_log(self, request) -> Response:
        if request.resource != PODS:
            raise _status(404, "NotFound", "only pods have the log subresource")
        self._existing(request)
        text = self.pod_logs.get((request.namespace, request.name), "")
        try:
            tail = request.params.get("tailLines")
            limit = request.params.get("limitBytes")
            if tail is not None:
                lines = text.splitlines(keepends=True)
                text = "".join(lines[-int(tail) :] if int(tail) > 0 else [])
            body = text.encode()
            if limit is not None:
                body = body[: int(limit)]
        except ValueError:
            raise _status(400, "BadRequest", "tailLines and limitBytes must be integers") from None
        return Response(payload=body, headers={"Content-Type": "text/plain"})

    async def _serve_proxy(self, request) -> Response:
        """GET pods/[{scheme}:]{name}[:{port}]/proxy/{path}: the page a test set for the pod and path (any port)."""
        if request.resource != PODS:
            raise _status(404, "NotFound", "only pods have the proxy subresource here")
        parts = request.name.split(":")  # name, name:port or scheme:name:port
        name = parts[1] if len(parts) == 3 else parts[0]
        path = request.subresource.removeprefix("proxy").lstrip("/")
        if self.get(PODS, request.namespace, name) is None:
            raise KubernetesObjectNotFoundError(reason="NotFound", message=f'pods "{name}" not found')
        page = self.pod_pages.get((request.namespace, name, path))
        if page is None:
            raise _status(404, "NotFound", f"the pod serves nothing at /{path}")
        return Response(payload=page.encode(), headers={"Content-Type": "text/plain"})

    # Outage and log compaction, for tests of reconnection

    async def set_outage(self, down: bool) -> None:
        """Take the API down (every watch ends, every request gets 503) or bring it back."""
        self.outage = down
        self._wake_watches()

    def _wake_watches(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def before_next_patch(self, plural: str, name: str, change: Callable[[dict], dict]) -> None:
        """Another writer changes object ``name`` (of ``plural``) to ``change(object)`` just before the next
        PATCH of it is read: the window of a lost update, made certain. The PATCH then finds a new
        resourceVersion."""
        self._interleaved[(plural, name)] = change

    def compact(self) -> None:
        """Forget every watch event so far: a watch from an older resourceVersion gets 410 Gone."""
        self._log.clear()
        self._compacted_rv = self._rv

    # The store

    def _kind_of(self, res: resource) -> tuple[str, bool]:
        known = RESOURCES.get((res.group, res.version, res.plural))
        if known is None or res not in self.resources:  # unknown, or left out (kserve=False)
            raise KubernetesResourceNotFoundError()
        return known[0], known[1]

    def _key(self, res: resource, namespace: str | None, name: str | None):
        return (res, namespace if self._kind_of(res)[1] else None, name)

    def get(self, res: resource, namespace: str | None, name: str) -> dict | None:
        """The stored object, or None; what tests assert on."""
        key = self._key(res, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return copy.deepcopy(self.objects[key].raw)

    def _live(self, res: resource, namespace: str | None = None) -> list[dict]:
        return [
            obj.raw
            for (r, ns, _), obj in self.objects.items()
            if r == res and not obj.deleted and (namespace is None or ns == namespace)
        ]

    async def _record(self, res: resource, kind: str, old: dict | None, new: dict) -> None:
        self._log.append(WatchEvent(self._rv, res, kind, copy.deepcopy(old), copy.deepcopy(new)))
        if len(self._log) > self.history_limit:
            dropped = self._log.pop(0)
            self._compacted_rv = dropped.rv
        self._wake_watches()

    async def _write(self, res: resource, old: dict | None, new: dict) -> dict:
        """Store a new version of an object (creating it when ``old`` is None) and log the event."""
        self._rv += 1
        new = copy.deepcopy(new)
        new.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        meta = new["metadata"]
        key = self._key(res, meta.get("namespace"), meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects[key].delete()
            await self._record(res, "DELETED", old, new)
            return new
        if key in self.objects:
            self.objects[key].create(new)  # a new version in the object's history
        else:
            self.objects[key] = new
        await self._record(res, "MODIFIED" if old is not None else "ADDED", old, new)
        return new

    async def _delete(self, res: resource, obj: dict) -> dict:
        """Delete now, or mark for deletion while finalizers remain; a namespace takes its contents along."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return obj
        if res == NAMESPACES:
            for (r, ns, _), inner in list(self.objects.items()):
                if ns == meta["name"] and not inner.deleted:
                    await self._delete(r, inner.raw)
        new = copy.deepcopy(obj)
        new["metadata"]["deletionTimestamp"] = _now()
        return await self._write(res, obj, new)

    def _existing(self, request) -> dict:
        obj = self.get(request.resource, request.namespace, request.name)
        if obj is None:
            raise KubernetesObjectNotFoundError(
                reason="NotFound", message=f'{request.resource.plural} "{request.name}" not found'
            )
        return obj

    # Handlers

    async def _serve_fetch(self, request) -> dict:
        return self._existing(request)

    def _matcher(self, request):
        try:
            labels = label_selector(request.params.get("labelSelector"))
            fields = field_selector(request.params.get("fieldSelector"))
        except SelectorError as e:
            raise _status(400, "BadRequest", str(e)) from None
        name = request.name

        def matches(obj: dict | None) -> bool:
            if obj is None:
                return False
            meta = obj.get("metadata", {})
            if request.namespace is not None and meta.get("namespace") != request.namespace:
                return False
            if name is not None and meta.get("name") != name:
                return False
            return labels(meta.get("labels") or {}) and fields(obj)

        return matches

    async def _serve_list(self, request) -> dict | AsyncIterator[Any]:
        # kmock takes only ``watch=true`` for a watch; kubernetes_asyncio sends ``watch=True``.
        if request.params.get("watch", "").lower() in ("true", "1"):
            return self._serve_watch(request)
        matches = self._matcher(request)
        kind, _ = self._kind_of(request.resource)
        items = [copy.deepcopy(o) for o in self._live(request.resource) if matches(o)]
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        group_version = "/".join(p for p in (request.resource.group, request.resource.version) if p)
        return {
            "apiVersion": group_version,
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

    def _as_seen(self, event: WatchEvent, matches) -> dict | None:
        """The event as a watch with this selector sees it, or None when it does not concern it."""
        was, now = matches(event.old), matches(event.new)
        if event.type == "DELETED":
            kind = "DELETED" if was else None
        elif was and now:
            kind = "MODIFIED"
        elif now:
            kind = "ADDED"
        elif was:
            kind = "DELETED"
        else:
            kind = None
        return None if kind is None else {"type": kind, "object": event.new}

    async def _serve_watch(self, request) -> AsyncIterator[Any]:
        matches = self._matcher(request)
        since = request.params.get("resourceVersion") or "0"
        timeout = float(request.params.get("timeoutSeconds") or 0) or None
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        yield b""  # send the headers now: the client waits for them before reading events
        if since == "0":
            last = self._rv
            for obj in sorted(self._live(request.resource), key=lambda o: o["metadata"]["name"]):
                if matches(obj):
                    yield {"type": "ADDED", "object": copy.deepcopy(obj)}
        else:
            last = int(since)
            if last < self._compacted_rv:
                yield {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Failure",
                        "message": f"too old resource version: {last} ({self._compacted_rv})",
                        "reason": "Expired",
                        "code": 410,
                    },
                }
                return
        while not self.outage:
            changed = self._changed  # taken before reading the log: a write after this sets it
            pending = [e for e in self._log if e.rv > last and e.resource == request.resource]
            for event in pending:
                last = event.rv
                seen = self._as_seen(event, matches)
                if seen is not None:
                    yield seen
            if pending:
                continue
            remaining = None if deadline is None else deadline - asyncio.get_running_loop().time()
            if remaining is not None and remaining <= 0:
                return
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return

    async def _serve_create(self, request) -> dict:
        _, namespaced = self._kind_of(request.resource)
        body = request.data
        if not isinstance(body, Mapping):
            raise _status(400, "BadRequest", "the body must be a JSON object")
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise _status(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        if namespaced:
            if meta.get("namespace") not in (None, request.namespace):
                raise _status(400, "BadRequest", "the namespace of the object does not match the URL's")
            meta["namespace"] = request.namespace
            if self.get(NAMESPACES, None, request.namespace) is None:
                raise KubernetesObjectNotFoundError(
                    reason="NotFound", message=f'namespaces "{request.namespace}" not found'
                )
        else:
            meta.pop("namespace", None)
        if self.get(request.resource, request.namespace, meta["name"]) is not None:
            raise KubernetesObjectConflictError(
                reason="AlreadyExists", message=f'{request.resource.plural} "{meta["name"]}" already exists'
            )
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now())
        meta.pop("deletionTimestamp", None)
        res = request.resource
        if res.group in CUSTOM_GROUPS or (res.group, res.version, res.plural) in GENERATED:
            meta["generation"] = 1
        if request.resource == PODS:
            obj["status"] = {"phase": "Pending"}
        return await self._write(request.resource, None, obj)

    def _merge_update(self, request, old: dict, new: dict) -> dict:
        """Keep what a client cannot change: identity, and status or everything else per subresource."""
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise KubernetesObjectConflictError(
                reason="Conflict",
                message=f'Operation cannot be fulfilled on {request.resource.plural} "{request.name}": '
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        if request.subresource == "status":
            result = copy.deepcopy(old)
            result["status"] = new.get("status", {})
        else:
            result = copy.deepcopy(new)
            result.pop("status", None)
            if "status" in old:
                result["status"] = copy.deepcopy(old["status"])
        meta = result.setdefault("metadata", {})
        for field in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
        if "generation" in meta and _spec_of(result) != _spec_of(old):
            meta["generation"] += 1
        return result

    async def _serve_patch(self, request) -> dict:
        if request.subresource not in (None, "status"):
            raise _status(404, "NotFound", f"subresource {request.subresource!r} cannot be patched")
        old = self._existing(request)
        change = self._interleaved.pop((request.resource.plural, request.name), None)
        if change is not None:
            old = await self._write(request.resource, old, change(copy.deepcopy(old)))
        try:
            patched = apply_patch(old, request.data, _header(request, "Content-Type"))
        except PatchError as e:
            raise _status(e.status, "UnsupportedMediaType" if e.status == 415 else "Invalid", str(e)) from None
        return await self._write(request.resource, old, self._merge_update(request, old, patched))

    async def _serve_replace(self, request) -> dict:
        if request.name is None or request.subresource not in (None, "status"):
            raise _status(405, "MethodNotAllowed", "PUT needs an object name (and at most the status subresource)")
        old = self._existing(request)
        if not isinstance(request.data, Mapping):
            raise _status(400, "BadRequest", "the body must be a JSON object")
        return await self._write(request.resource, old, self._merge_update(request, old, dict(request.data)))

    async def _serve_delete(self, request) -> dict:
        if request.subresource is not None:
            raise _status(405, "MethodNotAllowed", f"subresource {request.subresource!r} cannot be deleted")
        return await self._delete(request.resource, self._existing(request))

    def _disruption_allowed(self, budget: dict, pods: list[dict]) -> bool:
        """Whether evicting one of ``pods`` (those the budget selects) keeps the budget."""
        spec = budget.get("spec", {})
        healthy = len([p for p in pods if not p["metadata"].get("deletionTimestamp")])

        def count(value: int | str) -> int:
            if isinstance(value, str) and value.endswith("%"):
                return math.ceil(len(pods) * int(value[:-1]) / 100)
            return int(value)

        if "maxUnavailable" in spec:
            return healthy - 1 >= len(pods) - count(spec["maxUnavailable"])
        if "minAvailable" in spec:
            return healthy - 1 >= count(spec["minAvailable"])
        return True

    async def _serve_eviction(self, request) -> dict:
        if request.resource != PODS:
            raise _status(404, "NotFound", "only pods have the eviction subresource")
        pod = self.get(PODS, request.namespace, request.name)
        if pod is None:
            raise KubernetesObjectNotFoundError(reason="NotFound", message=f'pods "{request.name}" not found')
        labels = pod["metadata"].get("labels") or {}
        namespace_pods = self._live(PODS, request.namespace)
        for budget in self._live(PDBS, request.namespace):
            selects = structured_label_selector(budget.get("spec", {}).get("selector"))
            if not selects(labels):
                continue
            selected = [p for p in namespace_pods if selects(p["metadata"].get("labels") or {})]
            if not self._disruption_allowed(budget, selected):
                raise KubernetesError(
                    status=429,
                    reason="TooManyRequests",
                    message="Cannot evict pod as it would violate the pod's disruption budget.",
                    details={"causes": [{"reason": "DisruptionBudget", "message": budget["metadata"]["name"]}]},
                )
        await self._delete(PODS, pod)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
