"""Every operation of the REST API v1, built once for the sync and the async client.

Vocabulary: a *route* is an operation's method and path as the service declares it (routes.py,
written from the declarations); a *call* is one request to make (method, path under the API URL,
query, JSON body, and for a create a new Idempotency-Key, which its tries share)
with the function that turns its JSON answer into models; ``Operations`` has one
method per API operation, each building a call and handing it to the client's
``_send`` (the transport: httpx sync or async, which sends a call again as
transport.Retries says). ``read_answer``
turns a response into the call's result or an ``EGSError`` carrying the service's
error body. Durations are sent as whole seconds or the service's duration text,
times as ISO-8601 (a naive ``datetime`` is taken to be local time).
"""

from __future__ import annotations

import json
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import ValidationError

from ..core import resources
from ..core.resources import (
    GPR,
    Alerts,
    CapacityPlan,
    CheckRun,
    Cluster,
    ClusterChecklist,
    ClusterPrices,
    Endpoint,
    Event,
    Eviction,
    GPUMetrics,
    GPUs,
    Health,
    Inventory,
    MaintenanceWindow,
    Node,
    NodePool,
    Project,
    QueuedGPR,
    Resource,
    Schedule,
    Server,
    ServerRegistration,
    ServerRestart,
    Slice,
    SliceKubeconfig,
    Template,
    UsageReport,
    UsedUtilization,
    WaitTimes,
    Workloads,
    WorkspaceRequest,
)
from .errors import EGSError
from .routes import ROUTES

IDEMPOTENCY_KEY = "Idempotency-Key"
Result = TypeVar("Result")
Model = TypeVar("Model", bound=Resource)
Duration = timedelta | int | str
Time = datetime | str


@dataclass(frozen=True)
class Call(Generic[Result]):
    """``key``: a create's Idempotency-Key, made once per call, so that each of its tries sends the same."""

    method: str
    path: str
    parse: Callable[[Any], Result]
    params: dict[str, str] = field(default_factory=dict)
    body: dict | None = None
    key: str | None = None

    @property
    def retried(self) -> bool:
        """Whether the call may be sent again when it got no answer, or a 502 or 503 (transport.Retries):
        a GET, or a create with its key; the service makes a keyed create once however often it comes."""
        return self.method == "GET" or self.key is not None

    @property
    def headers(self) -> dict[str, str]:
        return {IDEMPOTENCY_KEY: self.key} if self.key is not None else {}


def _route(operation: str, **path: str | int) -> tuple[str, str]:
    """The method of ``operation`` (its operationId: routes.py) and its path with ``path``'s parameters."""
    route = ROUTES[operation]
    return route.method, route.path.format(**{name: _segment(value) for name, value in path.items()})


def _server_route(method: str, noun: str, user: str, server: str) -> tuple[str, str]:
    """The route of a user's default server (``server`` empty) or of a named one."""
    if server:
        return _route(f"{method}_{noun}_user_server", user=user, server=server)
    return _route(f"{method}_{noun}_user", user=user)


def _create(operation: str, parse: Callable[[Any], Result], body: dict) -> Call[Result]:
    """A POST that creates something, with a new Idempotency-Key."""
    return Call(*_route(operation), parse, body=body, key=str(uuid.uuid4()))


# Items asked for per page when following cursors: within every list endpoint's maximum.
PAGE_LIMIT = 1000


@dataclass(frozen=True)
class Pages(Generic[Result]):
    """A list call made page by page, following ``next_cursor`` (the service's cursor pages).

    The pages' ``key`` items are joined into one answer, which ``call.parse`` reads. ``most``:
    stop once this many items are in (None: every page). ``backwards``: pages go back in time
    and each lists its items oldest first (the audit log); the joined answer is oldest first,
    and ``most`` keeps the newest.
    """

    call: Call[Result]
    key: str
    most: int | None = None
    backwards: bool = False

    def page(self, cursor: str | None, page_limit: int = PAGE_LIMIT) -> Call[dict]:
        """The call of the page after ``cursor`` (None: the first), of at most ``page_limit`` items."""
        limit = page_limit if self.most is None else min(self.most, page_limit)
        params = {**self.call.params, "limit": str(limit)}
        if cursor is not None:
            params["cursor"] = cursor
        return replace(self.call, parse=self._check, params=params)

    def _check(self, data: Any) -> dict:
        if not (isinstance(data, Mapping) and isinstance(data.get(self.key), list) and "next_cursor" in data):
            raise EGSError(
                200, f"GET {self.call.path} answered no page of {self.key}; is the service older than this client?"
            )
        return dict(data)

    def done(self, answers: list[dict]) -> bool:
        if answers[-1]["next_cursor"] is None:
            return True
        return self.most is not None and sum(len(a[self.key]) for a in answers) >= self.most

    def join(self, answers: list[dict]) -> Result:
        ordered = reversed(answers) if self.backwards else answers
        items = [item for answer in ordered for item in answer[self.key]]
        if self.most is not None:
            items = items[-self.most :] if self.backwards else items[: self.most]
        return self.call.parse({**answers[-1], self.key: items, "next_cursor": None})


def read_answer(call: Call[Result], url: str, status: int, content_type: str, content: bytes) -> Result:
    """The call's result from the service's answer, or the EGSError the answer describes."""
    data = _json(content) if content_type.startswith("application/json") else None
    if status >= 400:
        if isinstance(data, Mapping) and isinstance(data.get("message"), str):
            raise EGSError(int(data.get("status", status)), data["message"], data.get("field"))
        raise EGSError(status, f"{call.method} {url} answered {status} without an EGS error body; is it the EGS API?")
    if status == 204:
        return call.parse(None)
    if data is None:
        raise EGSError(status, f"{call.method} {url} answered {status} without JSON; is it the EGS API v1 URL?")
    return call.parse(data)


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _segment(value: str | int) -> str:
    return quote(str(value), safe="")


def _duration(value: Duration) -> int | str:
    if isinstance(value, timedelta):
        return int(value.total_seconds())
    return value


def _time(value: Time) -> str:
    if isinstance(value, datetime):
        return value.astimezone().isoformat()
    return value


def _encode(value: Any) -> Any:
    """A value as the API wants it: durations in seconds, times as ISO-8601, in objects too."""
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, timedelta):
        return _duration(value)
    if isinstance(value, datetime):
        return _time(value)
    return value


def _query(**params: Any) -> dict[str, str]:
    query = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            query[name] = "true" if value else "false"
        else:
            query[name] = str(_encode(value))
    return query


def _body(**fields: Any) -> dict:
    """The fields that were given (not None), encoded."""
    return {name: _encode(value) for name, value in fields.items() if value is not None}


def _nothing(_: Any) -> None:
    return None


def _list_of(cls: type[Model], key: str) -> Callable[[Any], list[Model]]:
    return lambda data: [_read(cls, item) for item in data[key]]


def _answer(name: str | None) -> Callable[[Any], Any]:
    """How an answer of the resource model named ``name`` (routes.Route.answer) is read."""
    if name is None:
        return _nothing
    if name == "dict":
        return dict
    return _one(getattr(resources, name))


def _one(cls: type[Model]) -> Callable[[Any], Model]:
    return lambda data: _read(cls, data)


def _read(cls: type[Model], data: Any) -> Model:
    """The model ``data`` describes; an EGSError naming the first mismatch when it describes none."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        error = e.errors()[0]
        where = ".".join(map(str, error["loc"])) or "the answer"
        raise EGSError(
            200, f"the service's {cls.__name__} cannot be read ({where}: {error['msg']}); is it older than this client?"
        ) from None


class Operations(ABC):
    """One method per API operation; the client class supplies the transport, ``_send``.

    List methods answer every item, following the service's cursor pages of ``page_limit``
    items (at most 1000).
    """

    page_limit: int = PAGE_LIMIT

    @abstractmethod
    def _send(self, call: Call[Result]) -> Result:
        """Make the call and return its result (the async client: an awaitable of it)."""

    @abstractmethod
    def _send_pages(self, pages: Pages[Result]) -> Result:
        """Make the list call page by page until ``pages.done`` and return ``pages.join`` of the
        answers (the async client: an awaitable of it)."""

    def call(self, operation: str, body: Mapping | None = None, **arguments: Any) -> Any:
        """Any operation by its operationId (the document's; ``routes.ROUTES``), such as one this client
        has no method for yet: its path parameters and query arguments by name, ``body`` its JSON body; the
        answer read into the operation's resource model (None without a body, a dict for any JSON object)."""
        if operation not in ROUTES:
            raise ValueError(f"no operation {operation!r}; the document's operationIds are in egs_hub.client.routes")
        route = ROUTES[operation]
        names = re.findall(r"\{(\w+)\}", route.path)
        missing = [name for name in names if arguments.get(name) is None]
        if missing:
            raise ValueError(f"{operation} needs its path parameters {', '.join(missing)}")
        path = {name: arguments.pop(name) for name in names}
        parse = _answer(route.answer)
        key = str(uuid.uuid4()) if route.idempotent else None
        encoded = None if body is None else _encode(body)
        return self._send(Call(*_route(operation, **path), parse, _query(**arguments), encoded, key))

    # health and the document

    def health(self) -> Health:
        return self._send(Call(*_route("get_health"), _one(Health)))

    def openapi(self) -> dict:
        """The OpenAPI 3.1 document of the API, as JSON."""
        return self._send(Call(*_route("get_openapi_json"), dict))

    # projects and workspace requests

    def projects(self) -> list[Project]:
        """Every project (admins), or those the caller is a project admin of."""
        return self._send(Call(*_route("get_projects"), _list_of(Project, "projects")))

    def project(self, name: str) -> Project:
        return self._send(Call(*_route("get_projects_name", name=name), _one(Project)))

    def create_project(
        self,
        name: str,
        *,
        display_name: str | None = None,
        admin_group: str | None = None,
        quota: Mapping | None = None,
        share: float | None = None,
    ) -> Project:
        """Admins: a project; its admins are the hub group ``admin_group`` (default NAME-admins)."""
        body = _body(name=name, display_name=display_name, admin_group=admin_group, quota=quota, share=share)
        return self._send(Call(*_route("post_projects"), _one(Project), body=body))

    def update_project(self, name: str, **changes: Any) -> Project:
        """Admins: change ``display_name``, ``quota`` (per key) or ``share``."""
        return self._send(Call(*_route("patch_projects_name", name=name), _one(Project), body=_encode(changes)))

    def delete_project(self, name: str) -> None:
        return self._send(Call(*_route("delete_projects_name", name=name), _nothing))

    def add_project_admin(self, name: str, user: str) -> Project:
        return self._send(Call(*_route("put_projects_name_admins_user", name=name, user=user), _one(Project)))

    def remove_project_admin(self, name: str, user: str) -> Project:
        return self._send(Call(*_route("delete_projects_name_admins_user", name=name, user=user), _one(Project)))

    def workspace_requests(self, status: str | None = None) -> list[WorkspaceRequest]:
        """The caller's own workspace requests and those of the projects they manage, newest first."""
        call = Call(
            "GET", "workspace-requests", _list_of(WorkspaceRequest, "workspace_requests"), _query(status=status)
        )
        return self._send(call)

    def workspace_request(self, request_id: int) -> WorkspaceRequest:
        return self._send(Call(*_route("get_workspace_requests_id", id=request_id), _one(WorkspaceRequest)))

    def request_workspace(
        self,
        name: str,
        *,
        project: str | None = None,
        display_name: str | None = None,
        purpose: str | None = None,
        members: list[str] | None = None,
        quota: Mapping | None = None,
        clusters: list[str] | None = None,
    ) -> WorkspaceRequest:
        """Ask a project's admins (``project``, default ``default``) for a new workspace."""
        body = _body(
            project=project,
            name=name,
            display_name=display_name,
            purpose=purpose,
            members=members,
            quota=quota,
            clusters=clusters,
        )
        return self._send(_create("post_workspace_requests", _one(WorkspaceRequest), body))

    def approve_workspace_request(self, request_id: int, reason: str = "", **edits: Any) -> WorkspaceRequest:
        """A project's admins: make the workspace, with ``quota``, ``policy`` or ``clusters`` changed if given."""
        return self._send(
            Call(
                *_route("post_workspace_requests_id_approve", id=request_id),
                _one(WorkspaceRequest),
                body={"reason": reason, **_encode(edits)},
            )
        )

    def deny_workspace_request(self, request_id: int, reason: str = "") -> WorkspaceRequest:
        return self._send(
            Call(
                *_route("post_workspace_requests_id_deny", id=request_id),
                _one(WorkspaceRequest),
                body={"reason": reason},
            )
        )

    # slices

    def slices(self) -> list[Slice]:
        """The slices the caller is a member of (every slice, for admins)."""
        return self._send(Call(*_route("get_slices"), _list_of(Slice, "slices")))

    def slice(self, name: str) -> Slice:
        return self._send(Call(*_route("get_slices_name", name=name), _one(Slice)))

    def create_slice(
        self,
        name: str,
        *,
        display_name: str | None = None,
        group: str | None = None,
        quota: Mapping | None = None,
        policy: Mapping | None = None,
        namespaces: Mapping | None = None,
        members: list[str] | None = None,
    ) -> Slice:
        """Admins: a new slice; ``quota`` and ``policy`` take the API's keys (durations as seconds or text)."""
        body = _body(
            name=name,
            display_name=display_name,
            group=group,
            quota=quota,
            policy=policy,
            namespaces=namespaces,
            members=members,
        )
        return self._send(_create("post_slices", _one(Slice), body))

    def update_slice(self, name: str, **changes: Any) -> Slice:
        """Admins: change ``display_name``, ``quota``, ``policy`` (per key) or ``namespaces``."""
        return self._send(Call(*_route("patch_slices_name", name=name), _one(Slice), body=_encode(changes)))

    def delete_slice(self, name: str) -> None:
        return self._send(Call(*_route("delete_slices_name", name=name), _nothing))

    def add_member(self, slice_name: str, user: str) -> Slice:
        return self._send(Call(*_route("put_slices_name_members_user", name=slice_name, user=user), _one(Slice)))

    def remove_member(self, slice_name: str, user: str) -> Slice:
        return self._send(Call(*_route("delete_slices_name_members_user", name=slice_name, user=user), _one(Slice)))

    def slice_kubeconfig(self, name: str, cluster: str, expiration: int | timedelta | None = None) -> SliceKubeconfig:
        """Members: a kubeconfig for the slice's namespaces on a Kubernetes cluster, its token valid ``expiration``
        (whole seconds or a timedelta, 10 minutes to 7 days; default a day)."""
        params = _query(cluster=cluster, expiration=expiration)
        return self._send(Call(*_route("get_slices_name_kubeconfig", name=name), _one(SliceKubeconfig), params=params))

    # clusters

    def clusters(self) -> list[Cluster]:
        return self._send(Call(*_route("get_clusters"), _list_of(Cluster, "clusters")))

    def register_cluster(
        self,
        name: str,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        in_cluster: bool = False,
        node_selector: str | None = None,
        exit_grace: Duration | None = None,
        project: str | None = None,
    ) -> Cluster:
        """Admins: drive a Kubernetes cluster, by a kubeconfig file on the service's host or in-cluster config;
        ``node_selector`` and ``exit_grace`` default to the service's (``egs.io/slice``, 5 minutes), ``project``
        to the default project (whose clusters serve every project)."""
        where = {"in_cluster": True} if in_cluster else _body(kubeconfig=kubeconfig, context=context)
        body = {"name": name, **where, **_body(node_selector=node_selector, exit_grace=exit_grace, project=project)}
        return self._send(Call(*_route("post_clusters"), _one(Cluster), body=body))

    def move_cluster(self, name: str, project: str) -> Cluster:
        """Admins: put a cluster in ``project``: only that project's slices are planned there (the default
        project's clusters serve every project)."""
        return self._send(Call(*_route("patch_clusters_name", name=name), _one(Cluster), body={"project": project}))

    def remove_cluster(self, name: str) -> None:
        return self._send(Call(*_route("delete_clusters_name", name=name), _nothing))

    def prices(self, cluster: str) -> ClusterPrices:
        """A cluster's prices per GPU-hour, per shape as ``inventory()`` names it."""
        return self._send(Call(*_route("get_clusters_name_prices", name=cluster), _one(ClusterPrices)))

    def set_prices(self, cluster: str, prices: Mapping[str, float]) -> ClusterPrices:
        """Admins: replace a cluster's prices per GPU-hour (``{}``: no prices)."""
        call = Call(*_route("put_clusters_name_prices", name=cluster), _one(ClusterPrices), body=dict(prices))
        return self._send(call)

    # usage and cost

    def usage(self, group_by: str = "slice", period: str = "month", since: Time | None = None) -> UsageReport:
        """GPU-hours reserved and used, cost and mean utilisation per ``group_by`` (project, slice or user)
        and ``period`` (week or month) from the period ``since`` is in (default: the current one)."""
        params = _query(group_by=group_by, period=period, since=since)
        return self._send(Call(*_route("get_usage"), _one(UsageReport), params))

    # GPR templates

    def templates(self, slice: str | None = None) -> list[Template]:
        """The GPR templates the caller's slices (or ``slice``) may use; admins: all of them."""
        return self._send(Call(*_route("get_templates"), _list_of(Template, "templates"), _query(slice=slice)))

    def template(self, name: str) -> Template:
        return self._send(Call(*_route("get_templates_name", name=name), _one(Template)))

    def create_template(
        self,
        name: str,
        duration: Duration,
        *,
        gpus: int | None = None,
        nodes: int | None = None,
        cluster: str | None = None,
        shape: str | None = None,
        priority: int | None = None,
        idle_timeout: Duration | None = None,
        preemptible: bool | None = None,
        description: str | None = None,
        project: str | None = None,
        slice: str | None = None,
    ) -> Template:
        """Admins: a named GPR shape for everyone, a ``project``'s slices or one ``slice``."""
        body = _body(
            name=name,
            duration=duration,
            gpus=gpus,
            nodes=nodes,
            cluster=cluster,
            shape=shape,
            priority=priority,
            idle_timeout=idle_timeout,
            preemptible=preemptible,
            description=description,
            project=project,
            slice=slice,
        )
        return self._send(Call(*_route("post_templates"), _one(Template), body=body))

    def update_template(self, name: str, **changes: Any) -> Template:
        """Admins: change a template's fields (the ``create_template`` keys); None clears one that may be empty."""
        return self._send(Call(*_route("patch_templates_name", name=name), _one(Template), body=_encode(changes)))

    def delete_template(self, name: str) -> None:
        return self._send(Call(*_route("delete_templates_name", name=name), _nothing))

    # inventory

    def inventory(self) -> Inventory:
        return self._send(Call(*_route("get_inventory"), _one(Inventory)))

    def schedule(self, start: Time | None = None, end: Time | None = None) -> Schedule:
        """Every node's windows in [start, end) (default: a day ago to a week ahead)."""
        return self._send(Call(*_route("get_inventory_schedule"), _one(Schedule), _query(start=start, end=end)))

    def maintenance(self, cluster: str, node: str) -> list[MaintenanceWindow]:
        """Admins: the node's maintenance windows that have not ended."""
        return self._send(
            Call(
                *_route("get_nodes_cluster_name_maintenance", cluster=cluster, name=node),
                _list_of(MaintenanceWindow, "maintenance"),
            )
        )

    # dynamic node pools

    def pools(self, cluster: str) -> list[NodePool]:
        """The cluster's dynamic node pools, with their nodes and what was asked of them."""
        return self._send(Call(*_route("get_clusters_name_pools", name=cluster), _list_of(NodePool, "pools")))

    def pool(self, cluster: str, name: str) -> NodePool:
        return self._send(Call(*_route("get_clusters_name_pools_pool", name=cluster, pool=name), _one(NodePool)))

    def add_pool(
        self,
        cluster: str,
        name: str,
        shape: str,
        max_nodes: int,
        *,
        min_nodes: int = 0,
        scale_up_delay: Duration | None = None,
        scale_down_idle: Duration | None = None,
        provisioning_class: str | None = None,
    ) -> NodePool:
        """Admins: a pool of ``shape`` nodes ("H100-80GB x8", labelled ``egs.io/pool=<name>``) that the
        cluster's autoscaler adds when the queue needs them and egs-hub gives back when idle; the
        service's defaults where a value is left None."""
        fields = {
            "scale_up_delay": scale_up_delay,
            "scale_down_idle": scale_down_idle,
            "provisioning_class": provisioning_class,
        }
        body = {"name": name, "shape": shape, "min_nodes": min_nodes, "max_nodes": max_nodes}
        body.update({key: value for key, value in fields.items() if value is not None})
        return self._send(Call(*_route("post_clusters_name_pools", name=cluster), _one(NodePool), body=_encode(body)))

    def delete_pool(self, cluster: str, name: str) -> None:
        """Admins: delete the pool and its requests to the autoscaler; its nodes stay."""
        return self._send(Call(*_route("delete_clusters_name_pools_pool", name=cluster, pool=name), _nothing))

    # what-if capacity plans

    def plan_capacity(
        self,
        since: Duration | None = None,
        *,
        add_nodes: Mapping[str, int] | None = None,
        remove_nodes: Mapping[str, int] | None = None,
    ) -> CapacityPlan:
        """Admins: replay the GPRs recorded over ``since`` (the service's default: 30 days) on the nodes as
        they are and with ``add_nodes`` / ``remove_nodes`` ({shape: count}), in the background; follow it
        with ``capacity_plan``."""
        body: dict[str, Any] = {
            "add_nodes": [{"shape": s, "count": n} for s, n in (add_nodes or {}).items()],
            "remove_nodes": [{"shape": s, "count": n} for s, n in (remove_nodes or {}).items()],
        }
        if since is not None:
            body["since"] = since
        return self._send(Call(*_route("post_capacity_plans"), _one(CapacityPlan), body=_encode(body)))

    def capacity_plans(self) -> list[CapacityPlan]:
        """Admins: the last ten what-if capacity plans, the latest first."""
        return self._send(Call(*_route("get_capacity_plans"), _list_of(CapacityPlan, "plans")))

    def capacity_plan(self, plan_id: int) -> CapacityPlan:
        """Admins: a capacity plan's progress, then its result (recorded and replayed waits, GPUs bound)."""
        return self._send(Call(*_route("get_capacity_plans_id", id=int(plan_id)), _one(CapacityPlan)))

    # inference endpoints

    def endpoints(self, slice: str | None = None) -> list[Endpoint]:
        """The inference endpoints of the caller's slices (or of ``slice``); admins: all of them."""
        return self._send(Call(*_route("get_endpoints"), _list_of(Endpoint, "endpoints"), _query(slice=slice)))

    def endpoint(self, slice: str, name: str) -> Endpoint:
        """One endpoint: status, url (its path at the hub), replicas and their GPRs, requests/s, latency."""
        return self._send(Call(*_route("get_endpoints_slice_name", slice=slice, name=name), _one(Endpoint)))

    def create_endpoint(
        self,
        slice: str,
        name: str,
        runtime: str,
        *,
        model: str | None = None,
        gpus: int | None = None,
        template: str | None = None,
        cluster: str | None = None,
        command: list[str] | None = None,
        image: str | None = None,
        args: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        min_replicas: int | None = None,
        max_replicas: int | None = None,
        idle_timeout: Duration | None = None,
        duration: Duration | None = None,
        target_concurrency: int | None = None,
        health_path: str | None = None,
    ) -> Endpoint:
        """Serve ``model`` (runtime vllm) or ``command`` (runtime command: ``{port}`` stands for its port)
        from ``slice``'s GPUs at ``Endpoint.url``; each replica is a GPR of ``gpus`` (or of ``template``)."""
        body = _body(
            slice=slice,
            name=name,
            runtime=runtime,
            model=model,
            gpus=gpus,
            template=template,
            cluster=cluster,
            command=command,
            image=image,
            args=args,
            env=env,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            idle_timeout=idle_timeout,
            duration=duration,
            target_concurrency=target_concurrency,
            health_path=health_path,
        )
        return self._send(_create("post_endpoints", _one(Endpoint), body))

    def update_endpoint(self, slice: str, name: str, **changes: Any) -> Endpoint:
        """Change an endpoint's fields (the ``create_endpoint`` keys but slice, name and runtime)."""
        return self._send(
            Call(*_route("patch_endpoints_slice_name", slice=slice, name=name), _one(Endpoint), body=_encode(changes))
        )

    def scale_endpoint(self, slice: str, name: str, replicas: int) -> Endpoint:
        """This many replicas now, kept for the endpoint's idle_timeout at least, then following the load."""
        return self._send(
            Call(
                *_route("post_endpoints_slice_name_scale", slice=slice, name=name),
                _one(Endpoint),
                body={"replicas": replicas},
            )
        )

    def delete_endpoint(self, slice: str, name: str) -> None:
        """Delete an endpoint: its replicas' GPRs are given back."""
        return self._send(Call(*_route("delete_endpoints_slice_name", slice=slice, name=name), _nothing))

    # nodes: health, checks, quarantine

    def nodes(self, cluster: str | None = None, health: str | None = None) -> list[Node]:
        """Nodes with their health, holders, maintenance and last checks: every node for admins, those their
        slices hold for members; only ``cluster``'s, or those of ``health`` (healthy, unhealthy, quarantined,
        unknown), when given."""
        return self._send(Call(*_route("get_nodes"), _list_of(Node, "nodes"), _query(cluster=cluster, health=health)))

    def node(self, cluster: str, name: str) -> Node:
        """Admins: one node with its GPUs, holders, maintenance and the last run of each check."""
        return self._send(Call(*_route("get_nodes_cluster_name", cluster=cluster, name=name), _one(Node)))

    def quarantine_node(self, cluster: str, name: str, reason: str = "") -> Node:
        """Admins: take a node out of planning (and its cluster's scheduler off it) until it is cleared."""
        return self._send(
            Call(
                *_route("post_nodes_cluster_name_quarantine", cluster=cluster, name=name),
                _one(Node),
                body={"reason": reason},
            )
        )

    def clear_node(self, cluster: str, name: str, reason: str = "") -> Node:
        """Admins: take a node out of quarantine."""
        return self._send(
            Call(
                *_route("post_nodes_cluster_name_clear", cluster=cluster, name=name),
                _one(Node),
                body={"reason": reason},
            )
        )

    def check_node(self, cluster: str, name: str) -> Node:
        """Admins: run the cluster's entry checks on a node no GPR holds, in the background (the answer
        has them pending); a quarantined node whose checks all pass is cleared."""
        return self._send(Call(*_route("post_nodes_cluster_name_checks", cluster=cluster, name=name), _one(Node)))

    def cluster_checks(self, cluster: str) -> ClusterChecklist:
        """The checklist a cluster's nodes pass at a GPR's entry and exit."""
        return self._send(Call(*_route("get_clusters_name_checks", name=cluster), _one(ClusterChecklist)))

    def set_cluster_checks(self, cluster: str, checks: list[Mapping[str, Any]]) -> ClusterChecklist:
        """Admins: replace a cluster's checklist (each check: name, kind, at, timeout, thresholds, command, image)."""
        call = Call(*_route("put_clusters_name_checks", name=cluster), _one(ClusterChecklist), body={"checks": checks})
        return self._send(call)

    # GPRs

    def gpr_checks(self, gpr_id: int) -> list[CheckRun]:
        """The checks of the GPR's nodes at entry and exit, with status, values and log."""
        return self._send(Call(*_route("get_gprs_id_checks", id=gpr_id), _list_of(CheckRun, "checks")))

    def wait_times(
        self,
        slice: str,
        duration: Duration | None = None,
        *,
        template: str | None = None,
        gpus: int | None = None,
        nodes: int | None = None,
        priority: int | None = None,
        shape: str | None = None,
        cluster: str | None = None,
        start_after: Time | None = None,
        gpu_share: float | None = None,
    ) -> WaitTimes:
        """When a GPR like this would start, on every shape and cluster that could serve it; ``template``
        gives what is left out."""
        body = _body(
            slice=slice,
            template=template,
            duration=duration,
            gpus=gpus,
            nodes=nodes,
            priority=priority,
            shape=shape,
            cluster=cluster,
            start_after=start_after,
            gpu_share=gpu_share,
        )
        return self._send(Call(*_route("post_wait_times"), _one(WaitTimes), body=body))

    def gprs(self, slice: str | None = None, status: str | None = None) -> list[GPR]:
        """Every GPR of the caller's slices (or of ``slice``) in id order, all pages."""
        call = Call(*_route("get_gprs"), _list_of(GPR, "gprs"), _query(slice=slice, status=status))
        return self._send_pages(Pages(call, "gprs"))

    def gpr(self, gpr_id: int) -> GPR:
        return self._send(Call(*_route("get_gprs_id", id=gpr_id), _one(GPR)))

    def create_gpr(
        self,
        slice: str,
        duration: Duration | None = None,
        *,
        template: str | None = None,
        gpus: int | None = None,
        nodes: int | None = None,
        name: str | None = None,
        priority: int | None = None,
        shape: str | None = None,
        cluster: str | None = None,
        start_after: Time | None = None,
        idle_timeout: Duration | None = None,
        preemptible: bool | None = None,
        gpu_share: float | None = None,
    ) -> GPR:
        """Ask for ``gpus`` GPUs (or ``nodes`` whole nodes, or a ``gpu_share`` of one time-sliced GPU) in
        ``slice`` for ``duration``; a ``template`` (``templates()``) gives what is left out."""
        body = _body(
            slice=slice,
            template=template,
            duration=duration,
            gpus=gpus,
            nodes=nodes,
            name=name,
            priority=priority,
            shape=shape,
            cluster=cluster,
            start_after=start_after,
            idle_timeout=idle_timeout,
            preemptible=preemptible,
            gpu_share=gpu_share,
        )
        return self._send(_create("post_gprs", _one(GPR), body))

    def update_gpr(self, gpr_id: int, **changes: Any) -> GPR:
        """Edit a GPR before it is provisioned (owner), or change its priority (admins).

        Keys are the GPR's fields (``gpus``, ``nodes``, ``duration``, ``priority``, ``shape``, ...);
        None clears one that may be empty.
        """
        return self._send(Call(*_route("patch_gprs_id", id=gpr_id), _one(GPR), body=_encode(changes)))

    def cancel_gpr(self, gpr_id: int, reason: str = "") -> GPR:
        """Cancel a GPR that holds no GPUs yet."""
        return self._send(Call(*_route("delete_gprs_id", id=gpr_id), _one(GPR), body={"reason": reason}))

    def release_gpr(self, gpr_id: int, reason: str = "") -> GPR:
        """End a provisioned GPR before its window ends (early release)."""
        return self._send(Call(*_route("post_gprs_id_release", id=gpr_id), _one(GPR), body={"reason": reason}))

    def approve_gpr(self, gpr_id: int, reason: str = "") -> GPR:
        return self._send(Call(*_route("post_gprs_id_approve", id=gpr_id), _one(GPR), body={"reason": reason}))

    def deny_gpr(self, gpr_id: int, reason: str = "") -> GPR:
        return self._send(Call(*_route("post_gprs_id_deny", id=gpr_id), _one(GPR), body={"reason": reason}))

    # queue and evictions

    def queue(self) -> list[QueuedGPR]:
        """Queued GPRs in the planner's order (others' names hidden)."""
        return self._send_pages(Pages(Call(*_route("get_queue"), _list_of(QueuedGPR, "queue")), "queue"))

    def evictions(self) -> list[Eviction]:
        """Admins: the evictions the planner proposes now."""
        return self._send(Call(*_route("get_queue_evictions"), _list_of(Eviction, "evictions")))

    def confirm_eviction(self, gpr_id: int, victims: list[int]) -> Eviction:
        """Admins: issue the planner's proposed eviction for ``gpr_id`` (its current victims)."""
        body = {"gpr_id": gpr_id, "victims": list(victims)}
        return self._send(Call(*_route("post_queue_evictions"), _one(Eviction), body=body))

    # the audit log

    def events(
        self, gpr: int | None = None, slice: str | None = None, since: Time | None = None, limit: int | None = None
    ) -> list[Event]:
        """Audit events, oldest first: every one that matches, or the newest ``limit``."""
        call = Call(*_route("get_events"), _list_of(Event, "events"), _query(gpr=gpr, slice=slice, since=since))
        return self._send_pages(Pages(call, "events", most=limit, backwards=True))

    # GPU metrics

    def gpus(self, sort: str = "node") -> GPUs:
        """Latest readings of the GPUs the caller sees; ``sort`` by node, temperature, power, utilization or memory."""
        return self._send(Call(*_route("get_gpus"), _one(GPUs), _query(sort=sort)))

    def gpu_utilization(self, since: Time | None = None, step: Duration | None = None) -> UsedUtilization:
        """Mean utilisation of the caller's GPUs (the last 24 h at most) from ``since`` per ``step`` (5m multiples)."""
        query = _query(since=since, step=step)
        return self._send(Call(*_route("get_gpus_utilization"), _one(UsedUtilization), query))

    def gpu_metrics(self, uuid: str, since: Time | None = None, step: Duration | None = None) -> GPUMetrics:
        """A GPU's readings of the last hour (from ``since``), averaged per ``step``."""
        query = _query(since=since, step=step)
        return self._send(Call(*_route("get_gpus_uuid_metrics", uuid=uuid), _one(GPUMetrics), query))

    def workloads(self, slice: str | None = None) -> Workloads:
        """Every workload on the caller's slices (or ``slice``), all pages."""
        return self._send_pages(
            Pages(Call(*_route("get_workloads"), _one(Workloads), _query(slice=slice)), "workloads")
        )

    def alerts(
        self, slice: str | None = None, since: Time | None = None, active: bool | None = None, limit: int | None = None
    ) -> Alerts:
        """Alerts newest first: every one that matches, or the newest ``limit``."""
        call = Call(*_route("get_alerts"), _one(Alerts), _query(slice=slice, since=since, active=active))
        return self._send_pages(Pages(call, "alerts", most=limit))

    # servers (the spawner's side)

    def servers(self, slice: str | None = None) -> list[Server]:
        return self._send(Call(*_route("get_servers"), _list_of(Server, "servers"), _query(slice=slice)))

    def register_server(self, user: str, server: str = "", *, slice: str) -> ServerRegistration:
        """Record that ``user``'s server (named ``server``) starts in ``slice``; answers the GPUs it may use."""
        route = _server_route("put", "servers", user, server)
        return self._send(Call(*route, _one(ServerRegistration), body={"slice": slice}))

    def forget_server(self, user: str, server: str = "") -> None:
        return self._send(Call(*_server_route("delete", "servers", user, server), _nothing))

    def restart_server(self, user: str, server: str = "") -> ServerRestart:
        """Restart ``user``'s running server (so it comes back with its slice's GPUs now); answers at once."""
        return self._send(Call(*_server_route("post", "server_restarts", user, server), _one(ServerRestart)))
