"""GPU readings of this host from NVML (the ``nvidia-ml-py`` binding, imported as pynvml).

Vocabulary: a *required* reading (UUID, utilization, memory, temperature) that
fails means the GPU cannot be read now: it is left out of the pass, which the
alerts see as a GPU gone quiet. An *optional* reading (power, clocks, throttle
reasons, ECC, processes, XID) that the GPU does not support is None. NVML is started
once and kept; ``close`` shuts it down. XID errors come from NVML's event API: every
GPU is registered on one event set when first seen, and each pass drains the set
without waiting; a GPU's ``xid`` is the last XID code it reported (0: none since the
service started), as the DCGM exporter's ``DCGM_FI_DEV_XID_ERRORS`` is. The NVML module is a parameter so hosts
without the driver can exercise this with a double of the same functions.

A GPU in MIG mode is sampled per MIG instance, by the instance's ``MIG-`` UUID (the unit the
inventory lists): its memory and processes are the instance's own; its temperature, power,
clocks, throttle reasons, ECC and XID are the physical GPU's, shared by its instances; its
utilization is None, as NVML reads no utilization in MIG mode (core/idle.py then judges the
instance by its processes). Its ``index`` is None: the inventory numbers units, not NVML.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from types import ModuleType

import pynvml

from ..core.samples import GpuProcess, GpuSample
from ..nvml_handles import as_text, mig_enabled, mig_handles
from . import MetricsUnavailable
from .processes import server_of

log = logging.getLogger(__name__)

# NVML clocks event (throttle) reason bits -> the names GpuSample uses (nvmlClocksEventReason*).
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock",
}


def throttle_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_REASONS.items() if mask & bit)


class NVMLSource:
    """Samples every GPU NVML sees on ``node``; ``owner_of`` maps a pid to its (user, server)."""

    name = "nvml"

    def __init__(
        self,
        node: str,
        nvml: ModuleType = pynvml,
        owner_of: Callable[[int], tuple[str, str] | None] = server_of,
    ):
        self.node = node
        self.nvml = nvml
        self.owner_of = owner_of
        self._started = False
        self._events = None  # the XID event set
        self._xid: dict[str, int | None] = {}  # per GPU registered: last XID code; None: not supported

    async def sample(self, now: datetime) -> list[GpuSample]:
        return await asyncio.to_thread(self.read, now)

    def read(self, now: datetime) -> list[GpuSample]:
        nvml = self.nvml
        if not self._started:
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as e:
                raise MetricsUnavailable(f"NVML cannot start on {self.node}: {e}") from None
            self._started = True
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as e:
            raise MetricsUnavailable(f"NVML cannot count the GPUs on {self.node}: {e}") from None
        self._drain_xid_events()
        samples = []
        for index in range(count):
            try:
                samples.extend(self._read_gpu(index, now))
            except nvml.NVMLError as e:
                log.warning("NVML cannot read GPU %d on %s: %s", index, self.node, e)
        return samples

    def close(self) -> None:
        if self._started:
            if self._events is not None:
                self.nvml.nvmlEventSetFree(self._events)
                self._events = None
            self._xid.clear()
            self._started = False
            self.nvml.nvmlShutdown()

    def _register_xid(self, handle, uuid: str) -> None:
        """Register a GPU seen for the first time on the XID event set."""
        nvml = self.nvml
        try:
            if self._events is None:
                self._events = nvml.nvmlEventSetCreate()
            nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._events)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) != nvml.NVML_ERROR_NOT_SUPPORTED:
                log.warning("NVML cannot report XID errors of %s on %s: %s", uuid, self.node, e)
            self._xid[uuid] = None
        else:
            self._xid[uuid] = 0

    def _drain_xid_events(self) -> None:
        """Take every XID event reported since the last pass (waiting for none)."""
        nvml = self.nvml
        while self._events is not None:
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError as e:
                if getattr(e, "value", None) != nvml.NVML_ERROR_TIMEOUT:
                    log.warning("NVML cannot read XID events on %s: %s", self.node, e)
                return
            if event.eventType & nvml.nvmlEventTypeXidCriticalError:
                try:
                    uuid = as_text(nvml.nvmlDeviceGetUUID(event.device))
                except nvml.NVMLError as e:
                    log.warning("XID %d on %s from a GPU NVML cannot name: %s", event.eventData, self.node, e)
                    continue
                self._xid[uuid] = int(event.eventData)
                log.warning("GPU %s on %s reported XID error %d", uuid, self.node, event.eventData)

    def _optional(self, function: str, *args):
        try:
            return getattr(self.nvml, function)(*args)
        except self.nvml.NVMLError:
            return None

    def _read_gpu(self, index: int, now: datetime) -> list[GpuSample]:
        """The GPU's sample, or its MIG instances' samples when it is in MIG mode."""
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = as_text(nvml.nvmlDeviceGetUUID(handle))
        if uuid not in self._xid:
            self._register_xid(handle, uuid)
        if mig_enabled(nvml, handle):
            physical = self._physical(handle, uuid)
            return [
                self._sample(mig, as_text(nvml.nvmlDeviceGetUUID(mig)), None, now, physical)
                for mig in mig_handles(nvml, handle)
            ]
        rates = nvml.nvmlDeviceGetUtilizationRates(handle)
        readings = {"utilization": float(rates.gpu), "memory_utilization": float(rates.memory)}
        return [self._sample(handle, uuid, index, now, self._physical(handle, uuid) | readings)]

    def _physical(self, handle, uuid: str) -> dict:
        """The readings of the physical GPU: temperature (required), power, clocks, throttle reasons, ECC, XID."""
        nvml = self.nvml
        power_mw = self._optional("nvmlDeviceGetPowerUsage", handle)
        limit_mw = self._optional("nvmlDeviceGetEnforcedPowerLimit", handle)
        reasons = self._optional("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return {
            "temperature_c": float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            "power_w": None if power_mw is None else power_mw / 1000,
            "power_limit_w": None if limit_mw is None else limit_mw / 1000,
            "sm_clock_mhz": self._optional("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM),
            "throttle_reasons": () if reasons is None else throttle_names(reasons),
            "ecc_errors": self._optional(
                "nvmlDeviceGetTotalEccErrors", handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "xid": self._xid[uuid],
        }

    def _sample(self, handle, uuid: str, index: int | None, now: datetime, readings: dict) -> GpuSample:
        """A sample of the unit ``handle`` (a GPU or a MIG device): its memory (required) and processes."""
        memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
        return GpuSample(
            uuid=uuid,
            time=now,
            node=self.node,
            index=index,
            memory_used_mib=memory.used / 2**20,
            memory_total_mib=memory.total / 2**20,
            processes=self._processes(handle),
            **readings,
        )

    def _processes(self, handle) -> tuple[GpuProcess, ...] | None:
        compute = self._optional("nvmlDeviceGetComputeRunningProcesses", handle)
        graphics = self._optional("nvmlDeviceGetGraphicsRunningProcesses", handle)
        if compute is None and graphics is None:
            return None
        used: dict[int, int | None] = {}  # a process may be in both lists: the first one counts
        for process in [*(compute or ()), *(graphics or ())]:
            used.setdefault(process.pid, None if process.usedGpuMemory is None else process.usedGpuMemory // 2**20)
        processes = []
        for pid in sorted(used):
            owner = self.owner_of(pid)
            user, server = owner if owner is not None else (None, None)
            processes.append(GpuProcess(pid=pid, used_mib=used[pid], user=user, server=server))
        return tuple(processes)
