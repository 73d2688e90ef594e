"""GPU telemetry as plain data: what a metric source read off one GPU at one time.

Vocabulary: a *sample* is one GPU's readings at one instant; a reading a source
cannot give is ``None`` (not zero). *Utilization* is the SM (compute) busy
percentage, *memory utilization* the memory-controller busy percentage, both
0-100. A *workload* is what uses a GPU: a process (pid, from NVML) or a pod
(namespace and name, from the DCGM exporter), with the user server that owns it
when it is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class GpuProcess:
    """A process using a GPU; ``user``/``server`` name the hub server it belongs to, when known."""

    pid: int
    used_mib: int | None = None
    user: str | None = None
    server: str | None = None


@dataclass(frozen=True)
class GpuSample:
    """One GPU's readings at ``time``.

    ``processes`` is None when the source cannot list them (the DCGM exporter),
    and empty when it can and none runs. ``pod``/``namespace`` name the pod the
    GPU is assigned to (DCGM exporter on Kubernetes). ``throttle_reasons`` are
    short names ("sw_power_cap", "hw_thermal_slowdown", ...). ``ecc_errors`` counts
    uncorrected ECC errors since the driver loaded; ``xid`` is the last XID error code
    (0 for none).
    """

    uuid: str
    time: datetime
    node: str | None = None
    index: int | None = None
    utilization: float | None = None
    memory_utilization: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    ecc_errors: int | None = None
    xid: int | None = None
    processes: tuple[GpuProcess, ...] | None = None
    pod: str | None = None
    namespace: str | None = None
