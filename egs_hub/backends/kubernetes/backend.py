"""The Kubernetes backend: one registered cluster, its GPU nodes bound to slices whole (the MIG
instances and time-sliced shares of a share node one by one: shares.py).

Vocabulary (DESIGN.md): the *inventory* is the cluster's managed GPU nodes (those
matching ``node_selector``, by default every node labelled ``egs.io/slice``),
kept fresh by a watch (reflector.py). *Entry* binds a GPR's nodes to its slice:
pre-checks on every node first, then label and taint (objects.py). *Exit* takes
them back: cordon, evict the slice's pods through the Eviction API, delete what
remains once ``exit_grace`` has passed since exit began (noted on the node, so a
restarted service keeps the same deadline), then label and taint ``free`` and
uncordon. Both are idempotent: calling again finishes what a failed call began.
A share node's units enter and exit as shares.py says (drain.release_units).

A *slice on the cluster* is its namespaces with a ServiceAccount, RBAC from
``role_templates`` and a GPU quota (slices.py); ``slice_kubeconfig`` gives a
kubeconfig for that ServiceAccount (kubeconfig.py). While the slice holds no GPU
on the cluster it has no quota object at all: a quota of 0 would make the API
server refuse GPU pods ("exceeded quota"), where they should stay Pending until
a GPR brings nodes (the node selector and taint keep them off other nodes).

``record_slice_event`` and ``record_node_event`` write core/v1 Events (events.py);
``gpr_resources`` reaches the cluster's GPR custom resources (gpr_api.py); ``change_layout``
asks the GPU Operator's mig-manager for a node's new MIG layout (mig_layouts.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from ... import __version__
from ...core import checks, sharing
from ...core.checks import CheckTarget, Verdict
from ...core.model import GPR, Event, SlicePolicy
from ...core.node_pools import POOL_LABEL, NodePool
from ...core.requests import CheckSpec
from .. import BindError, Inventory, LayoutChangeError, ServerRef, UnbindError
from . import mig_layouts, node_writes, objects, pools, shares
from .api import API_ERRORS, describe_error, json_of, json_or_none
from .checks import CheckJob, run_pvc_check
from .drain import drain_node, release_units
from .events import Notice, create_event, namespace_event, node_event
from .gpr_api import GPRResourceAPI
from .kubeconfig import SliceKubeconfig, make_kubeconfig
from .nodes import (
    MIG_CONFIG_LABEL,
    SLICE_LABEL,
    FoundNode,
    NodeInventory,
    NodeUnusable,
    entry_problems,
    read_node,
    read_nodes,
    read_units,
)
from .reflector import NodeReflector
from .roles import DEFAULT_ROLE_TEMPLATES, NamespaceGrant, RoleTemplate
from .slice_objects import NamespacePlan, SliceConflict, plan_namespaces
from .slices import SliceObjects, ensure_slice, remove_slice, set_slice_gpus, snapshot
from .volumes import HomeVolume, list_home_volumes

USER_AGENT = f"egs-hub/{__version__}"

log = logging.getLogger(__name__)
ACTOR = "kubernetes-backend"


class ClusterUnavailable(Exception):
    """The cluster's API cannot be reached or used; the message names the cluster and the cause."""


class KubernetesBackend:
    kind = "kubernetes"
    scales_pools = True

    def __init__(
        self,
        cluster: str,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        in_cluster: bool = False,
        node_selector: str = SLICE_LABEL,
        exit_grace: timedelta = timedelta(minutes=5),
        request_timeout: float = 10.0,
        watch_timeout: int = 300,
        on_change: Callable[[], None] | None = None,
        role_templates: Mapping[str, RoleTemplate] = DEFAULT_ROLE_TEMPLATES,
        namespace_grants: Sequence[NamespaceGrant] = (),
        kubeconfig_server: str | None = None,
        checks_namespace: str = "egs-checks",
        pools_namespace: str = "egs-pools",
    ):
        """``kubeconfig`` None means the default ($KUBECONFIG or ~/.kube/config); ``in_cluster`` uses the pod's
        ServiceAccount instead. ``on_change`` is called whenever the inventory changes (nodes appear,
        change or disappear). ``role_templates`` become the Roles in every slice namespace (roles.py);
        ``namespace_grants`` the RoleBindings made there first, which give the service its rights there;
        ``kubeconfig_server`` is the API server URL written into slice kubeconfigs (default: the one used here).
        ``checks_namespace`` holds the Jobs of nccl and custom checks (checks.py); it is created when missing
        and must not be a slice's namespace. ``pools_namespace`` holds the requests that grow node pools (pools.py),
        created when missing."""
        if in_cluster and (kubeconfig or context):
            raise ValueError(f"cluster {cluster}: in_cluster=True takes no kubeconfig or context")
        self.cluster = cluster
        self.kubeconfig = kubeconfig
        self.context = context
        self.in_cluster = in_cluster
        self.node_selector = node_selector
        self.exit_grace = exit_grace
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.on_change = on_change
        self.role_templates = role_templates
        self.namespace_grants = tuple(namespace_grants)
        self.kubeconfig_server = kubeconfig_server
        self.checks_namespace = checks_namespace
        self.pools_namespace = pools_namespace
        self._api: client.ApiClient | None = None
        self._reflector: NodeReflector | None = None
        self._last: NodeInventory | None = None

    @property
    def where(self) -> str:
        if self.in_cluster:
            return "in-cluster config"
        return f"context {self.context or '(current)'} of {self.kubeconfig or 'the default kubeconfig'}"

    async def _client(self) -> client.ApiClient:
        if self._api is None:
            configuration = client.Configuration()
            try:
                if self.in_cluster:
                    config.load_incluster_config(client_configuration=configuration)
                else:
                    await config.load_kube_config(
                        config_file=self.kubeconfig, context=self.context, client_configuration=configuration
                    )
            except (ConfigException, OSError) as e:
                raise ClusterUnavailable(f"cluster {self.cluster}: cannot load {self.where}: {e}") from None
            self._api = client.ApiClient(configuration)
            # Named in the API server's audit log (and told apart from other clients in the chart's RBAC test).
            self._api.user_agent = USER_AGENT
        return self._api

    async def api_client(self) -> client.ApiClient:
        """The cluster's API client, for what drives other objects there (endpoint_workloads.py);
        ClusterUnavailable when its configuration cannot be loaded."""
        return await self._client()

    async def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(await self._client())

    async def close(self) -> None:
        """Stop watching and close the connection pool."""
        if self._reflector is not None:
            await self._reflector.stop()
            self._reflector = None
        if self._api is not None:
            await self._api.close()
            self._api = None

    # Inventory

    def _changed(self) -> None:
        current = read_nodes(self._reflector.objects.values(), self.cluster) if self._reflector else None
        if current != self._last:
            self._last = current
            if self.on_change is not None:
                self.on_change()

    async def discover(self) -> Inventory:
        """The managed GPU nodes now; ClusterUnavailable while the API cannot be listed."""
        if self._reflector is None:
            reflector = NodeReflector(
                await self._core(),
                self.node_selector,
                self._changed,
                request_timeout=self.request_timeout,
                watch_timeout=self.watch_timeout,
            )
            self._reflector = reflector
            try:
                await reflector.start()
            except API_ERRORS as e:
                self._reflector = None
                raise ClusterUnavailable(
                    f"cluster {self.cluster}: cannot list nodes ({self.where}): {describe_error(e)}"
                ) from None
        elif self._reflector.error is not None:
            raise ClusterUnavailable(
                f"cluster {self.cluster}: cannot list nodes ({self.where}): {self._reflector.error}; retrying"
            )
        found = read_nodes(self._reflector.objects.values(), self.cluster)
        source = f"Kubernetes {self.where}: {len(found.found)} GPU node(s) matching {self.node_selector!r}"
        if found.unusable:
            source += "; left out: " + "; ".join(found.unusable.values())
        # A node carries one slice label, so it is bound to one GPR at a time (Node.whole); the units of a
        # share node are bound one by one (shares.py).
        share_hosts = {f.host for f in found.found if not f.node.shape.whole and shares.is_unit_resource(f.resource)}
        nodes, not_offered = [], []
        for f in found.found:
            why = shares.not_offered(f, share_hosts)
            if why is not None:
                not_offered.append(f"{f.node.name} ({why})")
            nodes.append(replace(f.node, whole=f.node.shape.whole, schedulable=f.node.schedulable and why is None))
        if not_offered:
            source += "; listed, not offered: " + "; ".join(not_offered)
        return Inventory(nodes, found.gpus, source=source)

    # Entry and exit

    def _gpus_by_node(self, gpr: GPR) -> dict[str, int]:
        """The GPR's planning nodes on this cluster with how many of its GPUs (or units) each has."""
        counts = {}
        for node in gpr.bound_nodes:
            prefix, resource = f"{self.cluster}/{sharing.host_of(node)}/", shares.planning_resource(node)
            counts[node] = sum(1 for g in gpr.bound_gpus if g.startswith(prefix) and shares.resource_of(g) == resource)
        return counts

    async def _read(self, core: client.CoreV1Api, name: str) -> dict | None:
        return await json_or_none(core.read_node(name, _preload_content=False, _request_timeout=self.request_timeout))

    async def bind(self, gpr: GPR, policy: SlicePolicy, servers: list[ServerRef], now: datetime) -> list[Event]:
        """Enter every node of the GPR into its slice once all pass their pre-checks; BindError names those that fail.

        The slice's running servers were started without the slice's node selector, so their owners are told
        to restart them to get GPUs.
        """
        wanted = self._gpus_by_node(gpr)
        if not wanted:
            raise BindError(f"GPR {gpr.id} has no nodes on cluster {self.cluster}")
        core = await self._core()
        # 1. snapshot
        current = {host: await self._read(core, host) for host in sorted({sharing.host_of(n) for n in wanted})}
        # 2. decide
        problems, failed = [], []
        for name, count in wanted.items():
            obj = current[sharing.host_of(name)]
            found = (
                [f"node {sharing.host_of(name)} no longer exists"]
                if obj is None
                else self._problems(obj, name, gpr, count)
            )
            problems.extend(found)
            if found:
                failed.append(name)
        if problems:
            await self._undo_entry(core, gpr, current)
            raise BindError(f"cluster {self.cluster}: " + "; ".join(problems), failed)
        # 3. act
        events = []
        for name, obj in current.items():
            if name in wanted:
                await node_writes.patch_node(core, obj, lambda o: objects.entry_patch(o, gpr.spec.slice, gpr.id))
                reason = f"labelled and tainted {SLICE_LABEL}={gpr.spec.slice}"
                events.append(self._event(gpr, "node-entered", name, reason, now))
            else:
                await node_writes.patch_node(core, obj, lambda o: shares.entry_patch(o, gpr.spec.slice, gpr.id))
                reason = f"labelled {shares.share_label(gpr.spec.slice)}=true: the slice's pods may use its units here"
                events.append(self._event(gpr, "units-entered", name, reason, now))
        events.extend(
            Event(
                kind="restart-to-use-gpus",
                actor=ACTOR,
                reason="restart this server to run on the slice's GPU nodes",
                time=now,
                gpr_id=gpr.id,
                slice=gpr.spec.slice,
                data={"user": s.user, "server": s.name},
            )
            for s in servers
        )
        return events

    def _problems(self, obj: dict, name: str, gpr: GPR, count: int) -> list[str]:
        """Why ``count`` of the GPR's GPUs on the planning node ``name`` (of the node ``obj``) cannot be bound."""
        try:
            if sharing.host_of(name) == name:
                return entry_problems(read_node(obj, self.cluster), name, gpr.id, gpr.spec.slice, count)
            found = next((f for f in read_units(obj, self.cluster) if f.node.name == name), None)
        except NodeUnusable as e:
            return [str(e)]
        return shares.entry_problems(found, name, count)

    async def _undo_entry(self, core: client.CoreV1Api, gpr: GPR, current: dict[str, dict | None]) -> None:
        """Return nodes (and units) that an earlier, interrupted bind of this GPR entered, before the GPR fails."""
        for obj in current.values():
            if obj is None:
                continue
            found: FoundNode | None = read_node(obj, self.cluster)
            if found is not None and found.gpr == str(gpr.id):
                obj = await node_writes.patch_node(core, obj, objects.return_patch)
            await node_writes.patch_node(core, obj, lambda o: shares.undo_patch(o, gpr.spec.slice, gpr.id))

    async def unbind(self, gpr: GPR, servers: list[ServerRef], now: datetime) -> list[Event]:
        """Exit every node of the GPR, and its units from every share node; UnbindError (from drain_node,
        release_units) while the slice's pods remain on one.

        ``servers`` are not used: a server's pod on these nodes is evicted with the slice's other pods.
        """
        core = await self._core()
        events, waiting = [], []
        planning = self._gpus_by_node(gpr)
        for name in sorted({sharing.host_of(n) for n in planning}):
            obj = await self._read(core, name)
            if obj is None:
                events.append(self._event(gpr, "node-gone", name, "the node no longer exists; nothing to return", now))
                continue
            exit_node = drain_node if name in planning else release_units
            try:
                events.extend(await exit_node(core, obj, gpr, now, self.exit_grace, self._event))
            except UnbindError as e:
                events.extend(e.events)
                waiting.append(str(e))
        if waiting:
            raise UnbindError(f"cluster {self.cluster}: " + "; ".join(waiting), events)
        return events

    def _event(self, gpr: GPR, kind: str, node: str, reason: str, now: datetime, **data) -> Event:
        return Event(
            kind=kind,
            actor=ACTOR,
            reason=f"node {node}: {reason}",
            time=now,
            gpr_id=gpr.id,
            slice=gpr.spec.slice,
            data={"cluster": self.cluster, "node": node, **data},
        )

    # The slice on the cluster

    def _unavailable(self, doing: str, error: BaseException) -> ClusterUnavailable:
        return ClusterUnavailable(f"cluster {self.cluster}: cannot {doing} ({self.where}): {describe_error(error)}")

    async def check_slice(self, slice_name: str, namespaces: Sequence[str]) -> NamespacePlan:
        """What ensure_slice would do with the namespaces, changing nothing; SliceConflict when a namespace cannot
        be the slice's, ClusterUnavailable when the API fails."""
        api = await self._client()
        try:
            existing = await snapshot(SliceObjects(api, self.request_timeout), slice_name, namespaces)
        except API_ERRORS as e:
            raise self._unavailable(f"read the namespaces of slice {slice_name}", e) from None
        plan = plan_namespaces(slice_name, namespaces, existing)
        if plan.conflicts:
            raise SliceConflict(f"slice {slice_name}: " + "; ".join(plan.conflicts))
        return plan

    async def ensure_slice(self, slice_name: str, namespaces: Sequence[str], gpus: Sequence[str]) -> NamespacePlan:
        """Set up the slice's namespaces, ServiceAccount, RBAC and a quota of the GPUs (and units) it holds,
        ``gpus`` (none while it holds none); SliceConflict when a namespace belongs to another slice,
        ClusterUnavailable when the API fails."""
        api = await self._client()
        quota = shares.resource_counts(gpus)
        try:
            plan = await ensure_slice(
                api,
                slice_name,
                namespaces,
                self.role_templates,
                quota,
                self.namespace_grants,
                request_timeout=self.request_timeout,
            )
            return plan
        except API_ERRORS as e:
            raise self._unavailable(f"set up slice {slice_name}", e) from None

    async def set_slice_gpus(self, slice_name: str, namespaces: Sequence[str], gpus: Sequence[str]) -> None:
        """The slice's quota in each namespace: per resource, the GPUs (and units) ``gpus`` it holds, or no
        quota object while it holds none (see the module doc)."""
        api = await self._client()
        quota = shares.resource_counts(gpus)
        try:
            await set_slice_gpus(api, slice_name, namespaces, quota, request_timeout=self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"set the GPU quota of slice {slice_name}", e) from None

    async def remove_slice(self, slice_name: str) -> NamespacePlan:
        api = await self._client()
        try:
            return await remove_slice(api, slice_name, self.namespace_grants, request_timeout=self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"remove slice {slice_name}", e) from None

    async def slice_kubeconfig(self, slice_name: str, namespaces: Sequence[str], expiration: int) -> SliceKubeconfig:
        """A kubeconfig for the slice's ServiceAccount with a token valid ``expiration`` seconds (600 to 7 days)."""
        api = await self._client()
        try:
            return await make_kubeconfig(
                api,
                self.cluster,
                slice_name,
                namespaces,
                expiration=expiration,
                server=self.kubeconfig_server,
                request_timeout=self.request_timeout,
            )
        except API_ERRORS as e:
            raise self._unavailable(f"issue a token for slice {slice_name}", e) from None

    # The GPR custom resources

    async def gpr_resources(self) -> GPRResourceAPI:
        """The cluster's GPR custom resources; ClusterUnavailable when its config cannot be loaded."""
        return GPRResourceAPI(
            await self._client(), request_timeout=self.request_timeout, watch_timeout=self.watch_timeout
        )

    # Members' home volumes

    async def home_volumes(self, slice_name: str, namespaces: Sequence[str]) -> list[HomeVolume]:
        """The slice's members' home volumes in its namespaces here; ClusterUnavailable when the API fails."""
        try:
            return await list_home_volumes(await self._core(), slice_name, namespaces, self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"list the home volumes of slice {slice_name}", e) from None

    # Checks and quarantine (core/checks.py)

    check_kinds = frozenset({"rdma", "pvc", "nccl", "custom"})

    async def run_check(self, spec: CheckSpec, target: CheckTarget) -> Verdict:
        """rdma: from the node's Node Feature Discovery labels; pvc: the slice's volume claims; nccl and
        custom: in a Job on the node, in ``checks_namespace`` (checks.py). A share node's units are checked
        on that node, but not in a Job: it would ask for whole GPUs that the node does not offer."""
        host = sharing.host_of(target.node)
        if host != target.node and spec.kind in ("nccl", "custom"):
            why = f"{target.node} is MIG instances or shares of node {host}, and a {spec.kind} Job asks for whole GPUs"
            return checks.skipped(why)
        target = replace(target, node=host)
        if spec.kind == "rdma":
            return await self._check_rdma(target)
        try:
            api = await self._client()
        except ClusterUnavailable as e:
            return Verdict(checks.CheckStatus.FAILED, str(e))
        if spec.kind == "pvc":
            return await run_pvc_check(api, spec, target, self.request_timeout)
        job = CheckJob(api, spec, target, namespace=self.checks_namespace, request_timeout=self.request_timeout)
        return await job.run()

    async def _check_rdma(self, target: CheckTarget) -> Verdict:
        node = target.node
        try:
            obj = await self._read(await self._core(), node)
        except API_ERRORS as e:
            return checks.skipped(f"cannot read node {node}: {describe_error(e)}")
        if obj is None:
            return Verdict(checks.CheckStatus.FAILED, f"node {node} no longer exists")
        return checks.rdma_from_labels(node, (obj.get("metadata") or {}).get("labels") or {})

    async def quarantine(self, node: str, reason: str) -> None:
        """Cordon and label the node (objects.quarantine_patch); ClusterUnavailable when the API fails."""
        await self._patch_node(node, "quarantine", lambda obj: objects.quarantine_patch(obj, reason))

    async def clear(self, node: str) -> None:
        await self._patch_node(node, "clear the quarantine of", objects.clear_patch)

    async def _patch_node(self, node: str, doing: str, patch: Callable[[dict], dict]) -> None:
        """Patch the node (of a planning node: its Kubernetes node) with what ``patch`` makes of it."""
        node = sharing.host_of(node)
        try:
            core = await self._core()
            obj = await self._read(core, node)
            if obj is not None:
                await node_writes.patch_node(core, obj, patch, _request_timeout=self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"{doing} node {node}", e) from None

    # MIG layouts (mig_layouts.py)

    async def change_layout(
        self, node: str, mig: Mapping[str, int] | None, mig_config: str | None
    ) -> tuple[str | None, str]:
        """Label the node with the mig-parted config for ``mig``; the mig-manager does the rest."""
        try:
            core = await self._core()
            obj = await self._read(core, node)
            if obj is None:
                raise LayoutChangeError(f"node {node} no longer exists in cluster {self.cluster}")
            config = mig_layouts.mig_config(node, obj, mig, mig_config)
            await core.patch_node(node, mig_layouts.layout_patch(config), _request_timeout=self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"label node {node} for its MIG layout", e) from None
        return config, f"labelled node {node} {MIG_CONFIG_LABEL}={config} for the GPU Operator's mig-manager"

    async def layout_state(self, node: str, mig_config: str | None) -> tuple[str, str]:
        try:
            obj = await self._read(await self._core(), node)
        except API_ERRORS as e:
            return "pending", f"cannot read node {node}: {describe_error(e)}"
        return mig_layouts.change_state(node, obj, mig_config)

    # Dynamic node pools (pools.py)

    async def grow_pool(self, pool: NodePool, nodes: int) -> str:
        """Ask the cluster autoscaler for ``nodes`` more nodes of the pool: a PodTemplate and a
        ProvisioningRequest in ``pools_namespace``; the request's name. ClusterUnavailable when the API
        fails (a cluster without the ProvisioningRequest API answers 404: the message says so)."""
        name = pools.request_name(pool.name)
        namespace = self.pools_namespace
        try:
            api = await self._client()
            core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
            options = {"_preload_content": False, "_request_timeout": self.request_timeout}
            if await json_or_none(core.read_namespace(namespace, **options)) is None:
                await json_of(await core.create_namespace(objects.own_namespace(namespace), **options))
            template = pools.pod_template(pool, name, namespace)
            await json_of(await core.create_namespaced_pod_template(namespace, template, **options))
            body = pools.provisioning_request(pool, name, namespace, nodes)
            try:
                await json_of(
                    await custom.create_namespaced_custom_object(
                        pools.GROUP, pools.VERSION, namespace, pools.PLURAL, body, **options
                    )
                )
            except ApiException as e:
                if e.status == 404:
                    raise ClusterUnavailable(
                        f"cluster {self.cluster}: no ProvisioningRequest API ({pools.GROUP}/{pools.VERSION}): "
                        "install a Cluster Autoscaler that serves it to grow node pools"
                    ) from None
                raise
        except API_ERRORS as e:
            raise self._unavailable(f"ask pool {pool.name} for {nodes} node(s)", e) from None
        return name

    async def pool_requests(self, pool: str) -> list[pools.PoolRequest]:
        """The pool's ProvisioningRequests and what became of each; ClusterUnavailable when the API fails."""
        try:
            custom = client.CustomObjectsApi(await self._client())
            listed = await json_or_none(
                custom.list_namespaced_custom_object(
                    pools.GROUP,
                    pools.VERSION,
                    self.pools_namespace,
                    pools.PLURAL,
                    label_selector=f"{POOL_LABEL}={pool}",
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
            )
        except API_ERRORS as e:
            raise self._unavailable(f"list the requests of pool {pool}", e) from None
        return [pools.request_state(item) for item in (listed or {}).get("items") or []]

    async def end_pool_request(self, name: str) -> None:
        """Delete a ProvisioningRequest and its PodTemplate (either may be gone already)."""
        try:
            api = await self._client()
            options = {"_preload_content": False, "_request_timeout": self.request_timeout}
            await json_or_none(
                client.CustomObjectsApi(api).delete_namespaced_custom_object(
                    pools.GROUP, pools.VERSION, self.pools_namespace, pools.PLURAL, name, **options
                )
            )
            core = client.CoreV1Api(api)
            await json_or_none(core.delete_namespaced_pod_template(name, self.pools_namespace, **options))
        except API_ERRORS as e:
            raise self._unavailable(f"delete the pool request {name}", e) from None

    async def keep_pool_node(self, node: str) -> None:
        """Keep the cluster autoscaler from removing a pool node: egs-hub decides when it goes."""
        await self._patch_node(node, "keep pool", lambda _obj: pools.keep_patch())

    async def give_back_pool_node(self, node: str) -> None:
        """Cordon a pool node and let the cluster autoscaler remove it."""
        await self._patch_node(node, "give back pool", lambda _obj: pools.give_back_patch())

    # Events

    async def record_slice_event(self, namespaces: Sequence[str], notice: Notice, now: datetime) -> None:
        """One Event about each of the slice's namespaces; ClusterUnavailable when the API fails."""
        api = await self._client()
        try:
            for name in namespaces:
                await create_event(api, namespace_event(name, notice, now), request_timeout=self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"record the Event {notice.reason}", e) from None

    async def record_node_event(self, node: str, notice: Notice, now: datetime) -> None:
        node = sharing.host_of(node)  # of a planning node: its Kubernetes node
        api = await self._client()
        try:
            await create_event(api, node_event(node, notice, now), request_timeout=self.request_timeout)
        except API_ERRORS as e:
            raise self._unavailable(f"record the Event {notice.reason} on node {node}", e) from None
