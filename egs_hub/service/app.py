"""The EGS control plane: a tornado app that JupyterHub runs as a managed service.

JupyterHub starts it with its service environment (``JUPYTERHUB_API_TOKEN``,
``JUPYTERHUB_SERVICE_URL``, ``JUPYTERHUB_SERVICE_PREFIX``, OAuth client
settings); egs-hub's own options come from ``EGS_*`` variables, a config file
(``EGS_CONFIG_FILE``) or ``--EGSService.<option>=`` arguments.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import secrets
import signal
import sys
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import jinja2
from jupyterhub.services.auth import HubOAuth
from tornado import web
from tornado.httpserver import HTTPServer
from traitlets import Bool, CaselessStrEnum, Dict, Float, Integer, List, TraitError, Unicode, default, validate
from traitlets.config import Application

from .. import __version__
from ..backends.kubernetes.roles import (
    DEFAULT_ROLE_TEMPLATES,
    RoleTemplate,
    RoleTemplateError,
    parse_namespace_grants,
    parse_role_templates,
)
from ..backends.local import LocalBackend
from ..backends.local.endpoint_servers import EndpointServers
from ..core.alerts import AlertThresholds
from ..core.errors import InvalidRequest
from ..core.gpu_names import Naming
from ..core.model import Order, order_weight_error
from ..core.requests import ClusterCreate, LayoutTarget, parse_body
from ..core.snapshot import Placement
from ..metrics import MetricSource
from ..metrics.nvml import NVMLSource
from ..metrics.prometheus import PrometheusSource
from ..store import queries
from ..store.db import check_schema, default_db_url, make_engine, make_sessions
from ..system_users import MODES, NONE, Isolation, default_mode, mode_error, unisolated_notice
from ..traits import Duration
from . import gpu_naming, standby
from .auto_gpr import AutoGPRs
from .body_limits import UNBOUNDED, BoundedApplication, Limit
from .capacity import CapacityPlans
from .checks import Checklists
from .clusters import Clusters
from .commands import Commands
from .endpoint_metrics import EndpointCollector
from .endpoints import Endpoints
from .exporter import Exporter
from .gpr_sync import GPRSync
from .handlers import (
    capacity,
    clusters,
    endpoints,
    gpr_templates,
    gprs,
    gpus,
    inventory,
    maintenance,
    nodes,
    pages,
    pools,
    projects,
    prometheus,
    queue,
    servers,
    slices,
    usage,
    webhooks,
    workspace_requests,
)
from .handlers.base import NotFoundHandler
from .handlers.endpoint_proxy import EndpointProxyHandler
from .hub import HubClient
from .kube_events import KubeEvents
from .layouts import Layouts
from .leadership import Leadership
from .maintenance import MaintenanceStarts
from .notify import SlackNotifier
from .openapi import openapi_document
from .operations import operations_of, routes
from .planning import Planning
from .pools import PoolScaler
from .reconcile import Reconciler
from .remediation import Remediation
from .slice_setup import SliceSetup
from .telemetry import Telemetry

HERE = os.path.dirname(__file__)
LOCAL_CLUSTER = "local"
GIL_SWITCH_SECONDS = 0.0005


# The modules whose handlers serve the API under api/v1/; each handler method declares its operation.
API_MODULES = (
    inventory,
    projects,
    workspace_requests,
    slices,
    clusters,
    nodes,
    maintenance,
    pools,
    capacity,
    gpr_templates,
    usage,
    gprs,
    queue,
    gpus,
    endpoints,
    servers,
)
API_OPERATIONS = operations_of(API_MODULES)
API_ROUTES = routes(API_OPERATIONS)


def api_document(api_prefix: str, version: str, hub_prefix: str = "/hub/") -> dict:
    """The OpenAPI document of the API served at ``api_prefix``."""
    return openapi_document([op for op, _ in API_OPERATIONS], api_prefix, version, hub_prefix)


class EGSService(Application):
    name = "egs-hub-service"
    description = "The egs-hub control plane (run by JupyterHub as the managed service 'egs')."
    version = __version__

    data_dir = Unicode(
        help="""Directory for egs-hub's state: the SQLite database (unless db_url points
        elsewhere) and the cookie secret. Default: $EGS_DATA_DIR, else ./egs-data.""",
    ).tag(config=True)

    @default("data_dir")
    def _default_data_dir(self) -> str:
        return os.path.abspath(os.environ.get("EGS_DATA_DIR", "egs-data"))

    db_url = Unicode(
        help="""SQLAlchemy URL of the database: sqlite:///PATH or postgresql://USER@HOST/DB.
        Default: $EGS_DB_URL, else SQLite at <data_dir>/egs.sqlite.""",
    ).tag(config=True)

    @default("db_url")
    def _default_db_url(self) -> str:
        return os.environ.get("EGS_DB_URL") or default_db_url(self.data_dir)

    inventory_file = Unicode(
        None,
        allow_none=True,
        help="""YAML file declaring nodes and GPUs, used when NVML finds no GPUs on this host.
        Without it (and without NVML GPUs) a built-in declared inventory of one node with 4 GPUs
        is used. Default: $EGS_INVENTORY.""",
    ).tag(config=True)

    @default("inventory_file")
    def _default_inventory_file(self) -> str | None:
        return os.environ.get("EGS_INVENTORY") or None

    local_gpus = Bool(
        True,
        help="""Register this host's GPUs as the cluster "local" (NVML, else the declared inventory).
        False where the service runs without GPUs of its own and manages only Kubernetes clusters,
        as in the Helm chart's pod: no "local" cluster, and no declared stand-in GPUs.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    clusters = List(
        Dict(),
        help="""Kubernetes clusters whose GPU nodes egs-hub binds to slices, besides this host. Each is
        {"name": NAME, "kubeconfig": ABSOLUTE_PATH, "context": CONTEXT} (context: default the file's
        current-context) or {"name": NAME, "in_cluster": true} (the ServiceAccount of the pod the
        service runs in). Names are DNS labels, unique, and not the local cluster's ("local").
        A cluster that cannot be reached is shown unavailable and retried; it never stops the
        service. Admins add more at run time with POST /clusters (kept in the database).

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("clusters")
    def _check_clusters(self, proposal) -> list:
        self._cluster_specs(proposal.value)
        return proposal.value

    @staticmethod
    def _cluster_specs(items: list) -> list[ClusterCreate]:
        specs = []
        for i, item in enumerate(items):
            try:
                spec = parse_body(ClusterCreate, item)
            except InvalidRequest as e:
                raise TraitError(f"EGSService.clusters[{i}]: {e}") from None
            if spec.name == LOCAL_CLUSTER:
                raise TraitError(f"EGSService.clusters[{i}].name: {spec.name!r} is this host's; choose another name")
            if spec.name in {s.name for s in specs}:
                raise TraitError(f"EGSService.clusters[{i}].name: cluster {spec.name!r} is named twice")
            specs.append(spec)
        return specs

    role_templates = Dict(
        help="""Role templates added to (or, by the same name, replacing) the built-in ``deployment`` (edit
        rights, bound to the slice's ServiceAccount) and ``reader`` (view rights, bound to the
        Kubernetes group ``egs:{slice}``): ``{NAME: {"rules": [RBAC rules], "subjects": [{"kind":
        "User"|"Group"|"ServiceAccount", "name": ..., "namespace": ...}]}}``. Each becomes a Role and
        RoleBinding ``egs-NAME`` in every namespace of every slice on a Kubernetes cluster. Subject
        names may use ``{slice}``, ``{service_account}`` and ``{service_account_namespace}``.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("role_templates")
    def _check_role_templates(self, proposal) -> dict:
        if proposal.value:
            try:
                parse_role_templates(proposal.value)
            except RoleTemplateError as e:
                raise TraitError(f"EGSService.role_templates: {e}") from None
        return proposal.value

    namespace_grants = List(
        help="""RoleBindings egs-hub makes first in each namespace of a slice on the cluster it runs in
        (``in_cluster``), and deletes last: ``[{"cluster_role": ..., "service_account": ...,
        "namespace": ...}]`` binds that ClusterRole to that ServiceAccount there (RoleBinding
        ``egs:<cluster_role>``). The Helm chart sets it, so the service and the hub hold their
        namespaced rights only in slice namespaces; the first grant must be the service's own.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("namespace_grants")
    def _check_namespace_grants(self, proposal) -> list:
        try:
            parse_namespace_grants(proposal.value)
        except RoleTemplateError as e:
            raise TraitError(f"EGSService.namespace_grants: {e}") from None
        return proposal.value

    @property
    def all_role_templates(self) -> dict[str, RoleTemplate]:
        """The built-in role templates with the configured ones over them."""
        extra = parse_role_templates(self.role_templates) if self.role_templates else {}
        return {**DEFAULT_ROLE_TEMPLATES, **extra}

    cluster_retry_interval = Float(
        30.0,
        help="""Seconds between checks of every cluster: an unavailable one is tried again, and a
        Kubernetes cluster's inventory is read again (its watch reports changes at once anyway).

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    cluster_request_timeout = Float(
        10.0,
        help="""Seconds a Kubernetes API request may take before its cluster counts as unavailable.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    webhook_port = Integer(
        0,
        help="""TCP port of the HTTPS listener for the pod admission webhook (the Kubernetes API server calls
        it at <prefix>webhooks/pods/<cluster>, see charts/egs-hub); 0: none. It needs webhook_certfile
        and webhook_keyfile. The same path is also served on the service's own port (plain HTTP, behind
        the hub's proxy), which the API server cannot use: it calls webhooks over HTTPS only.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    webhook_ip = Unicode(
        "",
        help="""Address the webhook listener binds; empty: every address.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    webhook_certfile = Unicode(
        "",
        help="""PEM file of the webhook listener's serving certificate (with its chain). Its names must include
        the name the API server calls (<service>.<namespace>.svc); the webhook's caBundle is its CA.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    webhook_keyfile = Unicode(
        "",
        help="""PEM file of the private key of webhook_certfile.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("webhook_port")
    def _check_webhook_port(self, proposal) -> int:
        if not 0 <= proposal.value <= 65535:
            raise TraitError(f"webhook_port must be from 1 to 65535 (0: no webhook listener), not {proposal.value}")
        return proposal.value

    reconcile_interval = Float(
        1.0,
        help="""Seconds between reconcile passes when nothing wakes the loop earlier. Windows end
        within this long of their end time. Changes through the API wake the loop at once.""",
    ).tag(config=True)

    endpoint_wait_seconds = Float(
        30.0,
        help="""How long, in seconds, a request at an inference endpoint with no ready replica (scaled to
        zero, or starting) waits for one before it is answered 503 with Retry-After. A request is answered
        so at once when the replicas' GPRs are estimated to start later than that.""",
    ).tag(config=True)

    endpoint_vllm_image = Unicode(
        "vllm/vllm-openai:v0.11.0",
        help="""The image of an inference endpoint with runtime vllm on a Kubernetes cluster, when the
        endpoint names none (its ``image``). Its ``vllm`` command serves the model.""",
    ).tag(config=True)

    endpoint_service_url = Unicode(
        "http://{service}.{namespace}.svc:{port}",
        help="""How this service reaches an inference endpoint's Service on a Kubernetes cluster:
        {service}, {namespace} and {port} are filled in. The default is the cluster's DNS name, which
        works where the service runs in that cluster (the Helm chart's case); a service outside it
        needs its own route there.""",
    ).tag(config=True)

    isolation = CaselessStrEnum(
        list(MODES),
        help="""Who members' code (JupyterLab servers, inference endpoints' servers) runs as on this host.
        "system-users": each member as a system account of their own (egs-<name>, made at their first
        server or endpoint, home /home/egs-<name>, 0700), which cannot read this service's data directory;
        needs the service to run as root. "none": as the service's own OS user, in the member's home under
        home_dir_template, able to read everything the service can (trusted members only; command endpoints
        are then refused unless allow_unisolated_commands). The spawner must use the same mode: `egs-hub up`
        passes one to both (--isolation, or this option in its --config file). Default: $EGS_ISOLATION, else
        "system-users" as root and "none" otherwise.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @default("isolation")
    def _default_isolation(self) -> str:
        return os.environ.get("EGS_ISOLATION") or default_mode()

    @validate("isolation")
    def _check_isolation(self, proposal) -> str:
        error = mode_error(proposal.value)
        if error is not None:
            raise TraitError(f"EGSService.isolation: {error}")
        return proposal.value

    allow_unisolated_commands = Bool(
        False,
        help="""Whether members may run inference endpoints of runtime command on this host in isolation
        "none", where their command runs as the service's OS user and can read its tokens and databases.
        False (the default): such an endpoint is refused with 422 naming runtime. Set it only where every
        member is trusted with the service's rights. No effect in isolation "system-users" or on
        Kubernetes clusters.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    home_dir_template = Unicode(
        help="""Where a member's endpoint servers run in isolation "none": their home, as the spawner's
        home_dir_template ({username}: the hub user's name), so that endpoints and JupyterLab servers share
        it. In isolation "system-users" the home is the member's system account's. Default:
        $EGS_HOME_DIR_TEMPLATE (set by `egs-hub up`), else <data_dir>/home/{username}.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @default("home_dir_template")
    def _default_home_dir_template(self) -> str:
        return os.environ.get("EGS_HOME_DIR_TEMPLATE") or os.path.join(self.data_dir, "home", "{username}")

    def isolation_notice(self) -> str | None:
        """What the admin dashboard says of members' isolation: a warning where members' code runs on this
        host (local_gpus) as the service's user (isolation none)."""
        if not self.local_gpus or self.isolation != NONE:
            return None
        return unisolated_notice(self.allow_unisolated_commands)

    repartition_seconds = Float(
        300.0,
        help="""How long, in seconds, re-partitioning a node's GPUs into a new MIG layout takes
        (POST /nodes/{cluster}/{name}/layout): the node is out of service that long, and the planner
        plans its new instances from then on. The GPU Operator's mig-manager takes minutes (more where
        it reboots the node).""",
    ).tag(config=True)

    layout_targets = List(
        Dict(),
        help="""Layout targets: keep machines in a MIG layout. Each is {"gpu_type": "H100-80GB", "mig":
        {"1g.10gb": 7} (none or null: whole GPUs), "nodes": 2, "cluster" (else any), "mig_config"
        (Kubernetes: the mig-parted config, else the default one)}. Every 30 s the service re-partitions free
        machines of that type (no GPR holds them, none is planned on them) toward a target short of
        machines, as POST /nodes/{cluster}/{name}/layout would; a machine counting toward a target stays.""",
    ).tag(config=True)

    @validate("layout_targets")
    def _check_layout_targets(self, proposal) -> list:
        for index, target in enumerate(proposal.value):
            try:
                parse_body(LayoutTarget, target)
            except InvalidRequest as e:
                raise TraitError(f"layout_targets[{index}].{e.field}: {e}") from None
        return proposal.value

    @validate("repartition_seconds")
    def _check_repartition_seconds(self, proposal) -> float:
        if not 0 <= proposal.value <= 86400:
            raise TraitError(f"repartition_seconds must be from 0 to 86400 (a day), not {proposal.value}")
        return proposal.value

    plan_reuse_seconds = Float(
        5.0,
        help="""How long, in seconds, API reads (GPRs, queue, wait times, inventory schedule) may answer
        from the last plan instead of waiting for a fresh one, as long as nothing but new GPRs was
        written to the database since (a new GPR is placed on the last plan when it is submitted);
        counted from when a reconcile pass last found the plan current. Plans are made in a worker
        thread (about 1.6 s at 2,000 nodes and 10,000 queued GPRs); 0 plans for every read.""",
    ).tag(config=True)

    @validate("plan_reuse_seconds")
    def _check_plan_reuse_seconds(self, proposal) -> float:
        if not 0 <= proposal.value <= 60:
            raise TraitError(f"plan_reuse_seconds must be from 0 to 60, not {proposal.value}")
        return proposal.value

    max_start_after = Duration(
        timedelta(days=365),
        help="""How far ahead a GPR may ask to start: its start_after must be at most this long
        after the time it is submitted, edited or asked about (POST /gprs, PATCH /gprs/{id},
        POST /wait-times, GPR resources); a later one is refused with 400 naming start_after
        and the latest time allowed. Whole seconds, or units largest first like "365d"
        (default 365 days, at most ten years). A GPR already stored keeps its start_after;
        an edit of it is checked again.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    fairshare_half_life = Float(
        7 * 24 * 3600.0,
        help="""Half-life, in seconds, of a slice's recorded GPU use for fair share (default 7 days).
        Within a priority band the queue serves first the slices that used least of their share
        lately; a GPU-second used one half-life ago counts half as much as one used now.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("fairshare_half_life")
    def _check_fairshare_half_life(self, proposal) -> float:
        if not proposal.value > 0:
            raise TraitError(f"fairshare_half_life must be a positive number of seconds, not {proposal.value}")
        return proposal.value

    queue_fair_share_s = Float(
        None,
        allow_none=True,
        help="""How a priority band's queue weighs fair share. None (the default): fair share first,
        then priority, then submit time. A number of seconds: a multifactor order, in which each GPR
        has a virtual submit time, its submit time made earlier by this many seconds times its
        fair-share factor (1 for a slice that used nothing lately), so a slice's better share is
        worth that much waiting and no more: a GPR is overtaken only by GPRs submitted at most this
        long (plus its size penalty, queue_size_s_per_gpu_hour) after it. Priority then orders
        before the virtual submit time. ``egs-hub simulate --order-fair-share-s`` replays a trace
        with it.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    queue_size_s_per_gpu_hour = Float(
        0.0,
        help="""Seconds a GPR's (virtual) submit time moves later per GPU-hour it asks for (GPUs times
        its duration; default 0). Shortest first with aging: a small GPR goes ahead of a big one
        submitted less than the difference in their penalties before it. ``egs-hub simulate
        --order-size-s`` replays a trace with it.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @validate("queue_fair_share_s", "queue_size_s_per_gpu_hour")
    def _check_queue_order(self, proposal) -> float | None:
        error = order_weight_error(proposal.value)
        if error is not None:
            raise TraitError(f"{proposal.trait.name} {error}")
        return proposal.value

    metrics_source = CaselessStrEnum(
        ["auto", "nvml", "prometheus", "none"],
        "auto",
        help="""Where GPU metrics come from: "nvml" (this host's GPUs through NVML), "prometheus"
        (the DCGM exporter's series through the Prometheus HTTP API at prometheus_url), "none",
        or "auto": NVML when it found this host's GPUs, else Prometheus when prometheus_url is set,
        else none. Without a source the GPU pages and API say so and no GPR is released as idle.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    prometheus_url = Unicode(
        help="""Base URL of the Prometheus server that scrapes the DCGM exporter, e.g.
        http://prometheus.monitoring:9090. Default: $EGS_PROMETHEUS_URL.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @default("prometheus_url")
    def _default_prometheus_url(self) -> str:
        return os.environ.get("EGS_PROMETHEUS_URL", "")

    prometheus_selector = Unicode(
        "",
        help="""Extra label matchers for the DCGM exporter's series, e.g. 'job="dcgm-exporter"'.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    metrics_interval = Float(
        10.0,
        help="""Seconds between GPU metric samples. The last hour of samples is kept in memory per GPU;
        a sample older than three intervals counts as missing.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("metrics_interval")
    def _check_metrics_interval(self, proposal) -> float:
        if not 0.1 <= proposal.value <= 600:
            raise TraitError(f"metrics_interval must be from 0.1 to 600 seconds, not {proposal.value}")
        return proposal.value

    idle_threshold = Float(
        5.0,
        help="""A GPU is idle when its utilization (percent) is below this and no process uses it.
        A provisioned GPR whose GPUs all stay idle for its idle_timeout is released.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("idle_threshold")
    def _check_idle_threshold(self, proposal) -> float:
        if not 0 < proposal.value <= 100:
            raise TraitError(f"idle_threshold must be a percentage above 0 and at most 100, not {proposal.value}")
        return proposal.value

    alert_thresholds = Dict(
        help="""Overrides of the GPU alert thresholds (core.alerts.AlertThresholds), e.g.
        {"temperature_raise_c": 90, "temperature_clear_c": 85, "lost_after": 120}. Levels are °C or
        fractions of the power limit / total memory; *_after are seconds.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @validate("alert_thresholds")
    def _check_alert_thresholds(self, proposal) -> dict:
        self._thresholds_of(proposal.value)
        return proposal.value

    @staticmethod
    def _thresholds_of(overrides: dict) -> AlertThresholds:
        defaults = AlertThresholds()
        values = {}
        for name, value in overrides.items():
            if not hasattr(defaults, name):
                raise TraitError(f"alert_thresholds: unknown threshold {name!r}")
            values[name] = timedelta(seconds=value) if isinstance(getattr(defaults, name), timedelta) else value
        try:
            return AlertThresholds(**values)
        except (TypeError, ValueError) as e:
            raise TraitError(f"alert_thresholds: {e}") from None

    slack_webhook_url = Unicode(
        help="""Slack incoming-webhook URL that GPU alerts are posted to; empty: none.
        Default: $EGS_SLACK_WEBHOOK_URL.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    @default("slack_webhook_url")
    def _default_slack_webhook_url(self) -> str:
        return os.environ.get("EGS_SLACK_WEBHOOK_URL", "")

    authenticate_prometheus = Bool(
        True,
        help="""Require scrapers of <prefix>metrics to send a hub API token (Authorization: Bearer
        <token>) of a user or service with the admin scope custom:egs:admin. False lets anyone
        who can reach the service scrape it.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    identity_cache_seconds = Integer(
        30,
        help="""Seconds the service caches what the hub says about a token (name, groups, scopes).
        Membership changed in the hub admin panel shows after at most this long; changes through
        the egs-hub API show at once.""",
    ).tag(config=True)

    max_body_bytes = Integer(
        1024 * 1024,
        min=1,
        help="""The most bytes a request body to the API, the pages or the webhook may have (default 1 MiB).
        A larger one is answered 413 as soon as its headers arrive, before a byte of it is read: a
        request's Content-Length is checked first, a chunked body as it comes. A pod's admission review
        may have up to 8 MiB whatever this says (the API server's own bound is 3 MiB).

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    endpoint_max_body_bytes = Integer(
        16 * 1024 * 1024,
        min=1,
        help="""The most bytes a request body to an inference endpoint (``<prefix>endpoints/...``) may have
        (default 16 MiB: prompts with images fit). A larger one is answered 413 before it is read.

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    service_name = Unicode(help="This service's name in JupyterHub. Default: $JUPYTERHUB_SERVICE_NAME.").tag(
        config=True
    )

    @default("service_name")
    def _default_service_name(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_NAME", "egs")

    prefix = Unicode(help="URL prefix of the service. Default: $JUPYTERHUB_SERVICE_PREFIX.").tag(config=True)

    @default("prefix")
    def _default_prefix(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/egs/")

    service_url = Unicode(help="Where the service listens. Default: $JUPYTERHUB_SERVICE_URL.").tag(config=True)

    @default("service_url")
    def _default_service_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101")

    advertise_url = Unicode(
        help="""Where the other replicas of the service reach this one when it leads (leadership.py): a
        standby forwards requests there. Default: $EGS_ADVERTISE_URL, else service_url (one host; in
        Kubernetes the chart sets the pod's IP)."""
    ).tag(config=True)

    @default("advertise_url")
    def _default_advertise_url(self) -> str:
        return os.environ.get("EGS_ADVERTISE_URL") or self.service_url

    leader_poll_seconds = Float(
        1.0,
        help="""How often, in seconds, a standby replica tries the leader's lock, and the leader checks
        that it still holds it (leadership.py). A standby takes over within this long of the leader's
        end, plus the time it takes to load the state.""",
    ).tag(config=True)

    config_file = Unicode(help="Python config file to load. Default: $EGS_CONFIG_FILE.").tag(config=True)

    @default("config_file")
    def _default_config_file(self) -> str:
        return os.environ.get("EGS_CONFIG_FILE", "")

    @default("raise_config_file_errors")
    def _default_raise_config_file_errors(self) -> bool:
        return True

    @default("log_level")
    def _default_log_level(self) -> int:
        return logging.INFO

    @staticmethod
    def clock() -> datetime:
        return datetime.now(UTC)

    @property
    def api_prefix(self) -> str:
        return self.prefix + "api/v1/"

    @property
    def hub_prefix(self) -> str:
        return os.environ.get("JUPYTERHUB_BASE_URL", "/") + "hub/"

    def openapi_document(self) -> dict:
        return api_document(self.api_prefix, self.version, self.hub_prefix)

    def initialize(self, argv=None) -> None:
        super().initialize(argv)
        if self.config_file:
            self.load_config_file(self.config_file)
        logging.basicConfig(format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
        logging.getLogger("egs_hub").setLevel(self.log_level)

    def forget_identities(self) -> None:
        """Drop cached token lookups, so membership changes count at once."""
        self.hub_auth.cache.clear()

    def _cookie_secret(self) -> bytes:
        """$EGS_COOKIE_SECRET (the same for every replica: the chart's Secret), else a secret kept in the
        data directory, made at the first start."""
        if shared := os.environ.get("EGS_COOKIE_SECRET"):
            return shared.encode()
        path = os.path.join(self.data_dir, "egs_cookie_secret")
        if not os.path.exists(path):
            os.makedirs(self.data_dir, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        with open(path) as f:
            return f.read().strip().encode()

    def make_app(self) -> web.Application:
        api = self.api_prefix
        handlers = [
            *[(api + path, handler) for path, handler in API_ROUTES],
            (api + r".*", NotFoundHandler),
            (self.prefix + webhooks.ROUTE, webhooks.PodWebhookHandler),
            (self.prefix + r"metrics", prometheus.MetricsHandler),
            (self.prefix + r"endpoints/([^/]+)/([^/]+)/(.*)", EndpointProxyHandler),
            (
                self.prefix + r"endpoints/([^/]+)/([^/]+)",
                web.RedirectHandler,
                {"url": self.prefix + "endpoints/{0}/{1}/"},
            ),
            (self.prefix + r"oauth_callback", pages.OAuthCallbackHandler),
            *pages.page_routes(self.prefix),
            (self.prefix.rstrip("/"), web.RedirectHandler, {"url": self.prefix}),
        ]
        return BoundedApplication(
            handlers,
            body_limit=self.body_limit,
            egs=self,
            hub_auth=self.hub_auth,
            cookie_secret=self._cookie_secret(),
            static_path=os.path.join(HERE, "static"),
            static_url_prefix=self.prefix + "static/",
            jinja_env=self._jinja_env(),
            default_handler_class=NotFoundHandler,
        )

    def body_limit(self, path: str) -> Limit:
        """The most body bytes a request at ``path`` may send (body_limits.py)."""
        if path.startswith(self.prefix + "endpoints/"):
            return Limit(self.endpoint_max_body_bytes, "c.EGSService.endpoint_max_body_bytes")
        if path.startswith(self.prefix + "webhooks/"):
            return Limit(max(self.max_body_bytes, webhooks.REVIEW_MAX_BYTES), "the webhook's REVIEW_MAX_BYTES")
        return Limit(self.max_body_bytes, "c.EGSService.max_body_bytes")

    def _jinja_env(self) -> jinja2.Environment:
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")), autoescape=True)
        env.globals["isolation_notice"] = self.isolation_notice()  # the dashboard's (isolation none)
        return env

    async def setup(self) -> None:
        """Open the database, find the GPUs and connect to the hub."""
        engine = make_engine(self.db_url)
        check_schema(engine)
        self.sessions = make_sessions(engine)
        self.hub_auth = HubOAuth(cache_max_age=self.identity_cache_seconds)
        self.hub = HubClient(self.hub_auth.api_url, self.hub_auth.api_token)
        with self.sessions() as session:
            declared_layouts = queries.declared_layouts(session, LOCAL_CLUSTER)
        self.local_backend = (
            LocalBackend(self.hub, cluster=LOCAL_CLUSTER, inventory_file=self.inventory_file, layouts=declared_layouts)
            if self.local_gpus
            else None
        )
        self.registry = Clusters(
            self.sessions,
            self.clock,
            retry_interval=self.cluster_retry_interval,
            request_timeout=self.cluster_request_timeout,
            role_templates=self.all_role_templates,
            namespace_grants=parse_namespace_grants(self.namespace_grants),
        )
        self.slice_setup = SliceSetup(self.sessions, self.registry.backends, retry_interval=self.cluster_retry_interval)
        self.registry.on_available = self.slice_setup.forget
        self.kube_events = KubeEvents(self.sessions, self.registry.backends, self.clock)
        if self.local_backend is not None:
            await self.registry.add_local(self.local_backend, f"this host ({self.local_backend.host})")
        await self.registry.restore(self._cluster_specs(self.clusters))
        order = Order(self.queue_fair_share_s, self.queue_size_s_per_gpu_hour)
        self.planning = Planning(timedelta(seconds=self.fairshare_half_life), order)
        self.planning.watch(self.sessions, timedelta(seconds=self.plan_reuse_seconds))
        with self.sessions() as session:
            self.planning.restore(session)
        self.notifier = SlackNotifier(self.slack_webhook_url) if self.slack_webhook_url else None
        self.telemetry = Telemetry(
            self._metric_source(),
            self.sessions,
            self.clock,
            interval=self.metrics_interval,
            idle_threshold=self.idle_threshold,
            thresholds=self._thresholds_of(self.alert_thresholds),
            notifier=self.notifier,
            kube_events=self.kube_events,
        )
        self.exporter = Exporter(self.sessions, lambda: self.telemetry.history.latest().values())
        self.checklists = Checklists(
            self.sessions,
            self.registry.backends,
            self.telemetry,
            self.clock,
            kube_events=self.kube_events,
            notifier=self.notifier,
        )
        self.reconciler = Reconciler(
            self.sessions,
            self.registry.backends,
            self.clock,
            self.reconcile_interval,
            planning=self.planning,
            exporter=self.exporter,
            slice_setup=self.slice_setup,
            kube_events=self.kube_events,
            checklists=self.checklists,
        )
        self.checklists.on_change = self.reconciler.wake
        self.remediation = Remediation(
            self.sessions,
            self.planning,
            self.telemetry,
            self.checklists,
            self.registry.backends,
            self.clock,
            kube_events=self.kube_events,
            on_change=self.reconciler.wake,
        )
        self.telemetry.after_pass = self.remediation.check
        self.maintenance = MaintenanceStarts(
            self.sessions, self.remediation, self.clock, self.reconcile_interval, on_change=self.reconciler.wake
        )
        self.layouts = Layouts(
            self.sessions,
            self.registry.backends,
            self.clock,
            self.reconcile_interval,
            self.repartition_seconds,
            self.registry.refresh_cluster,
            on_change=self.reconciler.wake,
            targets=[parse_body(LayoutTarget, target).to_target() for target in self.layout_targets],
            planned=self._planned_placements,
        )
        self.pools = PoolScaler(
            self.sessions, self.planning, self.registry.backends, self.clock, self.reconcile_interval
        )
        self.capacity = CapacityPlans(self.db_url, self.clock)
        self.commands = Commands(
            self.sessions, self.planning, self.clock, self.reconciler.wake, max_start_after=self.max_start_after
        )
        self.auto_gprs = AutoGPRs(self)
        self.endpoints = Endpoints(
            self.sessions,
            self.planning,
            self.commands,
            EndpointServers(os.path.join(self.data_dir, "endpoints"), Isolation(self.isolation, self.home_dir_template))
            if self.local_backend is not None
            else None,
            self.clock,
            self.reconcile_interval,
            cluster=LOCAL_CLUSTER,
            prefix=self.prefix,
            samples=self.telemetry.fresh,
            backends=self.registry.backends,
            vllm_image=self.endpoint_vllm_image,
            service_url=self.endpoint_service_url,
            allow_unisolated_commands=self.allow_unisolated_commands,
        )
        self.exporter.registry.register(EndpointCollector(self.endpoints))
        self.gpr_sync = GPRSync(
            self.sessions,
            self.registry.backends,
            self.clock,
            self.commands,
            interval=self.reconcile_interval,
            refresh_interval=self.cluster_retry_interval,
        )
        self.telemetry.on_release = self.reconciler.wake
        self.registry.on_inventory = self._inventory_changed
        self.log.info("GPU metrics: %s", self.telemetry.source_error or self.telemetry.source.name)

    def _inventory_changed(self) -> None:
        """A cluster's inventory or health changed, or one was added or removed: plan again, follow the watches."""
        self.reconciler.wake()
        self.gpr_sync.wake()

    def _metric_source(self) -> MetricSource | None:
        choice = self.metrics_source
        if choice == "auto":
            uses_nvml = self.local_backend is not None and self.local_backend.uses_nvml
            choice = "nvml" if uses_nvml else "prometheus" if self.prometheus_url else "none"
        if choice == "nvml":
            if self.local_backend is None:
                raise TraitError("metrics_source is 'nvml' but local_gpus is False: this host's GPUs are not used")
            return NVMLSource(self.local_backend.host)
        if choice == "prometheus":
            if not self.prometheus_url:
                raise TraitError("metrics_source is 'prometheus' but prometheus_url is not set")
            return PrometheusSource(self.prometheus_url, self.prometheus_selector, naming=self._gpu_naming)
        return None

    def _gpu_naming(self) -> Naming:
        """What names the DCGM exporter's series now (service/gpu_naming.py)."""
        instances = self.local_backend.mig_instances if self.local_backend is not None else {}
        with self.sessions() as session:
            return gpu_naming.naming(session, instances)

    async def serve(self) -> None:
        # The reconcile pass plans in a worker thread. A thread waiting for the GIL gets it
        # after at most this long (5 ms by default): the event loop's thread gives up the GIL
        # at every socket and database call, and would wait that long each time a plan is made.
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        leadership = Leadership(self.db_url, self.advertise_url, self.leader_poll_seconds)
        check_schema(leadership.engine)  # a standby refuses another revision too
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopped.set)
        if not await self._stand_by(leadership, stopped):
            return
        await self.setup()
        leadership.fence(self.sessions)
        server = HTTPServer(self.make_app(), xheaders=True, max_body_size=UNBOUNDED)
        self._listen(server)
        hooks = self._webhook_server(webhooks.make_app(self, self.body_limit))
        self.slice_setup.start()
        self.reconciler.start()
        self.telemetry.start()
        self.registry.start()
        self.gpr_sync.start()
        self.maintenance.start()
        self.layouts.start()
        self.pools.start()
        self.endpoints.start()
        self.log.info("egs-hub service listening on %s%s", self.service_url, self.prefix)
        lost, stopping = asyncio.ensure_future(leadership.hold()), asyncio.ensure_future(stopped.wait())
        await asyncio.wait([lost, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        server.stop()
        if hooks is not None:
            hooks.stop()
        await self.gpr_sync.stop()
        await self.maintenance.stop()
        await self.layouts.stop()
        await self.pools.stop()
        await self.endpoints.stop()
        await self.capacity.stop()
        await self.slice_setup.stop()
        await self.telemetry.stop()
        await self.reconciler.stop()
        await self.registry.close()
        if lost.done():
            raise SystemExit("this replica lost the leader's lock: it exits, to start again as a standby")
        lost.cancel()

    async def _stand_by(self, leadership: Leadership, stopped: asyncio.Event) -> bool:
        """Wait for the leader's lock, forwarding requests to the leader meanwhile (standby.py);
        False when stopped first."""
        if await leadership.try_take():
            return True
        server = HTTPServer(
            standby.make_app(leadership, self.api_prefix, self.body_limit), xheaders=True, max_body_size=UNBOUNDED
        )
        self._listen(server)
        hooks = self._webhook_server(standby.make_app(leadership, self.api_prefix, self.body_limit))
        self.log.info("standing by on %s: the replica at %s leads", self.service_url, leadership.leader_url())
        taken, stopping = asyncio.ensure_future(leadership.take()), asyncio.ensure_future(stopped.wait())
        await asyncio.wait([taken, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        for each in (server, hooks):
            if each is not None:
                each.stop()
                await each.close_all_connections()
        if not taken.done():
            taken.cancel()
            return False
        return True

    def _listen(self, server: HTTPServer) -> None:
        url = urlparse(self.service_url)
        server.listen(url.port or 80, url.hostname or "127.0.0.1")

    def _planned_placements(self) -> list[Placement]:
        """Where the last plan places the queued GPRs (the layout targets leave those machines alone)."""
        last = self.planning.last
        estimates = last.plan.estimates.values() if last is not None else ()
        return [e.placement for e in estimates if e.placement is not None]

    def _webhook_server(self, app: web.Application) -> HTTPServer | None:
        """The HTTPS listener for the admission webhook serving ``app``, when webhook_port is set."""
        if not self.webhook_port:
            return None
        if not (self.webhook_certfile and self.webhook_keyfile):
            raise TraitError("webhook_port is set: webhook_certfile and webhook_keyfile are needed too (HTTPS only)")
        server = webhooks.listen(app, self.webhook_port, self.webhook_ip, self.webhook_certfile, self.webhook_keyfile)
        self.log.info(
            "pod admission webhook listening on https://%s:%s%s",
            self.webhook_ip or "*",
            self.webhook_port,
            self.prefix + "webhooks/pods/<cluster>",
        )
        return server

    def start(self) -> None:
        # A crash in a C extension prints every thread's Python stack to the log before the
        # supervisor (supervise.py) starts the service again.
        faulthandler.enable(all_threads=True)
        asyncio.run(self.serve())
