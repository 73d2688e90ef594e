"""SliceKubeSpawner: JupyterLab in a pod in the slice's namespace, on the slice's GPU nodes.

It is KubeSpawner with the slice chosen as SliceSpawnerMixin does (the spawn
form, the hub API's ``user_options["slice"]``, else the user's only slice),
and a GPU count (``user_options["gpus"]``). At start it asks the EGS service
for the slice (its namespaces) and registers the server (which answers the
GPUs the slice holds now), then sets KubeSpawner's own traits:

- ``namespace``: the slice's first namespace on ``egs_cluster``;
- ``extra_labels``: ``egs.io/slice=<slice>``;
- with GPUs asked and GPUs of the slice on ``egs_cluster`` (a provisioned GPR):
  ``extra_resource_limits`` ``nvidia.com/gpu`` = the GPUs asked, at most those
  held there; ``node_selector`` ``egs.io/slice=<slice>`` and the toleration
  ``egs.io/slice=<slice>:NoSchedule`` of the slice's nodes' taint; where the
  slice holds no whole GPUs there but MIG instances or shares, those it holds
  most of instead (``nvidia.com/mig-<profile>`` or ``nvidia.com/gpu.shared``),
  on the share nodes where it holds them (``share.egs.io/<slice>=true``,
  tolerating the free pool's taint; backends/kubernetes/shares.py);
- without such GPUs: none of the three; the server starts CPU-only, and the
  spawn progress says when the slice's next queued GPR is estimated to start
  (or that none is queued).

- with a ``home_volume_size`` in the slice's policy (10Gi unless it says none):
  the member's home volume, a PVC of that size and ``home_volume_class`` in the
  slice's namespace (KubeSpawner's ``storage_pvc_ensure``, ``pvc_name``, made
  at the first start there and kept after), labelled ``egs.io/slice=<slice>``
  and mounted at ``egs_home_mount_path``; the workspace page lists these volumes.

Each start sets these from the values configured for the spawner, so nothing
of a previous start carries over. A user in no slice starts CPU-only in the
configured ``namespace``. The GPU limit is this spawner's to set: a configured
GPU resource (``nvidia.com/gpu``, a MIG instance or a share) in
``extra_resource_limits`` is replaced (or dropped without GPUs). KubeSpawner's
``profile_list`` form is replaced by the slice form, and ``enable_user_namespaces``
is refused: servers live in their slice's namespace.

The device plugin enforces the GPU limit, so unlike SliceLocalSpawner this is
an isolation boundary, as far as the cluster's pod security allows.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from traitlets import TraitError, Unicode, default, validate

from ..backends.kubernetes.nodes import FREE, GPU_RESOURCE, SLICE_LABEL, is_gpu_resource
from ..backends.kubernetes.shares import resource_counts, share_label
from ..backends.kubernetes.webhook import slice_toleration
from .slice import SliceSpawnerMixin, parse_time, requested_gpus

try:
    from kubespawner import KubeSpawner
except ModuleNotFoundError as e:
    if e.name != "kubespawner":
        raise
    raise ImportError(
        "SliceKubeSpawner needs KubeSpawner (jupyterhub-kubespawner): pip install egs-hub[kubernetes]"
    ) from e

# KubeSpawner traits a start sets from their configured values and the slice.
PLACEMENT_TRAITS = (
    "namespace",
    "extra_labels",
    "node_selector",
    "tolerations",
    "extra_resource_limits",
    "storage_pvc_ensure",
    "storage_capacity",
    "storage_class",
    "storage_extra_labels",
    "volumes",
    "volume_mounts",
)
HOME_VOLUME = "egs-home"  # the name of the home volume in the pod


@dataclass(frozen=True)
class HomeMount:
    """A member's home volume in the slice's namespace: a PVC of ``size`` (of ``storage_class``; None: the
    cluster's default) named ``claim``, mounted at ``mount_path``."""

    claim: str
    size: str
    storage_class: str | None
    mount_path: str


def home_mount(slice_view: Mapping, claim: str, mount_path: str) -> HomeMount | None:
    """The home volume the slice's policy gives (``home_volume_size``, ``home_volume_class``); None: none."""
    policy = slice_view.get("policy") or {}
    size = policy.get("home_volume_size")
    return None if not size else HomeMount(claim, size, policy.get("home_volume_class"), mount_path)


def slice_namespace(slice_view: Mapping, cluster: str) -> str:
    """The slice's first namespace on the cluster, from the service's ``namespaces`` {cluster: [names]}."""
    names = (slice_view.get("namespaces") or {}).get(cluster) or []
    if not names:
        raise RuntimeError(
            f"slice {slice_view['name']!r} has no namespace on cluster {cluster!r}; "
            "an egs-hub admin adds one to the slice before servers can start there"
        )
    return names[0]


def gpus_on(cluster: str, gpus: list[str]) -> list[str]:
    """The GPU ids on the cluster: a Kubernetes GPU's id begins ``<cluster>/<node>/`` (nodes.py)."""
    return [g for g in gpus if g.startswith(f"{cluster}/")]


def held_resource(held: list[str]) -> tuple[str, int]:
    """What a pod asks for of the GPUs the slice holds on the cluster (``held``): whole GPUs where it holds
    any, else the MIG instances or shares it holds most of (shares.py); and how many it holds of that."""
    counts = resource_counts(held)
    if GPU_RESOURCE in counts:
        return GPU_RESOURCE, counts[GPU_RESOURCE]
    return min(counts.items(), key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True)
class Placement:
    """Where a server's pod goes and what it may use: ``gpus`` of ``resource`` (0: CPU-only)."""

    slice: str | None
    namespace: str | None
    gpus: int
    home: HomeMount | None = None
    resource: str = GPU_RESOURCE

    def traits(self, configured: Mapping) -> dict:
        """KubeSpawner's placement traits: the configured values with the slice's added."""
        limits = {k: v for k, v in configured["extra_resource_limits"].items() if not is_gpu_resource(k)}
        traits = {
            "namespace": self.namespace or configured["namespace"],
            "extra_labels": dict(configured["extra_labels"]),
            "node_selector": dict(configured["node_selector"]),
            "tolerations": configured["tolerations"],
            "extra_resource_limits": limits,
            **{name: configured[name] for name in PLACEMENT_TRAITS[5:]},
        }
        if self.slice is not None:
            traits["extra_labels"][SLICE_LABEL] = self.slice
        if self.home is not None:
            volume = {"name": HOME_VOLUME, "persistentVolumeClaim": {"claimName": self.home.claim}}
            traits.update(
                storage_pvc_ensure=True,
                storage_capacity=self.home.size,
                storage_class=self.home.storage_class,
                storage_extra_labels={**configured["storage_extra_labels"], SLICE_LABEL: self.slice},
                volumes=[*_listed(configured["volumes"]), volume],
                volume_mounts=[
                    *_listed(configured["volume_mounts"]),
                    {"name": HOME_VOLUME, "mountPath": self.home.mount_path},
                ],
            )
        if self.gpus and self.resource == GPU_RESOURCE:
            traits["node_selector"][SLICE_LABEL] = self.slice
            traits["tolerations"] = [*_listed(configured["tolerations"]), slice_toleration(self.slice)]
        elif self.gpus:  # MIG instances or shares, on the share nodes where the slice holds them
            traits["node_selector"][share_label(self.slice)] = "true"
            traits["tolerations"] = [*_listed(configured["tolerations"]), slice_toleration(FREE)]
        if self.gpus:
            limits[self.resource] = str(self.gpus)
        return traits


def _listed(items: list | dict) -> list:
    """KubeSpawner takes tolerations, volumes and mounts as a list or as a dict whose values (sorted by key)
    are the list."""
    return [items[k] for k in sorted(items)] if isinstance(items, dict) else list(items)


def next_gpr_notice(slice_name: str, cluster: str, queued: list[dict]) -> str:
    """What a server that asked for GPUs but starts without them is told: the slice's next GPR for the cluster.

    ``queued`` are the slice's queued GPRs from the service; those for another
    cluster do not count (a GPR for any cluster, ``cluster`` null, does).
    """
    here = [g for g in queued if g.get("cluster") in (None, cluster) and g.get("estimated_start")]
    head = f"No GPUs of slice {slice_name} are provisioned on cluster {cluster}: starting without GPUs."
    if not here:
        return f"{head} No GPR of the slice is queued for it; request GPUs with a GPR, then restart the server."
    first = min(here, key=lambda g: parse_time(g["estimated_start"]))
    return (
        f"{head} The slice's next GPR ({first['id']}) is estimated to start at {first['estimated_start']}; "
        "restart the server then to get its GPUs."
    )


class SliceKubeSpawner(SliceSpawnerMixin, KubeSpawner):
    egs_cluster = Unicode(
        help="""Name of the cluster, as registered in egs-hub (GET /clusters), where servers start:
        the one KubeSpawner's Kubernetes client reaches. Required.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    egs_home_mount_path = Unicode(
        "/home/jovyan",
        help="""Where a server's home volume is mounted in its pod: the home directory of the image's user.
        A slice whose policy gives home_volume_size gives each member a PVC of that size (and
        home_volume_class) in the slice's namespace, named by KubeSpawner's pvc_name_template and
        kept across servers and GPRs; leave KubeSpawner's own storage settings off.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    egs_pod_api_url = Unicode(
        help="""URL of the EGS REST API v1 as the server's pod reaches it (EGS_API_URL in the pod),
        e.g. http://proxy-public/services/egs/api/v1/. Default: egs_api_url.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    @default("egs_pod_api_url")
    def _default_pod_api_url(self) -> str:
        return self.egs_api_url

    @validate("enable_user_namespaces")
    def _refuse_user_namespaces(self, proposal) -> bool:
        if proposal["value"]:
            raise TraitError(
                "SliceKubeSpawner starts servers in their slice's namespace: leave enable_user_namespaces off"
            )
        return proposal["value"]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._configured = {name: copy.deepcopy(getattr(self, name)) for name in PLACEMENT_TRAITS}
        self._egs_env: dict[str, str] = {}
        self._egs_preparation: asyncio.Future[str] | None = None
        self._egs_start_notes()

    async def queued_gprs(self, slice_name: str) -> list[dict]:
        query = urlencode({"slice": slice_name, "status": "queued"})
        return (await self._egs("GET", f"gprs?{query}"))["gprs"]

    async def egs_placement(self) -> tuple[Placement, str]:
        """Where this start's pod goes, registering the server with the service; and what progress says of it."""
        if not self.egs_cluster:
            raise RuntimeError(
                "SliceKubeSpawner.egs_cluster is not set: name the cluster (as registered in egs-hub) "
                "where servers start"
            )
        wanted = requested_gpus((self.user_options or {}).get("gpus"))
        slice_name = await self.resolve_slice()
        if slice_name is None:
            self._egs_env = {"EGS_SLICE": ""}
            return Placement(None, None, 0), f"{self.user.name} is in no workspace: starting without GPUs."
        slice_view = await self._egs("GET", f"slices/{quote(slice_name, safe='')}")
        namespace = slice_namespace(slice_view, self.egs_cluster)
        home = home_mount(slice_view, self.pvc_name, self.egs_home_mount_path)
        cluster = self.egs_cluster
        granted = await self.egs_grant(slice_name, wanted, cluster, lambda answer: gpus_on(cluster, answer["gpus"]))
        held = gpus_on(self.egs_cluster, granted["gpus"])
        self._egs_env = {"EGS_SLICE": slice_name, "EGS_GPRS": ",".join(map(str, granted["gprs"]))}
        where = f"slice {slice_name} (namespace {namespace} on cluster {self.egs_cluster})"
        if not wanted:
            return Placement(slice_name, namespace, 0, home), f"Starting in {where} without GPUs, as asked."
        if not held and granted.get("auto_gpr"):
            return Placement(slice_name, namespace, 0, home), f"Starting in {where} without GPUs for now."
        if not held:
            notice = next_gpr_notice(slice_name, self.egs_cluster, await self.queued_gprs(slice_name))
            return Placement(slice_name, namespace, 0, home), notice
        resource, holds = held_resource(held)
        count = min(wanted, holds)
        capped = f" (asked {wanted}; the slice holds {holds} there)" if count < wanted else ""
        what = "GPU(s)" if resource == GPU_RESOURCE else resource
        return Placement(
            slice_name, namespace, count, home, resource
        ), f"Starting in {where} with {count} {what}{capped}."

    async def egs_place(self) -> str:
        """Place this start: set the placement traits from the configured ones and the slice; the progress notice."""
        placement, notice = await self.egs_placement()
        for name, value in placement.traits(self._configured).items():
            setattr(self, name, value)
        if placement.home is not None:
            self._pvc_exists = False  # a start in another slice's namespace makes (or finds) the PVC there
            self.egs_note(
                f"Your home directory is volume {placement.home.claim} ({placement.home.size}) "
                f"in namespace {placement.namespace}, kept across servers."
            )
        self.dns_name = self.dns_name_template.format(namespace=self.namespace, name=self.pod_name)
        self.egs_note(notice)
        return notice

    def start(self):
        # KubeSpawner's start: _start_future ends progress(); the placement comes first, and
        # progress() waits for it (JupyterHub may ask for progress before start runs).
        self._egs_start_notes()
        self._egs_preparation = asyncio.ensure_future(self.egs_place())
        self._start_future = asyncio.ensure_future(self._start_placed(self._egs_preparation))
        return self._start_future

    async def _start_placed(self, preparation: asyncio.Future[str]):
        await preparation
        return await self._start()

    async def progress(self):
        while self._egs_preparation is None:
            await asyncio.sleep(0.1)
        preparation = self._egs_preparation
        async for event in self.egs_progress(preparation):
            yield event
        if preparation.exception() is not None:
            return  # start fails with this error, which JupyterHub shows
        async for event in super().progress():
            yield event

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        env.update(self._egs_env)
        env["EGS_API_URL"] = self.egs_pod_api_url
        return env

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        self._egs_preparation = None
        await self.forget_server()
