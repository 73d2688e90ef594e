"""Every operation of REST API v1 by its operationId, as the service declares it: its method, its path
under the API's URL (path parameters in braces), the resource model of its success answer (None: no
body; "dict": any JSON object) and whether it takes an Idempotency-Key. Written from the service's
declarations by ``python -m tests.client.test_routes`` (which fails when this is stale): do not edit."""

from __future__ import annotations

from typing import NamedTuple


class Route(NamedTuple):
    method: str
    path: str
    answer: str | None
    idempotent: bool


ROUTES = {
    "get_alerts": Route("GET", "alerts", "Alerts", False),
    "get_capacity_plans": Route("GET", "capacity-plans", "CapacityPlans", False),
    "post_capacity_plans": Route("POST", "capacity-plans", "CapacityPlan", False),
    "get_capacity_plans_id": Route("GET", "capacity-plans/{id}", "CapacityPlan", False),
    "get_clusters": Route("GET", "clusters", "Clusters", False),
    "post_clusters": Route("POST", "clusters", "Cluster", False),
    "patch_clusters_name": Route("PATCH", "clusters/{name}", "Cluster", False),
    "delete_clusters_name": Route("DELETE", "clusters/{name}", None, False),
    "get_clusters_name_checks": Route("GET", "clusters/{name}/checks", "ClusterChecklist", False),
    "put_clusters_name_checks": Route("PUT", "clusters/{name}/checks", "ClusterChecklist", False),
    "delete_clusters_name_checks": Route("DELETE", "clusters/{name}/checks", "ClusterChecklist", False),
    "get_clusters_name_pools": Route("GET", "clusters/{name}/pools", "NodePools", False),
    "post_clusters_name_pools": Route("POST", "clusters/{name}/pools", "NodePool", False),
    "get_clusters_name_pools_pool": Route("GET", "clusters/{name}/pools/{pool}", "NodePool", False),
    "delete_clusters_name_pools_pool": Route("DELETE", "clusters/{name}/pools/{pool}", None, False),
    "get_clusters_name_prices": Route("GET", "clusters/{name}/prices", "ClusterPrices", False),
    "put_clusters_name_prices": Route("PUT", "clusters/{name}/prices", "ClusterPrices", False),
    "get_endpoints": Route("GET", "endpoints", "Endpoints", False),
    "post_endpoints": Route("POST", "endpoints", "Endpoint", True),
    "get_endpoints_slice_name": Route("GET", "endpoints/{slice}/{name}", "Endpoint", False),
    "patch_endpoints_slice_name": Route("PATCH", "endpoints/{slice}/{name}", "Endpoint", False),
    "delete_endpoints_slice_name": Route("DELETE", "endpoints/{slice}/{name}", None, False),
    "post_endpoints_slice_name_scale": Route("POST", "endpoints/{slice}/{name}/scale", "Endpoint", False),
    "get_events": Route("GET", "events", "EventPage", False),
    "get_gprs": Route("GET", "gprs", "GPRPage", False),
    "post_gprs": Route("POST", "gprs", "GPR", True),
    "get_gprs_id": Route("GET", "gprs/{id}", "GPR", False),
    "patch_gprs_id": Route("PATCH", "gprs/{id}", "GPR", False),
    "delete_gprs_id": Route("DELETE", "gprs/{id}", "GPR", False),
    "post_gprs_id_approve": Route("POST", "gprs/{id}/approve", "GPR", False),
    "get_gprs_id_checks": Route("GET", "gprs/{id}/checks", "GPRChecks", False),
    "post_gprs_id_deny": Route("POST", "gprs/{id}/deny", "GPR", False),
    "post_gprs_id_release": Route("POST", "gprs/{id}/release", "GPR", False),
    "get_gpus": Route("GET", "gpus", "GPUs", False),
    "get_gpus_utilization": Route("GET", "gpus/utilization", "UsedUtilization", False),
    "get_gpus_uuid_metrics": Route("GET", "gpus/{uuid}/metrics", "GPUMetrics", False),
    "get_health": Route("GET", "health", "Health", False),
    "get_inventory": Route("GET", "inventory", "Inventory", False),
    "get_inventory_schedule": Route("GET", "inventory/schedule", "Schedule", False),
    "get_nodes": Route("GET", "nodes", "Nodes", False),
    "get_nodes_cluster_name": Route("GET", "nodes/{cluster}/{name}", "Node", False),
    "post_nodes_cluster_name_checks": Route("POST", "nodes/{cluster}/{name}/checks", "Node", False),
    "post_nodes_cluster_name_clear": Route("POST", "nodes/{cluster}/{name}/clear", "Node", False),
    "get_nodes_cluster_name_layout": Route("GET", "nodes/{cluster}/{name}/layout", "NodeLayout", False),
    "post_nodes_cluster_name_layout": Route("POST", "nodes/{cluster}/{name}/layout", "LayoutChange", False),
    "get_nodes_cluster_name_maintenance": Route(
        "GET", "nodes/{cluster}/{name}/maintenance", "MaintenanceWindows", False
    ),
    "post_nodes_cluster_name_maintenance": Route(
        "POST", "nodes/{cluster}/{name}/maintenance", "MaintenanceWindow", False
    ),
    "delete_nodes_cluster_name_maintenance": Route("DELETE", "nodes/{cluster}/{name}/maintenance", None, False),
    "post_nodes_cluster_name_quarantine": Route("POST", "nodes/{cluster}/{name}/quarantine", "Node", False),
    "get_openapi_json": Route("GET", "openapi.json", "dict", False),
    "get_projects": Route("GET", "projects", "Projects", False),
    "post_projects": Route("POST", "projects", "Project", False),
    "get_projects_name": Route("GET", "projects/{name}", "Project", False),
    "patch_projects_name": Route("PATCH", "projects/{name}", "Project", False),
    "delete_projects_name": Route("DELETE", "projects/{name}", None, False),
    "put_projects_name_admins_user": Route("PUT", "projects/{name}/admins/{user}", "Project", False),
    "delete_projects_name_admins_user": Route("DELETE", "projects/{name}/admins/{user}", "Project", False),
    "get_queue": Route("GET", "queue", "QueuePage", False),
    "get_queue_evictions": Route("GET", "queue/evictions", "Evictions", False),
    "post_queue_evictions": Route("POST", "queue/evictions", "Eviction", False),
    "get_role_templates": Route("GET", "role-templates", "RoleTemplates", False),
    "post_server_restarts_user": Route("POST", "server-restarts/{user}", "ServerRestart", False),
    "post_server_restarts_user_server": Route("POST", "server-restarts/{user}/{server}", "ServerRestart", False),
    "get_servers": Route("GET", "servers", "Servers", False),
    "put_servers_user": Route("PUT", "servers/{user}", "ServerRegistration", False),
    "delete_servers_user": Route("DELETE", "servers/{user}", None, False),
    "put_servers_user_server": Route("PUT", "servers/{user}/{server}", "ServerRegistration", False),
    "delete_servers_user_server": Route("DELETE", "servers/{user}/{server}", None, False),
    "get_slices": Route("GET", "slices", "Slices", False),
    "post_slices": Route("POST", "slices", "Slice", True),
    "get_slices_name": Route("GET", "slices/{name}", "Slice", False),
    "patch_slices_name": Route("PATCH", "slices/{name}", "Slice", False),
    "delete_slices_name": Route("DELETE", "slices/{name}", None, False),
    "get_slices_name_kubeconfig": Route("GET", "slices/{name}/kubeconfig", "SliceKubeconfig", False),
    "put_slices_name_members_user": Route("PUT", "slices/{name}/members/{user}", "Slice", False),
    "delete_slices_name_members_user": Route("DELETE", "slices/{name}/members/{user}", "Slice", False),
    "get_slices_name_volumes": Route("GET", "slices/{name}/volumes", "HomeVolumes", False),
    "get_templates": Route("GET", "templates", "Templates", False),
    "post_templates": Route("POST", "templates", "Template", False),
    "get_templates_name": Route("GET", "templates/{name}", "Template", False),
    "patch_templates_name": Route("PATCH", "templates/{name}", "Template", False),
    "delete_templates_name": Route("DELETE", "templates/{name}", None, False),
    "get_usage": Route("GET", "usage", "UsageReport", False),
    "post_wait_times": Route("POST", "wait-times", "WaitTimes", False),
    "get_workloads": Route("GET", "workloads", "Workloads", False),
    "get_workspace_requests": Route("GET", "workspace-requests", "WorkspaceRequests", False),
    "post_workspace_requests": Route("POST", "workspace-requests", "WorkspaceRequest", True),
    "get_workspace_requests_id": Route("GET", "workspace-requests/{id}", "WorkspaceRequest", False),
    "post_workspace_requests_id_approve": Route("POST", "workspace-requests/{id}/approve", "WorkspaceRequest", False),
    "post_workspace_requests_id_deny": Route("POST", "workspace-requests/{id}/deny", "WorkspaceRequest", False),
}
