"""What runs on a slice's GPUs, grouped into workloads, with each workload's hotspots.

Vocabulary: a *workload* is a user server started in the slice (with the
processes that run under it), a pod in one of the slice's namespaces (from the
DCGM exporter's labels), or a process on the slice's GPUs that belongs to no
known server. Its *hottest GPU* is the one with the highest temperature, and
the one drawing the most power; its *utilization* is the mean over its GPUs
that have a reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .samples import GpuSample


@dataclass(frozen=True)
class ServerInSlice:
    user: str
    name: str
    gpus: tuple[str, ...]


@dataclass
class Workload:
    kind: str  # "server", "pod" or "process"
    name: str
    user: str | None = None
    gpus: list[str] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)  # {pid, gpu, used_mib}

    def add_gpu(self, uuid: str) -> None:
        if uuid not in self.gpus:
            self.gpus.append(uuid)


@dataclass(frozen=True)
class Hotspots:
    hottest: GpuSample | None  # by temperature
    most_power: GpuSample | None
    utilization: float | None


def slice_workloads(
    servers: Iterable[ServerInSlice],
    slice_gpus: Iterable[str],
    namespaces: Iterable[str],
    samples: Mapping[str, GpuSample],
) -> list[Workload]:
    """The slice's workloads: its servers first (in the given order), then pods, then stray processes."""
    by_server: dict[tuple[str, str | None], Workload] = {}
    for server in servers:
        workload = Workload("server", f"{server.user}/{server.name}" if server.name else server.user, server.user)
        for uuid in server.gpus:
            workload.add_gpu(uuid)
        by_server[(server.user, server.name)] = workload
    pods: dict[tuple[str, str], Workload] = {}
    strays: list[Workload] = []
    namespaces = set(namespaces)
    for uuid in slice_gpus:
        sample = samples.get(uuid)
        if sample is None:
            continue
        for process in sample.processes or ():
            entry = {"pid": process.pid, "gpu": uuid, "used_mib": process.used_mib}
            owner = by_server.get((process.user, process.server)) if process.user is not None else None
            if owner is None:
                owner = Workload("process", f"pid {process.pid}", process.user)
                strays.append(owner)
            owner.add_gpu(uuid)
            owner.processes.append(entry)
    for sample in samples.values():
        if sample.pod and sample.namespace in namespaces:
            key = (sample.namespace, sample.pod)
            pods.setdefault(key, Workload("pod", f"{sample.namespace}/{sample.pod}")).add_gpu(sample.uuid)
    return [*by_server.values(), *(pods[k] for k in sorted(pods)), *strays]


def hotspots(gpus: Iterable[str], samples: Mapping[str, GpuSample]) -> Hotspots:
    """The hottest GPU, the one drawing most power, and the mean utilization of ``gpus``."""
    known = [samples[u] for u in gpus if u in samples]
    hot = [s for s in known if s.temperature_c is not None]
    powered = [s for s in known if s.power_w is not None]
    busy = [s.utilization for s in known if s.utilization is not None]
    return Hotspots(
        hottest=max(hot, key=lambda s: (s.temperature_c, s.uuid)) if hot else None,
        most_power=max(powered, key=lambda s: (s.power_w, s.uuid)) if powered else None,
        utilization=sum(busy) / len(busy) if busy else None,
    )
