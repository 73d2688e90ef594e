"""Python client of the egs-hub REST API v1, sync (``EGSClient``) and async (``AsyncEGSClient``).

    from egs_hub.client import EGSClient
    egs = EGSClient()  # $EGS_API_URL and $EGS_API_TOKEN / $JUPYTERHUB_API_TOKEN
    gpr = egs.create_gpr("team-a", "2h", gpus=2, shape="H100")
    egs.gpr(gpr.id).estimated_start

Answers are the API's own models (``egs_hub.core.resources``: the service answers
with them and its OpenAPI document is made from them): immutable pydantic models with
aware UTC datetimes and timedeltas. Failures raise ``EGSError`` carrying the service's
status, message and field.
"""

from ..core.resources import (
    GPR,
    GPU,
    Alert,
    Alerts,
    CapacityPlan,
    Cluster,
    ClusterPrices,
    Endpoint,
    EndpointReplica,
    Event,
    Eviction,
    GPUMetrics,
    GPUs,
    GPUSample,
    Health,
    HomeVolume,
    HomeVolumes,
    Inventory,
    MaintenanceWindow,
    MetricSource,
    Project,
    QueuedGPR,
    Schedule,
    Server,
    ServerRegistration,
    ServerRestart,
    Shape,
    Slice,
    SliceKubeconfig,
    Template,
    UsageReport,
    UsageRow,
    UsedUtilization,
    UsedUtilizationPoint,
    WaitTimeOption,
    WaitTimes,
    Workload,
    Workloads,
    WorkspaceRequest,
)
from .aio import AsyncEGSClient
from .errors import EGSConfigError, EGSConnectionError, EGSError
from .sync import EGSClient

__all__ = [
    "GPR",
    "GPU",
    "Alert",
    "Alerts",
    "AsyncEGSClient",
    "CapacityPlan",
    "Cluster",
    "ClusterPrices",
    "EGSClient",
    "EGSConfigError",
    "EGSConnectionError",
    "EGSError",
    "Endpoint",
    "EndpointReplica",
    "Event",
    "Eviction",
    "GPUMetrics",
    "GPUSample",
    "GPUs",
    "Health",
    "HomeVolume",
    "HomeVolumes",
    "Inventory",
    "MaintenanceWindow",
    "MetricSource",
    "Project",
    "QueuedGPR",
    "Schedule",
    "Server",
    "ServerRegistration",
    "ServerRestart",
    "Shape",
    "Slice",
    "SliceKubeconfig",
    "Template",
    "UsageReport",
    "UsageRow",
    "UsedUtilization",
    "UsedUtilizationPoint",
    "WaitTimeOption",
    "WaitTimes",
    "Workload",
    "Workloads",
    "WorkspaceRequest",
]
