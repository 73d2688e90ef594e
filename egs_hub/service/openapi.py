"""The OpenAPI 3.1 document of REST API v1.

Schemas come from the models: request bodies from ``core.requests`` (the ones the
handlers parse with), answers from ``core.resources`` (the ones the handlers answer
with and the client decodes into), query parameters from ``service.parameters`` (the
ones the handlers read them with), path parameters from the body fields' types. What
is written here is the paths: each operation's summary, and which parameters, body and
answers it has (the tests hold the paths and methods to the route table).
"""

from __future__ import annotations

import re

from pydantic import TypeAdapter

from ..core.requests import BODIES, GPRId, SliceName, TemplateName, UserName, body_required, body_schemas
from ..core.resources import resource_schemas
from .parameters import (
    AlertsQuery,
    EndpointsQuery,
    EventsQuery,
    GPRsQuery,
    GPUsQuery,
    KubeconfigQuery,
    MetricsQuery,
    NodesQuery,
    QueueQuery,
    ScheduleQuery,
    ServersQuery,
    TemplatesQuery,
    UsageQuery,
    UtilizationQuery,
    WorkloadsQuery,
    WorkspaceRequestsQuery,
    documented,
)

REF = "#/components/schemas/{model}"
SCHEMAS = {**resource_schemas(REF), **body_schemas(REF)}
BODY_MODELS = {cls.__name__: cls for cls in BODIES}


def _ref(name: str) -> dict:
    return {"$ref": REF.format(model=name)}


_ERRORS = {
    "400": "malformed input; `field` names it",
    "401": "no hub token or login",
    "403": "not allowed: not a member, or not an admin",
    "404": "no such thing",
    "409": "conflicts with the current state, or (a create) its Idempotency-Key was sent with another request",
    "413": "the request body is over the service's limit (max_body_bytes); nothing was read or changed",
    "422": "well formed but not acceptable (policy, capacity)",
    "502": "the hub did not answer; nothing was changed",
    "503": "a cluster it needs does not answer; nothing was changed",
}


def _responses(ok: str, schema: dict | None, *errors: str, status: str = "200") -> dict:
    responses = {status: {"description": ok}}
    if schema is not None:
        responses[status]["content"] = {"application/json": {"schema": schema}}
    for code in errors:
        responses[code] = _error(code)
    return responses


def _error(code: str) -> dict:
    return {"description": _ERRORS[code], "content": {"application/json": {"schema": _ref("Error")}}}


def _body(name: str) -> dict:
    required = body_required(BODY_MODELS[name])
    return {"required": required, "content": {"application/json": {"schema": _ref(name)}}}


def _path(name: str, annotation: object = str) -> dict:
    """A path parameter whose value has the type ``annotation`` (a body field's, where one has it)."""
    return {"name": name, "in": "path", "required": True, "schema": TypeAdapter(annotation).json_schema()}


# The header of the creates a client may send again (service/idempotency.py): printable ASCII, without the
# spaces around it that HTTP drops.
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "A key of the caller's for this one create (e.g. a UUID, new for each), sent again on its retries: a "
        "retry with the same key and body makes nothing and answers what the first made, as it is now, with "
        "the first answer's status and 'Idempotent-Replayed: true'; with another body (or to another "
        "operation), or once what it made was deleted, a 409 naming the header. Keys are the caller's (another "
        "caller's same key is another key) and kept at least 24 hours. 400 when not 1 to 255 printable ASCII "
        "characters."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]([ -~]*[!-~])?$"},
}
GPR_ID = _path("id", GPRId)
SLICE_NAME = _path("name", SliceName)
CLUSTER_NAME = SLICE_NAME  # clusters are named as slices are
USER = _path("user", UserName)
TEMPLATE_NAME = _path("name", TemplateName)
ENDPOINT = [_path("slice", SliceName), _path("name", SliceName)]
POOL_NAME = _path("pool", SliceName)  # pools are named as slices are
REQUEST_ID = _path("id", GPRId)  # ids are whole numbers from 1, as a GPR's


def _paths() -> dict:
    gpr = _ref("GPR")
    slice_ = _ref("Slice")
    return {
        "/health": {
            "get": {
                "summary": "Liveness and database check; which replica this is (leader or standby)",
                "description": (
                    "A standby replica answers this itself and forwards every other request to the leader; "
                    "503 when the database does not answer."
                ),
                "security": [],
                "responses": _responses("healthy", _ref("Health")),
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "security": [],
                "responses": _responses("the document", {"type": "object"}),
            }
        },
        "/projects": {
            "get": {
                "summary": "Projects (admins: all; project admins: the ones they manage)",
                "responses": _responses("projects", _ref("Projects"), "401"),
            },
            "post": {
                "summary": "Create a project and the hub group of its admins (admin)",
                "requestBody": _body("ProjectCreate"),
                "responses": _responses("created", _ref("Project"), "400", "401", "403", "409", "422", status="201"),
            },
        },
        "/projects/{name}": {
            "parameters": [SLICE_NAME],
            "get": {
                "summary": "One project (admins and its admins)",
                "responses": _responses("the project", _ref("Project"), "400", "401", "403", "404"),
            },
            "patch": {
                "summary": "Change a project's display name, quota or share (admin)",
                "requestBody": _body("ProjectUpdate"),
                "responses": _responses("changed", _ref("Project"), "400", "401", "403", "404"),
            },
            "delete": {
                "summary": "Delete a project that holds no slice or cluster, not default (admin)",
                "responses": _responses("deleted", None, "400", "401", "403", "404", "409", status="204"),
            },
        },
        "/projects/{name}/admins/{user}": {
            "parameters": [SLICE_NAME, USER],
            "put": {
                "summary": "Make a user an admin of the project: a member of its admin group (admin)",
                "responses": _responses("the project", _ref("Project"), "400", "401", "403", "404", "422"),
            },
            "delete": {
                "summary": "Unmake a project admin (admin)",
                "responses": _responses("the project", _ref("Project"), "400", "401", "403", "404"),
            },
        },
        "/workspace-requests": {
            "get": {
                "summary": "Workspace requests of the projects the caller manages, and their own",
                "parameters": documented(WorkspaceRequestsQuery),
                "responses": _responses("requests, newest first", _ref("WorkspaceRequests"), "400", "401"),
            },
            "post": {
                "summary": "Ask a project's admins for a new workspace",
                "parameters": [IDEMPOTENCY_KEY],
                "requestBody": _body("WorkspaceRequestCreate"),
                "responses": _responses("asked", _ref("WorkspaceRequest"), "400", "401", "409", "422", status="201"),
            },
        },
        "/workspace-requests/{id}": {
            "parameters": [REQUEST_ID],
            "get": {
                "summary": "One workspace request (its requester, the project's admins)",
                "responses": _responses("the request", _ref("WorkspaceRequest"), "400", "401", "404"),
            },
        },
        "/workspace-requests/{id}/approve": {
            "parameters": [REQUEST_ID],
            "post": {
                "summary": "Approve, optionally with another quota, policy or clusters: the workspace is made "
                "(the project's admins, not the requester)",
                "requestBody": _body("WorkspaceApproval"),
                "responses": _responses(
                    "approved", _ref("WorkspaceRequest"), "400", "401", "403", "404", "409", "422", "503"
                ),
            },
        },
        "/workspace-requests/{id}/deny": {
            "parameters": [REQUEST_ID],
            "post": {
                "summary": "Deny with a reason (the project's admins)",
                "requestBody": _body("Reason"),
                "responses": _responses("denied", _ref("WorkspaceRequest"), "400", "401", "403", "404", "409"),
            },
        },
        "/slices": {
            "get": {
                "summary": "Slices the caller belongs to or manages as a project admin (admins: all)",
                "responses": _responses("slices", _ref("Slices"), "401"),
            },
            "post": {
                "summary": "Create a slice in a project (admin, or an admin of that project)",
                "parameters": [IDEMPOTENCY_KEY],
                "requestBody": _body("SliceCreate"),
                "responses": _responses(
                    "created (and set up on its Kubernetes clusters)",
                    slice_,
                    "400",
                    "401",
                    "403",
                    "409",
                    "422",
                    "502",
                    "503",
                    status="201",
                ),
            },
        },
        "/slices/{name}": {
            "parameters": [SLICE_NAME],
            "get": {
                "summary": "One slice",
                "responses": _responses("the slice", slice_, "400", "401", "403", "404"),
            },
            "patch": {
                "summary": "Change a slice (admin, or an admin of its project)",
                "requestBody": _body("SliceUpdate"),
                "responses": _responses("changed", slice_, "400", "401", "403", "404", "409", "422", "503"),
            },
            "delete": {
                "summary": "Delete a slice with no unfinished GPRs (admin, or an admin of its project); "
                "the namespaces egs-hub created go too",
                "responses": _responses("deleted", None, "400", "401", "403", "404", "409", "503", status="204"),
            },
        },
        "/slices/{name}/kubeconfig": {
            "parameters": [SLICE_NAME],
            "get": {
                "summary": "A kubeconfig for the slice's ServiceAccount on a Kubernetes cluster (members)",
                "parameters": documented(KubeconfigQuery),
                "responses": _responses(
                    "the kubeconfig", _ref("SliceKubeconfig"), "400", "401", "403", "404", "409", "503"
                ),
            },
        },
        "/slices/{name}/volumes": {
            "parameters": [SLICE_NAME],
            "get": {
                "summary": "Its members' home volumes on its Kubernetes clusters (members)",
                "responses": _responses("the volumes", _ref("HomeVolumes"), "400", "401", "403", "404"),
            },
        },
        "/slices/{name}/members/{user}": {
            "parameters": [SLICE_NAME, USER],
            "put": {
                "summary": "Add a member (admin, or an admin of its project); the hub group changes too",
                "responses": _responses("the slice", slice_, "400", "401", "403", "404"),
            },
            "delete": {
                "summary": "Remove a member (admin, or an admin of its project)",
                "responses": _responses("the slice", slice_, "400", "401", "403", "404"),
            },
        },
        "/inventory": {
            "get": {
                "summary": "Clusters, nodes, GPUs, shapes and what is free now",
                "responses": _responses("inventory", _ref("Inventory"), "401"),
            }
        },
        "/inventory/schedule": {
            "get": {
                "summary": "Every node's windows in [start, end): past, current and planned",
                "parameters": documented(ScheduleQuery),
                "responses": _responses("schedule", _ref("Schedule"), "400", "401"),
            }
        },
        "/clusters": {
            "get": {
                "summary": "Clusters: the local host and Kubernetes clusters, whether each answers, and its size",
                "responses": _responses("clusters", _ref("Clusters"), "401"),
            },
            "post": {
                "summary": "Register a Kubernetes cluster by kubeconfig file and context, or in-cluster (admin)",
                "requestBody": _body("ClusterCreate"),
                "responses": _responses(
                    "registered (health says whether it answers)",
                    _ref("Cluster"),
                    "400",
                    "401",
                    "403",
                    "409",
                    "422",
                    status="201",
                ),
            },
        },
        "/clusters/{name}": {
            "parameters": [CLUSTER_NAME],
            "patch": {
                "summary": "Move a cluster to another project (admin); not a config cluster, nor one that "
                "slices or GPRs of other projects use (409)",
                "requestBody": _body("ClusterUpdate"),
                "responses": _responses("moved", _ref("Cluster"), "400", "401", "403", "404", "409", "422"),
            },
            "delete": {
                "summary": "Remove a cluster registered through the API, unless GPRs hold or wait for it (admin)",
                "responses": _responses("removed", None, "401", "403", "404", "409", status="204"),
            },
        },
        "/nodes": {
            "get": {
                "summary": "Nodes with their health, holders, maintenance and last checks: every node for admins, "
                "the nodes their slices hold for members",
                "parameters": documented(NodesQuery),
                "responses": _responses("the nodes", _ref("Nodes"), "400", "401"),
            },
        },
        "/nodes/{cluster}/{name}": {
            "parameters": [_path("cluster", SliceName), _path("name")],
            "get": {
                "summary": "A node with its GPUs, health, holders, maintenance and the last run of each check (admin)",
                "responses": _responses("the node", _ref("Node"), "401", "403", "404"),
            },
        },
        "/nodes/{cluster}/{name}/quarantine": {
            "parameters": [_path("cluster", SliceName), _path("name")],
            "post": {
                "summary": "Quarantine a node: nothing is planned on it, its cluster's scheduler is kept off (admin)",
                "requestBody": _body("Reason"),
                "responses": _responses("quarantined", _ref("Node"), "400", "401", "403", "404", "409"),
            },
        },
        "/nodes/{cluster}/{name}/clear": {
            "parameters": [_path("cluster", SliceName), _path("name")],
            "post": {
                "summary": "Take a node out of quarantine (admin)",
                "requestBody": _body("Reason"),
                "responses": _responses("cleared", _ref("Node"), "400", "401", "403", "404", "409"),
            },
        },
        "/nodes/{cluster}/{name}/checks": {
            "parameters": [_path("cluster", SliceName), _path("name")],
            "post": {
                "summary": "Run the cluster's entry checks on a node no GPR holds, in the background; a quarantined "
                "node whose checks all pass is cleared (admin)",
                "responses": _responses("checks pending", _ref("Node"), "401", "403", "404", "409", status="202"),
            },
        },
        "/nodes/{cluster}/{name}/maintenance": {
            "parameters": [_path("cluster", SliceName), _path("name")],
            "get": {
                "summary": "A node's maintenance windows that have not ended (admin)",
                "responses": _responses("its windows", _ref("MaintenanceWindows"), "401", "403", "404"),
            },
            "post": {
                "summary": "Take a node out of service from start to end: nothing is planned across it; holders of "
                "windows running past the start are told (admin)",
                "requestBody": _body("MaintenanceCreate"),
                "responses": _responses(
                    "planned", _ref("MaintenanceWindow"), "400", "401", "403", "404", "409", status="201"
                ),
            },
            "delete": {
                "summary": "Cancel a node's maintenance windows that have not ended (admin)",
                "responses": _responses("cancelled", None, "401", "403", "404", status="204"),
            },
        },
        "/nodes/{cluster}/{name}/layout": {
            "parameters": [_path("cluster", SliceName), _path("name")],
            "get": {
                "summary": "A machine's MIG layout (name: the machine or one of its planning nodes) and its changes, "
                "the latest first (admin)",
                "responses": _responses("its layout", _ref("NodeLayout"), "401", "403", "404"),
            },
            "post": {
                "summary": "Re-partition a free machine's GPUs into a MIG layout (null: whole GPUs): it is out of "
                "service until ready_by, and its new instances are planned from then (admin)",
                "requestBody": _body("LayoutChangeCreate"),
                "responses": _responses(
                    "started", _ref("LayoutChange"), "400", "401", "403", "404", "409", "422", "503", status="202"
                ),
            },
        },
        "/clusters/{name}/prices": {
            "parameters": [CLUSTER_NAME],
            "get": {
                "summary": "A cluster's prices per GPU-hour, per shape",
                "responses": _responses("its prices", _ref("ClusterPrices"), "401", "404"),
            },
            "put": {
                "summary": "Replace a cluster's prices per GPU-hour, per shape as /inventory names it (admin)",
                "requestBody": _body("PriceTable"),
                "responses": _responses("its prices now", _ref("ClusterPrices"), "400", "401", "403", "404", "422"),
            },
        },
        "/clusters/{name}/checks": {
            "parameters": [CLUSTER_NAME],
            "get": {
                "summary": "The checklist a cluster's nodes pass at a GPR's entry and exit",
                "responses": _responses("its checklist", _ref("ClusterChecklist"), "401", "404"),
            },
            "put": {
                "summary": "Replace a cluster's checklist (admin)",
                "requestBody": _body("ClusterChecks"),
                "responses": _responses(
                    "its checklist now", _ref("ClusterChecklist"), "400", "401", "403", "404", "422"
                ),
            },
            "delete": {
                "summary": "Give a cluster egs-hub's default checklist again (admin)",
                "responses": _responses("its checklist now", _ref("ClusterChecklist"), "401", "403", "404"),
            },
        },
        "/clusters/{name}/pools": {
            "parameters": [CLUSTER_NAME],
            "get": {
                "summary": "A cluster's dynamic node pools, with their nodes and what was asked of them",
                "responses": _responses("its pools", _ref("NodePools"), "401", "404"),
            },
            "post": {
                "summary": "Add a dynamic node pool that the cluster's autoscaler grows and egs-hub shrinks (admin)",
                "requestBody": _body("PoolCreate"),
                "responses": _responses(
                    "added", _ref("NodePool"), "400", "401", "403", "404", "409", "422", status="201"
                ),
            },
        },
        "/clusters/{name}/pools/{pool}": {
            "parameters": [CLUSTER_NAME, POOL_NAME],
            "get": {
                "summary": "One dynamic node pool",
                "responses": _responses("the pool", _ref("NodePool"), "401", "404"),
            },
            "delete": {
                "summary": "Delete a node pool and its requests to the autoscaler; its nodes stay (admin)",
                "responses": _responses("deleted", None, "401", "403", "404", "503", status="204"),
            },
        },
        "/capacity-plans": {
            "get": {
                "summary": "The last ten what-if capacity plans, running or done (admin)",
                "responses": _responses("plans", _ref("CapacityPlans"), "401", "403"),
            },
            "post": {
                "summary": "Replay the GPRs recorded over a period through the planner on the nodes as they are "
                "and with nodes added or removed, in the background; one runs at a time (admin)",
                "requestBody": _body("CapacityPlanCreate"),
                "responses": _responses(
                    "started", _ref("CapacityPlan"), "400", "401", "403", "409", "422", status="202"
                ),
            },
        },
        "/capacity-plans/{id}": {
            "parameters": [_path("id", GPRId)],
            "get": {
                "summary": "A what-if capacity plan: its progress, then the waits and GPUs bound, recorded and "
                "replayed (admin)",
                "responses": _responses("the plan", _ref("CapacityPlan"), "400", "401", "403", "404"),
            },
        },
        "/role-templates": {
            "get": {
                "summary": "The role templates each slice namespace on Kubernetes gets as Role and RoleBinding (admin)",
                "responses": _responses("templates", _ref("RoleTemplates"), "401", "403"),
            }
        },
        "/templates": {
            "get": {
                "summary": "GPR templates the caller's slices may use (admins: all)",
                "parameters": documented(TemplatesQuery),
                "responses": _responses("templates", _ref("Templates"), "400", "401", "403", "404"),
            },
            "post": {
                "summary": "Add a GPR template: global (admin), for a project or slice (admin, its project's admins)",
                "requestBody": _body("TemplateCreate"),
                "responses": _responses("added", _ref("Template"), "400", "401", "403", "409", "422", status="201"),
            },
        },
        "/templates/{name}": {
            "parameters": [TEMPLATE_NAME],
            "get": {
                "summary": "One GPR template (admins, members of a slice that may use it)",
                "responses": _responses("the template", _ref("Template"), "400", "401", "404"),
            },
            "patch": {
                "summary": "Change a GPR template (as POST); GPRs made from it keep their fields",
                "requestBody": _body("TemplateUpdate"),
                "responses": _responses("changed", _ref("Template"), "400", "401", "403", "404", "422"),
            },
            "delete": {
                "summary": "Delete a GPR template (as POST); not one a slice's auto_gpr names (409)",
                "responses": _responses("deleted", None, "400", "401", "403", "404", "409", status="204"),
            },
        },
        "/endpoints": {
            "get": {
                "summary": "Inference endpoints of the caller's slices (admins: all)",
                "parameters": documented(EndpointsQuery),
                "responses": _responses("endpoints", _ref("Endpoints"), "400", "401", "403", "404"),
            },
            "post": {
                "summary": "Serve a model from a slice's GPUs at <prefix>endpoints/{slice}/{name}/ (members): each "
                "replica is a GPR; its replicas start in the background",
                "parameters": [IDEMPOTENCY_KEY],
                "requestBody": _body("EndpointCreate"),
                "responses": _responses(
                    "made", _ref("Endpoint"), "400", "401", "403", "404", "409", "422", "503", status="202"
                ),
            },
        },
        "/endpoints/{slice}/{name}": {
            "parameters": ENDPOINT,
            "get": {
                "summary": "One endpoint: status, url, replicas and their GPRs, requests/s, latency, errors",
                "responses": _responses("the endpoint", _ref("Endpoint"), "400", "401", "403", "404"),
            },
            "patch": {
                "summary": "Change an endpoint (members); a new command or model restarts its servers",
                "requestBody": _body("EndpointUpdate"),
                "responses": _responses("changed", _ref("Endpoint"), "400", "401", "403", "404", "422", "503"),
            },
            "delete": {
                "summary": "Delete an endpoint (members): its replicas' GPRs are given back",
                "responses": _responses("deleted", None, "400", "401", "403", "404", status="204"),
            },
        },
        "/endpoints/{slice}/{name}/scale": {
            "parameters": ENDPOINT,
            "post": {
                "summary": "Scale an endpoint to this many replicas now (members), kept for its idle_timeout at "
                "least, then following the load",
                "requestBody": _body("EndpointScale"),
                "responses": _responses("scaling", _ref("Endpoint"), "400", "401", "403", "404", "422", status="202"),
            },
        },
        "/usage": {
            "get": {
                "summary": "GPU-hours reserved and used, cost and mean utilisation per project, slice or user, "
                "per week or month (admins: all; members: their slices'); format=csv for chargeback",
                "parameters": documented(UsageQuery),
                "responses": {
                    **_responses("the usage", _ref("UsageReport"), "400", "401"),
                    "200": {
                        "description": "the usage (as CSV with format=csv: a header, then one line per row)",
                        "content": {
                            "application/json": {"schema": _ref("UsageReport")},
                            "text/csv": {"schema": {"type": "string"}},
                        },
                    },
                },
            }
        },
        "/wait-times": {
            "post": {
                "summary": "Estimated start on every shape and cluster that could serve a GPR",
                "requestBody": _body("WaitTimeQuery"),
                "responses": _responses("options", _ref("WaitTimes"), "400", "401", "403", "422"),
            }
        },
        "/gprs": {
            "get": {
                "summary": "GPRs of the caller's slices",
                "parameters": documented(GPRsQuery),
                "responses": _responses("a page of GPRs", _ref("GPRPage"), "400", "401", "403", "404"),
            },
            "post": {
                "summary": "Ask for GPUs",
                "parameters": [IDEMPOTENCY_KEY],
                "requestBody": _body("GPRCreate"),
                "responses": _responses("submitted", gpr, "400", "401", "403", "409", "422", status="201"),
            },
        },
        "/gprs/{id}": {
            "parameters": [GPR_ID],
            "get": {
                "summary": "One GPR",
                "responses": _responses("the GPR", gpr, "400", "401", "403", "404"),
            },
            "patch": {
                "summary": "Edit before provisioning (owner); change priority any time (admin)",
                "requestBody": _body("GPRUpdate"),
                "responses": _responses("changed", gpr, "400", "401", "403", "404", "409", "422"),
            },
            "delete": {
                "summary": "Cancel before provisioning",
                "requestBody": _body("Reason"),
                "responses": _responses("cancelled", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/gprs/{id}/release": {
            "parameters": [GPR_ID],
            "post": {
                "summary": "Release early",
                "requestBody": _body("Reason"),
                "responses": _responses("releasing", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/gprs/{id}/checks": {
            "parameters": [GPR_ID],
            "get": {
                "summary": "The checks of the GPR's nodes at entry and exit, with status, values and log",
                "responses": _responses("its checklist", _ref("GPRChecks"), "400", "401", "403", "404"),
            },
        },
        "/gprs/{id}/approve": {
            "parameters": [GPR_ID],
            "post": {
                "summary": "Approve (admin, or an admin of its project)",
                "requestBody": _body("Reason"),
                "responses": _responses("approved", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/gprs/{id}/deny": {
            "parameters": [GPR_ID],
            "post": {
                "summary": "Deny (admin, or an admin of its project)",
                "requestBody": _body("Reason"),
                "responses": _responses("rejected", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/queue": {
            "get": {
                "summary": "Queued GPRs in order, with position, estimated start, band and fair share",
                "parameters": documented(QueueQuery),
                "responses": _responses(
                    "a page of the queue",
                    _ref("QueuePage"),
                    "400",
                    "401",
                ),
            }
        },
        "/queue/evictions": {
            "get": {
                "summary": "Evictions the planner proposes now (admin)",
                "responses": _responses("proposals", _ref("Evictions"), "401", "403"),
            },
            "post": {
                "summary": "Evict exactly the victims the planner proposes for a GPR (admin)",
                "requestBody": _body("EvictionConfirm"),
                "responses": _responses("evicted", _ref("Eviction"), "400", "401", "403", "409"),
            },
        },
        "/events": {
            "get": {
                "summary": "The audit log: the newest events first, each page newest last",
                "description": "Pages go back in time: next_cursor gives the events before the oldest of this page.",
                "parameters": documented(EventsQuery),
                "responses": _responses("a page of events", _ref("EventPage"), "400", "401", "403", "404"),
            }
        },
        "/gpus": {
            "get": {
                "summary": "Every GPU the caller sees (admins: all; members: their slices') with its latest readings",
                "parameters": documented(GPUsQuery),
                "responses": _responses(
                    "GPUs",
                    _ref("GPUs"),
                    "400",
                    "401",
                ),
            }
        },
        "/gpus/utilization": {
            "get": {
                "summary": "The used utilisation over the last 24 h, per step, of the GPUs the caller sees",
                "description": "Admins: every GPU the metric source reported; members: their slices' GPUs as "
                "/gpus shows them. From 5-minute buckets kept in memory since the service started. A point's "
                "utilization is the mean of the GPUs' readings in the step, null without any.",
                "parameters": documented(UtilizationQuery),
                "responses": _responses(
                    "used utilisation per step, up to now",
                    _ref("UsedUtilization"),
                    "400",
                    "401",
                ),
            }
        },
        "/gpus/{uuid}/metrics": {
            "parameters": [_path("uuid")],
            "get": {
                "summary": "A GPU's readings over the last hour at most, averaged per step",
                "parameters": documented(MetricsQuery),
                "responses": _responses(
                    "time series",
                    _ref("GPUMetrics"),
                    "400",
                    "401",
                    "404",
                ),
            },
        },
        "/workloads": {
            "get": {
                "summary": "Servers, pods and processes on the caller's slices' GPUs, with hotspots",
                "parameters": documented(WorkloadsQuery),
                "responses": _responses(
                    "a page of workloads",
                    _ref("Workloads"),
                    "400",
                    "401",
                    "403",
                    "404",
                ),
            }
        },
        "/alerts": {
            "get": {
                "summary": "GPU alerts of the caller's slices (admins: all), newest first",
                "parameters": documented(AlertsQuery),
                "responses": _responses(
                    "a page of alerts, newest first",
                    _ref("Alerts"),
                    "400",
                    "401",
                    "403",
                    "404",
                ),
            }
        },
        "/servers": {
            "get": {
                "summary": "Servers started in the caller's slices",
                "parameters": documented(ServersQuery),
                "responses": _responses("servers", _ref("Servers"), "401", "404"),
            },
        },
        "/servers/{user}": {
            "parameters": [USER],
            "put": {
                "summary": "Register a starting default server; answers the GPUs it may use, and with GPUs asked "
                "and none held the GPR it waits for (the slice's auto_gpr) (spawner)",
                "requestBody": _body("ServerStart"),
                "responses": _responses("GPUs", _ref("ServerRegistration"), "400", "401", "403", "404"),
            },
            "delete": {
                "summary": "Forget a stopped default server (spawner)",
                "responses": _responses("forgotten", None, "400", "401", "403", status="204"),
            },
        },
        "/servers/{user}/{server}": {
            "parameters": [USER, _path("server")],
            "put": {
                "summary": "Register a starting named server; answers the GPUs it may use, and with GPUs asked "
                "and none held the GPR it waits for (the slice's auto_gpr) (spawner)",
                "requestBody": _body("ServerStart"),
                "responses": _responses("GPUs", _ref("ServerRegistration"), "400", "401", "403", "404"),
            },
            "delete": {
                "summary": "Forget a stopped named server (spawner)",
                "responses": _responses("forgotten", None, "400", "401", "403", status="204"),
            },
        },
        "/server-restarts/{user}": {
            "parameters": [USER],
            "post": {
                "summary": "Restart a running default server, e.g. to see newly bound GPUs (its owner or an admin)",
                "responses": _responses(
                    "restart started", _ref("ServerRestart"), "400", "401", "403", "404", "409", status="202"
                ),
            },
        },
        "/server-restarts/{user}/{server}": {
            "parameters": [USER, _path("server")],
            "post": {
                "summary": "Restart a running named server, e.g. to see newly bound GPUs (its owner or an admin)",
                "responses": _responses(
                    "restart started", _ref("ServerRestart"), "400", "401", "403", "404", "409", status="202"
                ),
            },
        },
    }


def openapi_document(api_prefix: str, version: str, hub_prefix: str = "/hub/") -> dict:
    """The document of the API served at ``api_prefix``, for the hub at ``hub_prefix`` (its OAuth)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "egs-hub",
            "version": version,
            "description": "Elastic GPU Service for JupyterHub. Times are ISO-8601 UTC; durations are "
            'seconds, or units like "1d2h30m" in requests.',
        },
        "servers": [{"url": api_prefix.rstrip("/")}],
        "security": [{"hubToken": []}, {"hubOAuth": []}],
        "components": {
            "securitySchemes": {
                "hubToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "'token <JupyterHub API token>' (or 'Bearer <token>')",
                },
                "hubOAuth": {
                    "type": "oauth2",
                    "description": "The hub's OAuth 2 (the portal's login): the access token it gives is a hub "
                    "token of the user for this service; admins hold the hub scope custom:egs:admin.",
                    "flows": {
                        "authorizationCode": {
                            "authorizationUrl": f"{hub_prefix}api/oauth2/authorize",
                            "tokenUrl": f"{hub_prefix}api/oauth2/token",
                            "scopes": {},
                        }
                    },
                },
            },
            "schemas": SCHEMAS,
        },
        "paths": _with_links(_with_input_errors(_paths())),
    }


def _with_input_errors(paths: dict) -> dict:
    """Every operation that takes input answers 400 to input that cannot be read: a body that is not
    UTF-8 JSON or nests too deep, text that is not valid Unicode, an argument that is not UTF-8 (issue 25).
    Every operation answers 413 to a body over the service's limit, before it is read (body_limits.py)."""
    for item in paths.values():
        for method, operation in item.items():
            if method == "parameters":
                continue
            takes_input = item.get("parameters") or operation.get("parameters") or operation.get("requestBody")
            if takes_input:
                operation["responses"].setdefault("400", _error("400"))
            operation["responses"].setdefault("413", _error("413"))
    return paths


def _body_at(pointer: str, **fields: str) -> dict[str, str]:
    """Path parameters from an answer: each parameter from ``field`` of the JSON at ``pointer``."""
    return {param: f"$response.body#{pointer}/{field}" for param, field in fields.items()}


def _request_path(*params: str) -> dict[str, str]:
    return {param: f"$request.path.{param}" for param in params}


# What answers name, for OpenAPI links: the operation whose success answer names it, the path of the
# operations on it (and below), and their path parameters as runtime expressions. A fuzzer follows
# them (schemathesis' stateful phase: create, then read, change, delete what was made).
NAMED = [
    ("post /projects", "/projects/{name}", _body_at("", name="name")),
    ("get /projects", "/projects/{name}", _body_at("/projects/0", name="name")),
    ("put /projects/{name}/admins/{user}", "/projects/{name}/admins/{user}", _request_path("name", "user")),
    ("post /workspace-requests", "/workspace-requests/{id}", _body_at("", id="id")),
    ("get /workspace-requests", "/workspace-requests/{id}", _body_at("/workspace_requests/0", id="id")),
    ("post /slices", "/slices/{name}", _body_at("", name="name")),
    ("get /slices", "/slices/{name}", _body_at("/slices/0", name="name")),
    ("put /slices/{name}/members/{user}", "/slices/{name}/members/{user}", _request_path("name", "user")),
    ("post /clusters", "/clusters/{name}", _body_at("", name="name")),
    ("get /clusters", "/clusters/{name}", _body_at("/clusters/0", name="name")),
    (
        "post /clusters/{name}/pools",
        "/clusters/{name}/pools/{pool}",
        {**_request_path("name"), "pool": "$response.body#/name"},
    ),
    (
        "get /clusters/{name}/pools",
        "/clusters/{name}/pools/{pool}",
        {**_request_path("name"), "pool": "$response.body#/pools/0/name"},
    ),
    ("get /nodes", "/nodes/{cluster}/{name}", _body_at("/nodes/0", cluster="cluster", name="name")),
    ("post /nodes/{cluster}/{name}/maintenance", "/nodes/{cluster}/{name}", _request_path("cluster", "name")),
    ("post /nodes/{cluster}/{name}/layout", "/nodes/{cluster}/{name}", _request_path("cluster", "name")),
    ("post /capacity-plans", "/capacity-plans/{id}", _body_at("", id="id")),
    ("get /capacity-plans", "/capacity-plans/{id}", _body_at("/plans/0", id="id")),
    ("post /templates", "/templates/{name}", _body_at("", name="name")),
    ("get /templates", "/templates/{name}", _body_at("/templates/0", name="name")),
    ("post /endpoints", "/endpoints/{slice}/{name}", _body_at("", slice="slice", name="name")),
    ("get /endpoints", "/endpoints/{slice}/{name}", _body_at("/endpoints/0", slice="slice", name="name")),
    ("post /gprs", "/gprs/{id}", _body_at("", id="id")),
    ("get /gprs", "/gprs/{id}", _body_at("/gprs/0", id="id")),
    ("get /queue", "/gprs/{id}", _body_at("/queue/0", id="id")),
    ("get /gpus", "/gpus/{uuid}", _body_at("/gpus/0", uuid="uuid")),
    ("put /servers/{user}", "/servers/{user}", _request_path("user")),
    ("put /servers/{user}/{server}", "/servers/{user}/{server}", _request_path("user", "server")),
    ("get /servers", "/servers/{user}", _body_at("/servers/0", user="user")),
    ("get /servers", "/servers/{user}/{server}", _body_at("/servers/0", user="user", server="server")),
    ("get /servers", "/server-restarts/{user}", _body_at("/servers/0", user="user", server="server")),
    ("get /slices", "/slices/{name}/members/{user}", _body_at("/slices/0", name="name", user="members/0")),
    ("get /projects", "/projects/{name}/admins/{user}", _body_at("/projects/0", name="name", user="admins/0")),
]


def operation_id(method: str, path: str) -> str:
    """``get /gprs/{id}/checks`` is ``get_gprs_id_checks``."""
    words = re.findall(r"[A-Za-z0-9]+", path)
    return "_".join([method, *words]).lower()


def _with_links(paths: dict) -> dict:
    """Every operation with its operationId, and each success answer in NAMED with links to the
    operations on what it names whose path parameters it gives."""
    for path, item in paths.items():
        for method, operation in item.items():
            if method != "parameters":
                operation["operationId"] = operation_id(method, path)
    for source, named, params in NAMED:
        method, path = source.split(" ")
        responses = paths[path][method]["responses"]
        links = responses[min(code for code in responses if code.startswith("2"))].setdefault("links", {})
        for target, item in paths.items():
            if target != named and not target.startswith(named + "/"):
                continue
            wanted = re.findall(r"\{([^}]+)\}", target)
            if not set(wanted) <= set(params):
                continue
            for target_method, operation in item.items():
                if target_method == "parameters" or (target, target_method) == (path, method):
                    continue
                links[operation["operationId"]] = {
                    "operationId": operation["operationId"],
                    "parameters": {param: params[param] for param in wanted},
                }
    return paths
