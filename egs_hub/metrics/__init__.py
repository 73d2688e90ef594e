"""GPU telemetry sources: NVML on this host, or the DCGM exporter through Prometheus.

The service reads every source through ``MetricSource`` and never asks which
kind it is. A source answers the latest sample of every GPU it sees; it keeps
no history (history.py does) and knows nothing of GPRs (the Prometheus source is
told which inventory GPU each exporter series is, core/gpu_names.py, and that
match uses which workspace holds a Kubernetes node's MIG instances).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from ..core.samples import GpuSample


class MetricsUnavailable(Exception):
    """The source cannot be read now; the message says why (NVML missing, Prometheus down...)."""


class MetricSource(Protocol):
    name: str

    async def sample(self, now: datetime) -> list[GpuSample]:
        """The latest readings of every GPU the source sees, stamped ``now`` or the source's own time."""
