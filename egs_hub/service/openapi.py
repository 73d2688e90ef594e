"""The OpenAPI 3.1 document of REST API v1.

Request bodies come from the body models in ``core.requests`` (the same ones
the handlers parse with); response schemas are written out here and
checked against the live service in the tests.
"""

from __future__ import annotations

from ..backends.kubernetes.kubeconfig import DEFAULT_EXPIRATION, MAX_EXPIRATION, MIN_EXPIRATION
from ..core.model import BIND_FAILURES, EVICTION_MODES, PRIORITY_MAX, PRIORITY_MIN, Status
from ..core.requests import DURATION_PATTERN, ID_MAX, SLICE_NAME_PATTERN, body_schemas
from ..core.user_names import USER_NAME_RE
from . import cursors
from .clusters import ORIGINS as CLUSTER_ORIGINS

TIME = {"type": "string", "format": "date-time"}
HEALTH = {"type": "string", "enum": ["ok", "unavailable"]}
NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
NULLABLE_INT = {"type": ["integer", "null"]}
NULLABLE_STR = {"type": ["string", "null"]}
NULLABLE_NUMBER = {"type": ["number", "null"]}
STRINGS = {"type": "array", "items": {"type": "string"}}


def _obj(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS = {
    "Kubeconfig": _obj(
        {
            "slice": {"type": "string"},
            "cluster": {"type": "string"},
            "namespace": {"type": "string", "description": "the slice's home namespace there (current context)"},
            "expires_at": TIME,
            "kubeconfig": {"type": "string", "description": "YAML: one context per namespace of the slice"},
        }
    ),
    "Error": {
        "type": "object",
        "properties": {
            "status": {"type": "integer"},
            "message": {"type": "string"},
            "field": {"type": "string"},
        },
        "required": ["status", "message"],
    },
    "GPR": _obj(
        {
            "id": {"type": "integer"},
            "name": NULLABLE_STR,
            "slice": {"type": "string"},
            "requested_by": NULLABLE_STR,
            "cluster": NULLABLE_STR,
            "shape": NULLABLE_STR,
            "gpus": NULLABLE_INT,
            "nodes": NULLABLE_INT,
            "priority": {"type": "integer", "minimum": PRIORITY_MIN, "maximum": PRIORITY_MAX},
            "duration": {"type": "integer", "description": "seconds"},
            "start_after": NULLABLE_TIME,
            "idle_timeout": {**NULLABLE_INT, "description": "seconds; released after its GPUs idle this long"},
            "preemptible": {"type": "boolean"},
            "status": {"type": "string", "enum": [s.value for s in Status]},
            "status_reason": {"type": "string"},
            "estimated_start": {**NULLABLE_TIME, "description": "queued GPRs: when the planner starts it"},
            "queue_position": NULLABLE_INT,
            "planned_gpus": {**STRINGS, "description": "queued GPRs admitted now: the GPUs they get"},
            "planned_nodes": {**STRINGS, "description": "queued GPRs: the nodes planned for them"},
            "planned_gpu_count": {**NULLABLE_INT, "description": "queued GPRs: GPUs planned on those nodes"},
            "window_start": NULLABLE_TIME,
            "window_end": NULLABLE_TIME,
            "bound_gpus": STRINGS,
            "bound_nodes": STRINGS,
            "avoid_nodes": {
                "type": "array",
                "items": _obj({"cluster": {"type": "string"}, "node": {"type": "string"}}),
                "description": "nodes that failed this GPR's pre-checks: it is not placed on them again",
            },
            "end_reason": {"type": ["string", "null"]},
            "created_at": TIME,
            "updated_at": TIME,
            "ended_at": NULLABLE_TIME,
        }
    ),
    "Slice": _obj(
        {
            "name": {"type": "string"},
            "display_name": {"type": "string"},
            "group": {"type": "string"},
            "members": STRINGS,
            "quota": _obj(
                {
                    "max_gpus": NULLABLE_INT,
                    "max_gpu_hours": {**NULLABLE_NUMBER, "description": "GPU-hours per rolling week"},
                }
            ),
            "policy": _obj(
                {
                    "max_duration": {**NULLABLE_INT, "description": "seconds"},
                    "max_priority": {"type": "integer"},
                    "auto_approve_max_gpus": NULLABLE_INT,
                    "max_active_gprs": {"type": "integer"},
                    "restart_servers": {"type": "boolean"},
                    "reject_over_limits": {"type": "boolean"},
                    "eviction": {"type": "string", "enum": list(EVICTION_MODES)},
                    "requeue_evicted": {"type": "boolean"},
                    "share": {**NULLABLE_NUMBER, "description": "fair-share weight; null: max_gpus, else 1"},
                    "idle_timeout": {**NULLABLE_INT, "description": "seconds; default idle timeout of its GPRs"},
                    "max_idle_timeout": {**NULLABLE_INT, "description": "seconds; longest idle timeout members ask"},
                    "bind_failure": {"type": "string", "enum": list(BIND_FAILURES)},
                }
            ),
            "usage": _obj(
                {
                    "gpu_hours_week": {"type": "number", "description": "GPU-hours used in the rolling week"},
                    "decayed_gpu_hours": {
                        "type": "number",
                        "description": "GPU-hours used, each weighed down by its age (fair-share half-life)",
                    },
                    "fair_share_factor": {
                        "type": "number",
                        "description": "in (0, 1]: 1 used nothing lately, 1/2 used its share; "
                        "higher is served first within a priority band",
                    },
                }
            ),
            "namespaces": {"type": "object", "additionalProperties": STRINGS},
            "gpus": {**STRINGS, "description": "GPU UUIDs the slice's servers may use now"},
            "created_at": TIME,
            "updated_at": TIME,
        }
    ),
    "Event": _obj(
        {
            "id": {"type": "integer"},
            "time": TIME,
            "kind": {"type": "string"},
            "actor": {"type": "string"},
            "reason": {"type": "string"},
            "gpr": NULLABLE_INT,
            "slice": NULLABLE_STR,
            "from_status": NULLABLE_STR,
            "to_status": NULLABLE_STR,
            "data": {"type": "object"},
        }
    ),
    "Shape": _obj(
        {
            "name": {"type": "string"},
            "model": {"type": "string"},
            "memory_gb": {"type": "integer"},
            "gpus_per_node": {"type": "integer"},
        }
    ),
    "Inventory": _obj(
        {
            "clusters": {
                "type": "array",
                "items": _obj(
                    {
                        "name": {"type": "string"},
                        "kind": {"type": "string"},
                        "source": {"type": "string"},
                        "health": HEALTH,
                        "message": {**NULLABLE_STR, "description": "why it is unavailable"},
                        "nodes": {
                            "type": "array",
                            "items": _obj(
                                {
                                    "name": {"type": "string"},
                                    "shape": {"type": "string"},
                                    "schedulable": {"type": "boolean"},
                                    "declared": {"type": "boolean"},
                                    "whole": {
                                        "type": "boolean",
                                        "description": "bound to one GPR at a time (Kubernetes)",
                                    },
                                    "gpus": {
                                        "type": "array",
                                        "items": _obj(
                                            {
                                                "uuid": {"type": "string"},
                                                "index": {"type": "integer"},
                                                "product": {"type": "string"},
                                                "memory_mib": {"type": "integer"},
                                                "declared": {"type": "boolean"},
                                                "healthy": {"type": "boolean"},
                                                "slice": NULLABLE_STR,
                                                "gpr": NULLABLE_INT,
                                            }
                                        ),
                                    },
                                }
                            ),
                        },
                    }
                ),
            },
            "shapes": {
                "type": "array",
                "items": _obj(
                    {
                        "cluster": {"type": "string"},
                        "name": {"type": "string"},
                        "model": {"type": "string"},
                        "memory_gb": {"type": "integer"},
                        "gpus_per_node": {"type": "integer"},
                        "gpus": {"type": "integer"},
                        "free": {"type": "integer"},
                    }
                ),
            },
            "gpus": {"type": "integer"},
            "free": {"type": "integer"},
        }
    ),
    "Cluster": _obj(
        {
            "name": {"type": "string"},
            "kind": {"type": "string", "description": "local or kubernetes"},
            "origin": {
                "type": "string",
                "enum": list(CLUSTER_ORIGINS),
                "description": "this host, EGSService.clusters in the config, or POST /clusters",
            },
            "where": {"type": "string", "description": "how the service reaches it"},
            "health": HEALTH,
            "message": {**NULLABLE_STR, "description": "why it is unavailable"},
            "source": {"type": "string", "description": "what its last inventory said"},
            "nodes": {"type": "integer", "description": "nodes with GPUs present now"},
            "gpus": {"type": "integer"},
            "node_selector": {**NULLABLE_STR, "description": "Kubernetes: label selector of the nodes it manages"},
            "exit_grace": {**NULLABLE_INT, "description": "Kubernetes: seconds a slice's pods get to leave a node"},
        }
    ),
    "RoleTemplate": _obj(
        {
            "name": {"type": "string"},
            "builtin": {"type": "boolean", "description": "one of egs-hub's own (deployment, reader), unchanged"},
            "rules": {"type": "array", "items": {"type": "object"}, "description": "RBAC PolicyRules of the Role"},
            "subjects": {"type": "array", "items": {"type": "object"}, "description": "of the RoleBinding"},
        }
    ),
    "Window": _obj(
        {
            "gpr": {"type": "integer"},
            "slice": {"type": "string"},
            "gpus": {**STRINGS, "description": "empty for a planned window that starts later than now"},
            "gpu_count": {"type": "integer"},
            "start": TIME,
            "end": TIME,
            "state": {"type": "string", "enum": ["past", "current", "planned"]},
            "status": {"type": "string"},
        }
    ),
    "Schedule": _obj(
        {
            "start": TIME,
            "end": TIME,
            "nodes": {
                "type": "array",
                "items": _obj(
                    {
                        "cluster": {"type": "string"},
                        "node": {"type": "string"},
                        "windows": {"type": "array", "items": _ref("Window")},
                    }
                ),
            },
        }
    ),
    "WaitTimes": _obj(
        {
            "options": {
                "type": "array",
                "items": _obj(
                    {
                        "cluster": {"type": "string"},
                        "shape": _ref("Shape"),
                        "estimated_start": TIME,
                        "wait_seconds": {"type": "integer", "minimum": 0},
                        "nodes": STRINGS,
                        "gpus": {"type": "integer", "description": "GPUs it would get on those nodes"},
                    }
                ),
            },
            "needs_approval": {**STRINGS, "description": "why a GPR like this would wait for an admin"},
        }
    ),
    "QueueEntry": {
        "allOf": [
            {"$ref": "#/components/schemas/GPR"},
            _obj(
                {
                    "band": {"type": "string", "enum": ["low", "medium", "high"]},
                    "fair_share_factor": {"type": "number", "description": "of the GPR's slice, in (0, 1]"},
                }
            ),
        ]
    },
    "Eviction": _obj(
        {
            "gpr_id": {"type": "integer", "description": "the queued GPR that starts once the victims are gone"},
            "victims": {
                "type": "array",
                "items": _obj(
                    {
                        "id": {"type": "integer"},
                        "slice": {"type": "string"},
                        "priority": {"type": "integer"},
                        "gpus": {"type": "integer"},
                        "window_end": NULLABLE_TIME,
                        "status": {"type": "string", "enum": [s.value for s in Status]},
                    }
                ),
            },
            "automatic": {"type": "boolean", "description": "the slice's policy evicts without an admin"},
        }
    ),
    "ServerGPUs": _obj(
        {
            "user": {"type": "string"},
            "server": {"type": "string"},
            "slice": {"type": "string"},
            "gpus": STRINGS,
            "gprs": {"type": "array", "items": {"type": "integer"}},
        }
    ),
    "ServerRestart": _obj(
        {
            "user": {"type": "string"},
            "server": {"type": "string"},
            "restarting": {"const": True, "description": "the hub restarts it in the background"},
        }
    ),
    "Servers": _obj(
        {
            "servers": {
                "type": "array",
                "items": _obj(
                    {
                        "user": {"type": "string"},
                        "server": {"type": "string"},
                        "slice": {"type": "string"},
                        "gpus": STRINGS,
                        "started_at": TIME,
                    }
                ),
            }
        }
    ),
    "Health": {
        "type": "object",
        "properties": {
            "status": {"type": "string"},
            "version": {"type": "string"},
            "database": {"type": "string"},
            "role": {
                "type": "string",
                "enum": ["leader", "standby"],
                "description": "leader: this replica plans and answers; standby: it forwards to the leader",
            },
            "leader": {"type": ["string", "null"], "description": "a standby's: where the leader serves"},
        },
        "required": ["status", "database", "role"],
    },
    **body_schemas("#/components/schemas/{model}"),
}


def _numbers(*names: str) -> dict:
    return {name: NULLABLE_NUMBER for name in names}


READINGS = ("utilization", "memory_utilization", "memory_used_mib", "temperature_c", "power_w", "sm_clock_mhz")
SCHEMAS.update(
    {
        "MetricSource": _obj(
            {
                "name": {**NULLABLE_STR, "description": "nvml, prometheus, or null: none configured"},
                "interval": {"type": "number", "description": "seconds between samples"},
                "sampled_at": NULLABLE_TIME,
                "error": {**NULLABLE_STR, "description": "why there are no current readings, if so"},
            }
        ),
        "GPUSample": _obj(
            {
                "time": TIME,
                **_numbers(*READINGS, "memory_total_mib", "power_limit_w"),
                "throttle_reasons": STRINGS,
                "ecc_errors": NULLABLE_INT,
                "xid": NULLABLE_INT,
                "processes": {
                    "type": ["array", "null"],
                    "description": "null: the source cannot list processes",
                    "items": _obj(
                        {
                            "pid": {"type": "integer"},
                            "used_mib": NULLABLE_INT,
                            "user": NULLABLE_STR,
                            "server": NULLABLE_STR,
                        }
                    ),
                },
                "pod": NULLABLE_STR,
                "namespace": NULLABLE_STR,
            }
        ),
        "GPUMetrics": _obj(
            {
                "uuid": {"type": "string"},
                "index": {"type": "integer"},
                "node": {"type": "string"},
                "cluster": {"type": "string"},
                "model": {"type": "string"},
                "memory_mib": {"type": "integer"},
                "declared": {"type": "boolean"},
                "healthy": {"type": "boolean"},
                "slice": {**NULLABLE_STR, "description": "the slice holding it now"},
                "gpr": {**NULLABLE_INT, "description": "the GPR holding it now"},
                "sample": {"oneOf": [_ref("GPUSample"), {"type": "null"}]},
            }
        ),
        "MetricPoint": _obj({"time": TIME, **_numbers(*READINGS)}),
        "UsedUtilization": _obj(
            {
                "time": TIME,
                "utilization": {**NULLABLE_NUMBER, "description": "the mean of the GPUs' readings in the step"},
                "gpus": {"type": "integer", "description": "the most GPUs with readings in 5 minutes of the step"},
            }
        ),
        "Workload": _obj(
            {
                "slice": {"type": "string"},
                "kind": {"type": "string", "enum": ["server", "pod", "process"]},
                "name": {"type": "string"},
                "user": NULLABLE_STR,
                "gpus": STRINGS,
                "processes": {
                    "type": "array",
                    "items": _obj({"pid": {"type": "integer"}, "gpu": {"type": "string"}, "used_mib": NULLABLE_INT}),
                },
                "utilization": {**NULLABLE_NUMBER, "description": "mean over its GPUs with a reading"},
                "hottest_gpu": {
                    "type": ["object", "null"],
                    "properties": {"uuid": {"type": "string"}, "node": NULLABLE_STR, "temperature_c": NULLABLE_NUMBER},
                },
                "most_power_gpu": {
                    "type": ["object", "null"],
                    "properties": {"uuid": {"type": "string"}, "node": NULLABLE_STR, "power_w": NULLABLE_NUMBER},
                },
            }
        ),
        "Alert": _obj(
            {
                "id": {"type": "integer"},
                "kind": {"type": "string", "enum": ["temperature", "power", "memory-full", "ecc", "xid", "gpu-lost"]},
                "gpu": {"type": "string"},
                "node": NULLABLE_STR,
                "cluster": NULLABLE_STR,
                "slice": {**NULLABLE_STR, "description": "who held the GPU when it was raised"},
                "gpr": NULLABLE_INT,
                "message": {"type": "string"},
                "value": NULLABLE_NUMBER,
                "threshold": NULLABLE_NUMBER,
                "raised_at": TIME,
                "cleared_at": NULLABLE_TIME,
                "active": {"type": "boolean"},
            }
        ),
    }
)


_ERRORS = {
    "400": "malformed input; `field` names it",
    "401": "no hub token or login",
    "403": "not allowed: not a member, or not an admin",
    "404": "no such thing",
    "409": "conflicts with the current state",
    "422": "well formed but not acceptable (policy, capacity)",
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


def _body(name: str, required: bool = True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": _ref(name)}}}


def _list(key: str, item: str) -> dict:
    return _obj({key: {"type": "array", "items": _ref(item)}})


def _query(name: str, description: str, schema: dict | None = None) -> dict:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string"},
    }


def _path(name: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema or {"type": "string"}}


def _paged(listing: cursors.Listing, order: str) -> list[dict]:
    """The ``limit`` and ``cursor`` parameters of a list endpoint (service/cursors.py)."""
    return [
        _query(
            "limit",
            f"at most this many per page (default {listing.default_limit})",
            {"type": "integer", "minimum": 1, "maximum": listing.max_limit},
        ),
        _query(
            "cursor",
            f"the next_cursor of the page before ({order}); leave out for the first page",
            {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
        ),
    ]


def _page(key: str, items: dict, **more: dict) -> dict:
    """A page of a list: its items under ``key``, and ``next_cursor`` (null on the last page)."""
    return _obj({**more, key: {"type": "array", "items": items}, "next_cursor": NULLABLE_STR})


GPR_ID = _path("id", {"type": "integer", "minimum": 1, "maximum": ID_MAX})
SLICE_NAME = _path("name", {"type": "string", "pattern": SLICE_NAME_PATTERN, "maxLength": 63})
CLUSTER_NAME = SLICE_NAME  # clusters are named as slices are
USER = _path("user", {"type": "string", "pattern": f"^{USER_NAME_RE.pattern}$"})
AUTH_ERRORS = ("401",)


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
        "/slices": {
            "get": {
                "summary": "Slices the caller belongs to (admins: all)",
                "responses": _responses("slices", _list("slices", "Slice"), *AUTH_ERRORS),
            },
            "post": {
                "summary": "Create a slice (admin)",
                "requestBody": _body("SliceCreate"),
                "responses": _responses(
                    "created (and set up on its Kubernetes clusters)",
                    slice_,
                    "400",
                    "401",
                    "403",
                    "409",
                    "422",
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
                "summary": "Change a slice (admin)",
                "requestBody": _body("SliceUpdate"),
                "responses": _responses("changed", slice_, "400", "401", "403", "404", "409", "503"),
            },
            "delete": {
                "summary": "Delete a slice with no unfinished GPRs (admin); the namespaces egs-hub created go too",
                "responses": _responses("deleted", None, "400", "401", "403", "404", "409", "503", status="204"),
            },
        },
        "/slices/{name}/kubeconfig": {
            "parameters": [SLICE_NAME],
            "get": {
                "summary": "A kubeconfig for the slice's ServiceAccount on a Kubernetes cluster (members)",
                "parameters": [
                    {
                        "name": "cluster",
                        "in": "query",
                        "required": True,
                        "description": "a Kubernetes cluster the slice has namespaces on",
                        "schema": {"type": "string"},
                    },
                    _query(
                        "expiration",
                        f"seconds the token is valid (default {DEFAULT_EXPIRATION}); the cluster may "
                        "cap it, expires_at says",
                        {"type": "integer", "minimum": MIN_EXPIRATION, "maximum": MAX_EXPIRATION},
                    ),
                ],
                "responses": _responses("the kubeconfig", _ref("Kubeconfig"), "400", "401", "403", "404", "409", "503"),
            },
        },
        "/slices/{name}/members/{user}": {
            "parameters": [SLICE_NAME, USER],
            "put": {
                "summary": "Add a member (admin); the hub group changes too",
                "responses": _responses("the slice", slice_, "400", "401", "403", "404"),
            },
            "delete": {
                "summary": "Remove a member (admin)",
                "responses": _responses("the slice", slice_, "400", "401", "403", "404"),
            },
        },
        "/inventory": {
            "get": {
                "summary": "Clusters, nodes, GPUs, shapes and what is free now",
                "responses": _responses("inventory", _ref("Inventory"), *AUTH_ERRORS),
            }
        },
        "/inventory/schedule": {
            "get": {
                "summary": "Every node's windows in [start, end): past, current and planned",
                "parameters": [
                    _query("start", "default: a day ago", TIME),
                    _query("end", "default: a week ahead", TIME),
                ],
                "responses": _responses("schedule", _ref("Schedule"), "400", "401"),
            }
        },
        "/clusters": {
            "get": {
                "summary": "Clusters: the local host and Kubernetes clusters, whether each answers, and its size",
                "responses": _responses("clusters", _list("clusters", "Cluster"), *AUTH_ERRORS),
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
                    status="201",
                ),
            },
        },
        "/clusters/{name}": {
            "parameters": [CLUSTER_NAME],
            "delete": {
                "summary": "Remove a cluster registered through the API, unless GPRs hold or wait for it (admin)",
                "responses": _responses("removed", None, "401", "403", "404", "409", status="204"),
            },
        },
        "/role-templates": {
            "get": {
                "summary": "The role templates each slice namespace on Kubernetes gets as Role and RoleBinding (admin)",
                "responses": _responses("templates", _list("role_templates", "RoleTemplate"), "401", "403"),
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
                "parameters": [
                    _query("slice", "only this slice"),
                    _query("status", "only this status", {"type": "string", "enum": [s.value for s in Status]}),
                    *_paged(cursors.GPRS, "in id order"),
                ],
                "responses": _responses("a page of GPRs", _page("gprs", gpr), "400", "401", "403", "404"),
            },
            "post": {
                "summary": "Ask for GPUs",
                "requestBody": _body("GPRCreate"),
                "responses": _responses("submitted", gpr, "400", "401", "403", "422", status="201"),
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
                "requestBody": _body("Reason", required=False),
                "responses": _responses("cancelled", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/gprs/{id}/release": {
            "parameters": [GPR_ID],
            "post": {
                "summary": "Release early",
                "requestBody": _body("Reason", required=False),
                "responses": _responses("releasing", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/gprs/{id}/approve": {
            "parameters": [GPR_ID],
            "post": {
                "summary": "Approve (admin)",
                "requestBody": _body("Reason", required=False),
                "responses": _responses("approved", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/gprs/{id}/deny": {
            "parameters": [GPR_ID],
            "post": {
                "summary": "Deny (admin)",
                "requestBody": _body("Reason", required=False),
                "responses": _responses("rejected", gpr, "400", "401", "403", "404", "409"),
            },
        },
        "/queue": {
            "get": {
                "summary": "Queued GPRs in order, with position, estimated start, band and fair share",
                "parameters": _paged(cursors.QUEUE, "in queue position order, then by id"),
                "responses": _responses(
                    "a page of the queue",
                    _page(
                        "queue",
                        _ref("QueueEntry"),
                        planned_at={
                            **TIME,
                            "description": "when the plan the positions and estimates come from was made "
                            "(GPRs submitted since are placed on it; other changes show from the next plan, "
                            "made within a reconcile pass)",
                        },
                    ),
                    "400",
                    "401",
                ),
            }
        },
        "/queue/evictions": {
            "get": {
                "summary": "Evictions the planner proposes now (admin)",
                "responses": _responses("proposals", _list("evictions", "Eviction"), "401", "403"),
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
                "parameters": [
                    _query("gpr", "only this GPR", {"type": "integer", "minimum": 1, "maximum": ID_MAX}),
                    _query("slice", "only this slice"),
                    _query("since", "only events at or after", TIME),
                    *_paged(cursors.EVENTS, "older events"),
                ],
                "responses": _responses("a page of events", _page("events", _ref("Event")), "400", "401", "403", "404"),
            }
        },
        "/gpus": {
            "get": {
                "summary": "Every GPU the caller sees (admins: all; members: their slices') with its latest readings",
                "parameters": [
                    _query(
                        "sort",
                        "node order (default), or highest reading first",
                        {"type": "string", "enum": ["node", "temperature", "power", "utilization", "memory"]},
                    )
                ],
                "responses": _responses(
                    "GPUs",
                    _obj({"source": _ref("MetricSource"), "gpus": {"type": "array", "items": _ref("GPUMetrics")}}),
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
                "parameters": [
                    _query("since", "from this time, within the last 24 h, rounded down to 5 minutes", TIME),
                    _query(
                        "step",
                        "seconds or units, a multiple of 5m, at most 24h (default 5m)",
                        {"type": "string", "pattern": DURATION_PATTERN},
                    ),
                ],
                "responses": _responses(
                    "used utilisation per step, up to now",
                    _obj(
                        {
                            "source": _ref("MetricSource"),
                            "since": TIME,
                            "step": {"type": "integer"},
                            "points": {"type": "array", "items": _ref("UsedUtilization")},
                        }
                    ),
                    "400",
                    "401",
                ),
            }
        },
        "/gpus/{uuid}/metrics": {
            "parameters": [_path("uuid")],
            "get": {
                "summary": "A GPU's readings over the last hour at most, averaged per step",
                "parameters": [
                    _query("since", "from this time (default: an hour ago)", TIME),
                    _query(
                        "step",
                        "seconds or units, at most 1h (default: the sampling interval)",
                        {"type": "string", "pattern": DURATION_PATTERN},
                    ),
                ],
                "responses": _responses(
                    "time series",
                    _obj(
                        {
                            "uuid": {"type": "string"},
                            "since": TIME,
                            "step": {"type": "integer"},
                            "source": _ref("MetricSource"),
                            "points": {"type": "array", "items": _ref("MetricPoint")},
                        }
                    ),
                    "400",
                    "401",
                    "404",
                ),
            },
        },
        "/workloads": {
            "get": {
                "summary": "Servers, pods and processes on the caller's slices' GPUs, with hotspots",
                "parameters": [
                    _query("slice", "only this slice"),
                    *_paged(cursors.WORKLOADS, "by slice, kind (server, pod, process), name"),
                ],
                "responses": _responses(
                    "a page of workloads",
                    _page("workloads", _ref("Workload"), source=_ref("MetricSource")),
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
                "parameters": [
                    _query("slice", "only this slice"),
                    _query("since", "only alerts active at some time from then on", TIME),
                    _query(
                        "active",
                        "only active (true) or cleared (false) ones",
                        {"type": "string", "enum": ["true", "false"]},
                    ),
                    *_paged(cursors.ALERTS, "older alerts"),
                ],
                "responses": _responses(
                    "a page of alerts, newest first",
                    _page("alerts", _ref("Alert"), source=_ref("MetricSource")),
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
                "parameters": [_query("slice", "only this slice")],
                "responses": _responses("servers", _ref("Servers"), "401", "404"),
            },
        },
        "/servers/{user}": {
            "parameters": [USER],
            "put": {
                "summary": "Register a starting default server; answers the GPUs it may use (spawner)",
                "requestBody": _body("ServerStart"),
                "responses": _responses("GPUs", _ref("ServerGPUs"), "400", "401", "403", "404"),
            },
            "delete": {
                "summary": "Forget a stopped default server (spawner)",
                "responses": _responses("forgotten", None, "400", "401", "403", status="204"),
            },
        },
        "/servers/{user}/{server}": {
            "parameters": [USER, _path("server")],
            "put": {
                "summary": "Register a starting named server; answers the GPUs it may use (spawner)",
                "requestBody": _body("ServerStart"),
                "responses": _responses("GPUs", _ref("ServerGPUs"), "400", "401", "403", "404"),
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


def openapi_document(api_prefix: str, version: str) -> dict:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "egs-hub",
            "version": version,
            "description": "Elastic GPU Service for JupyterHub. Times are ISO-8601 UTC; durations are "
            'seconds, or units like "1d2h30m" in requests.',
        },
        "servers": [{"url": api_prefix.rstrip("/")}],
        "security": [{"hubToken": []}],
        "components": {
            "securitySchemes": {
                "hubToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "'token <JupyterHub API token>'",
                }
            },
            "schemas": SCHEMAS,
        },
        "paths": _with_input_errors(_paths()),
    }


def _with_input_errors(paths: dict) -> dict:
    """Every operation that takes input answers 400 to input that cannot be read: a body that is not
    UTF-8 JSON or nests too deep, text that is not valid Unicode, an argument that is not UTF-8 (issue 25)."""
    for item in paths.values():
        for method, operation in item.items():
            if method == "parameters":
                continue
            takes_input = item.get("parameters") or operation.get("parameters") or operation.get("requestBody")
            if takes_input:
                operation["responses"].setdefault("400", _error("400"))
    return paths
