"""A test double of the pynvml module (nvidia-ml-py): the functions egs-hub calls, answering
from plain data the way NVML does on a real host.

It stands in for the NVIDIA driver in CI; tests/backends/test_nvml.py and
tests/metrics/test_nvml_source.py also run the real binding, which on a GPU host
(the device tool) reads real GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

H100 = "NVIDIA H100 80GB HBM3"
H100_BYTES = 85520809984  # what nvmlDeviceGetMemoryInfo(...).total says on an H100 SXM 80GB
A100_40 = "NVIDIA A100-SXM4-40GB"
A100_40_BYTES = 42505273344


@dataclass(frozen=True)
class Process:
    pid: int
    used_bytes: int | None  # None: NVML could not tell (usedGpuMemory is None)


@dataclass(frozen=True)
class Device:
    """One GPU as NVML reports it; power in milliwatts, as NVML answers."""

    name: str
    uuid: str
    total_bytes: int
    used_bytes: int = 2**29
    utilization: int = 0
    memory_utilization: int = 0
    temperature: int = 33
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    sm_clock_mhz: int = 345
    clocks_event_reasons: int = 0x1  # GPU idle
    ecc_uncorrected: int = 0
    compute_processes: tuple[Process, ...] = ()
    graphics_processes: tuple[Process, ...] = ()
    unsupported: frozenset[str] = frozenset()  # functions answering NVML_ERROR_NOT_SUPPORTED
    # MIG: None on a GPU without MIG (nvmlDeviceGetMigMode is not supported); else whether MIG mode is
    # on, and its MIG devices by index (None: no instance there; NVML's indexes may have gaps). An
    # H100 or A100 supports MIG: off unless said.
    mig_enabled: bool | None = None
    mig_devices: tuple[Device | None, ...] = ()
    gpu_instance_id: int | None = None  # a MIG device's GPU instance id (NVML numbers them per GPU)


def h100(i: int, **readings) -> Device:
    return Device(
        H100, f"GPU-4b0e6f7a-1c2d-3e4f-5a6b-7c8d9e0f1a{i:02d}", H100_BYTES, **{"mig_enabled": False, **readings}
    )


def a100(i: int, **readings) -> Device:
    return Device(
        A100_40, f"GPU-9d8c7b6a-5f4e-3d2c-1b0a-0f1e2d3c4b{i:02d}", A100_40_BYTES, **{"mig_enabled": False, **readings}
    )


def h100_mig(i: int, layout: tuple[str, ...] = ("1g.10gb",) * 7, **readings) -> Device:
    """An H100 in MIG mode split into ``layout``'s instances, named and sized as NVML names them
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"; a 1g.10gb has 9,856 MiB)."""
    devices = tuple(
        Device(
            f"{H100} MIG {profile}",
            f"MIG-7c1d2e3f-4a5b-5c6d-8e9f-{i:02d}{k:02d}00000000",
            _MIG_BYTES[profile],
            gpu_instance_id=GPU_INSTANCE_IDS[k],
        )
        for k, profile in enumerate(layout)
    )
    return Device(H100, h100(i).uuid, H100_BYTES, mig_enabled=True, mig_devices=devices, **readings)


_MIG_BYTES = {"1g.10gb": 9856 * 2**20, "2g.20gb": 20096 * 2**20, "3g.40gb": 40192 * 2**20, "7g.80gb": 80896 * 2**20}
MAX_MIG_DEVICES = 7  # nvmlDeviceGetMaxMigDeviceCount on an H100 in MIG mode
# The GPU instance ids of a GPU's MIG devices in index order: other numbers than the indexes, as on a GPU.
GPU_INSTANCE_IDS = (7, 8, 9, 10, 11, 12, 13)


class _Handle:
    """Opaque, like pynvml's c_nvmlDevice_t pointer: only the double can read it. ``mig``: the
    index of a MIG device of GPU ``index`` (a MIG device handle)."""

    def __init__(self, index: int, mig: int | None = None):
        self._index = index
        self._mig = mig


@dataclass
class FakeNVML:
    """A double of pynvml.

    ``devices`` are what the driver sees, in index order. ``as_bytes`` answers names
    and UUIDs as bytes, as bindings before nvidia-ml-py 11.515 did. ``init_error`` makes
    nvmlInit fail with that message (no driver); ``fail_on`` names a device function
    that fails (a GPU fallen off the bus), ``fail_index`` only for that GPU.
    ``inits``/``shutdowns`` count the calls. Tests change ``devices`` between calls to
    play GPUs appearing, vanishing or changing their readings, and ``xid(index, code)``
    to play the driver reporting an XID error (NVML's event API: an event set that
    GPUs are registered on, drained with nvmlEventSetWait_v2).
    """

    devices: list[Device] = field(default_factory=list)
    as_bytes: bool = False
    init_error: str | None = None
    fail_on: str | None = None
    fail_index: int | None = None
    inits: int = 0
    shutdowns: int = 0
    registered: set[int] = field(default_factory=set)  # GPUs registered for XID events
    pending: list[tuple[int, int]] = field(default_factory=list)  # (GPU index, XID) not yet waited for
    event_sets: int = 0  # created and not freed

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NOT_FOUND = 6
    NVML_DEVICE_MIG_DISABLE = 0
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_ERROR_TIMEOUT = 10
    nvmlEventTypeXidCriticalError = 8

    class NVMLError(Exception):
        """pynvml raises subclasses of NVMLError whose str() is NVML's message and ``value`` its code."""

        def __init__(self, message: str, value: int | None = None):
            super().__init__(message)
            self.value = value

    def _check(self, function: str, index: int | None = None) -> None:
        if self.fail_on == function and (self.fail_index is None or self.fail_index == index):
            raise self.NVMLError("GPU is lost")

    def _text(self, value: str) -> str | bytes:
        return value.encode() if self.as_bytes else value

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self.devices):
            raise self.NVMLError("Invalid Argument")
        return _Handle(index)

    def _device(self, handle: _Handle, function: str) -> Device:
        self._check(function, handle._index)
        device = self.devices[handle._index]
        if handle._mig is not None:
            device = device.mig_devices[handle._mig]
        if function in device.unsupported:
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        return device

    def nvmlDeviceGetName(self, handle: _Handle) -> str | bytes:
        return self._text(self._device(handle, "nvmlDeviceGetName").name)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str | bytes:
        return self._text(self._device(handle, "nvmlDeviceGetUUID").uuid)

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        device = self._device(handle, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(
            total=device.total_bytes, free=device.total_bytes - device.used_bytes, used=device.used_bytes
        )

    # MIG

    # What a real H100 80GB HBM3 with MIG off answered (driver 580.159.04, the device tool,
    # 2026-11-27): nvmlDeviceGetMigMode [0, 0], nvmlDeviceGetMaxMigDeviceCount 0,
    # nvmlDeviceGetMigDeviceHandleByIndex(handle, 0) NVML_ERROR_NOT_FOUND.

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        """[current, pending] mode; NVML_ERROR_NOT_SUPPORTED on a GPU without MIG."""
        device = self._device(handle, "nvmlDeviceGetMigMode")
        if device.mig_enabled is None:
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        mode = self.NVML_DEVICE_MIG_ENABLE if device.mig_enabled else self.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        device = self._device(handle, "nvmlDeviceGetMaxMigDeviceCount")
        return MAX_MIG_DEVICES if device.mig_enabled else 0  # NVML: 0 where MIG is not supported or enabled

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, index: int) -> _Handle:
        """A MIG device's handle; NVML_ERROR_NOT_FOUND where no instance has that index."""
        device = self._device(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        if not device.mig_enabled:
            raise self.NVMLError("Not Found", self.NVML_ERROR_NOT_FOUND)
        if not 0 <= index < MAX_MIG_DEVICES:
            raise self.NVMLError("Invalid Argument")
        if index >= len(device.mig_devices) or device.mig_devices[index] is None:
            raise self.NVMLError("Not Found", self.NVML_ERROR_NOT_FOUND)
        return _Handle(handle._index, index)

    def nvmlDeviceGetGpuInstanceId(self, handle: _Handle) -> int:
        """A MIG device's GPU instance id; NVML_ERROR_INVALID_ARGUMENT for a whole GPU's handle."""
        device = self._device(handle, "nvmlDeviceGetGpuInstanceId")
        if handle._mig is None:
            raise self.NVMLError("Invalid Argument")
        return device.gpu_instance_id

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> SimpleNamespace:
        """NVML_ERROR_NOT_SUPPORTED in MIG mode, of the GPU or of its MIG devices (NVML's documentation)."""
        device = self._device(handle, "nvmlDeviceGetUtilizationRates")
        if handle._mig is not None or device.mig_enabled:
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=device.utilization, memory=device.memory_utilization)

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._device(handle, "nvmlDeviceGetTemperature").temperature

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetClockInfo(self, handle: _Handle, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return self._device(handle, "nvmlDeviceGetClockInfo").sm_clock_mhz

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetCurrentClocksEventReasons").clocks_event_reasons

    def nvmlDeviceGetTotalEccErrors(self, handle: _Handle, error_type: int, counter_type: int) -> int:
        assert (error_type, counter_type) == (self.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, self.NVML_VOLATILE_ECC)
        return self._device(handle, "nvmlDeviceGetTotalEccErrors").ecc_uncorrected

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        device = self._device(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_bytes) for p in device.compute_processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        device = self._device(handle, "nvmlDeviceGetGraphicsRunningProcesses")
        return [SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_bytes) for p in device.graphics_processes]

    # XID errors through NVML's event API

    def xid(self, index: int, code: int) -> None:
        """The driver reports XID ``code`` on GPU ``index`` (seen only if it is registered)."""
        if index in self.registered:
            self.pending.append((index, code))

    def nvmlEventSetCreate(self) -> str:
        self.event_sets += 1
        return "event-set"

    def nvmlEventSetFree(self, event_set: str) -> None:
        assert event_set == "event-set"
        self.event_sets -= 1

    def nvmlDeviceRegisterEvents(self, handle: _Handle, event_types: int, event_set: str) -> None:
        assert event_types == self.nvmlEventTypeXidCriticalError and event_set == "event-set"
        self._device(handle, "nvmlDeviceRegisterEvents")
        self.registered.add(handle._index)

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> SimpleNamespace:
        assert event_set == "event-set" and timeout_ms == 0
        if not self.pending:
            raise self.NVMLError("Timeout", self.NVML_ERROR_TIMEOUT)
        index, code = self.pending.pop(0)
        return SimpleNamespace(
            device=_Handle(index), eventType=self.nvmlEventTypeXidCriticalError, eventData=code, gpuInstanceId=0
        )
