"""A test double of the pynvml module (nvidia-ml-py): the functions egs-hub calls, answering
from plain data the way NVML does on a real host.

It stands in for the NVIDIA driver in CI; tests/backends/test_nvml.py and
tests/metrics/test_nvml_source.py also run the real binding, which on a GPU host
(the device tool) reads real GPUs.

MIG re-partitioning (backends/local/mig_partition.py) follows NVML's documentation of
nvmlDeviceSetMigMode and the GPU/compute instance calls, on an H100 80GB's profiles
(``H100_PROFILES``, as ``nvidia-smi mig -lgip`` lists them):

- nvmlDeviceSetMigMode needs root (``permitted``, else NVML_ERROR_NO_PERMISSION); where the
  GPU cannot be reset at once (a process runs on it, or it is in ``needs_reset``) the new mode
  is left pending and activationStatus is NVML_ERROR_IN_USE; nvmlDeviceGetMigMode then answers
  [current, pending]. Turning MIG mode off destroys the GPU's instances.
- GPU instance profiles are enumerated by NVML_GPU_INSTANCE_PROFILE_* and created by the id
  their info reports (19 for a 1g.10gb), two numberings as on a GPU; the profile info carries the
  name ("MIG 1g.10gb") unless ``unnamed_profiles`` (drivers before the named V call). Profile and
  placement queries are answered only in MIG mode (NVML_ERROR_NOT_SUPPORTED otherwise: the stricter
  reading).
- A GPU instance occupies a placement: ``size`` memory slices (of 8) from ``start``. The possible
  placements of each profile (``MigProfile.starts`` and ``size``) are NVIDIA's documented H100 80GB
  ones (as ``nvidia-smi mig -lgipp`` lists them) as far as known, written from memory, not read on
  a GPU: 7g.80gb at 0 size 8; 4g.40gb at 0 size 4; 3g.40gb at 0 and 4 size 4; 2g.20gb at 0, 2, 4
  size 2; 1g.10gb and 1g.10gb+me at 0 to 6 size 1; 1g.20gb at 0, 2, 4, 6 size 2; a 1g.10gb+me at
  most once. nvmlDeviceGetGpuInstancePossiblePlacements (pynvml calls the _v2 C function) sets
  the count when given no array (None: NULL), else fills the caller's array of
  c_nvmlGpuInstancePlacement_t, NVML_ERROR_INSUFFICIENT_SIZE where the count in says it is too
  small. nvmlDeviceCreateGpuInstanceWithPlacement takes a pointer to a placement (the C call's
  ``const nvmlGpuInstancePlacement_t *``): NVML_ERROR_INVALID_ARGUMENT for one not possible for the
  profile, NVML_ERROR_INSUFFICIENT_RESOURCES where it overlaps a GPU instance's placement or the
  profile has all its instances.
- A GPU instance holds one compute instance, of the profile spanning it (the only compute profile
  the double offers), which is its MIG device. Destroying a compute instance with a process, or a
  GPU instance with a compute instance, answers NVML_ERROR_IN_USE. Creating and destroying need
  root too.
- nvmlDeviceGetGpuInstances and nvmlGpuInstanceGetComputeInstances fill a ctypes array the caller
  sizes (``c_nvmlGpuInstance_t`` is a py_object here, a pointer in pynvml) and set the count.
"""

from __future__ import annotations

import ctypes
import dataclasses
import re
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
    mig_pending: bool | None = None  # MIG mode after the next GPU reset, where a change waits for one
    gpu_instances_without_ci: tuple[GpuInstance, ...] = ()  # GPU instances with no compute instance
    placement: int | None = None  # a MIG device's GPU instance's first memory slice


@dataclass(frozen=True)
class GpuInstance:
    """A GPU instance of a GPU: its id, profile name and placement (first memory slice)."""

    id: int
    profile: str
    placement: int


@dataclass(frozen=True)
class MigProfile:
    """A GPU instance profile: its NVML_GPU_INSTANCE_PROFILE_* ``enum``, the ``id`` the GPU reports
    and creates it by, compute slices, memory, how many fit, and its possible placements: ``size``
    memory slices (of 8) from one of ``starts``."""

    name: str
    enum: int
    id: int
    slices: int
    memory_mib: int
    instance_count: int
    size: int
    starts: tuple[int, ...]


H100_PROFILES = (
    MigProfile("1g.10gb", 0x0, 19, 1, 9856, 7, 1, (0, 1, 2, 3, 4, 5, 6)),
    MigProfile("2g.20gb", 0x1, 14, 2, 20096, 3, 2, (0, 2, 4)),
    MigProfile("3g.40gb", 0x2, 9, 3, 40192, 2, 4, (0, 4)),
    MigProfile("4g.40gb", 0x3, 5, 4, 40192, 1, 4, (0,)),
    MigProfile("7g.80gb", 0x4, 0, 7, 80896, 1, 8, (0,)),
    MigProfile("1g.10gb+me", 0x7, 20, 1, 9856, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    MigProfile("1g.20gb", 0x9, 15, 1, 20096, 4, 2, (0, 2, 4, 6)),
)
_COMPUTE_PROFILE_BY_SLICES = {1: 0x0, 2: 0x1, 3: 0x2, 4: 0x3, 7: 0x4}  # NVML_COMPUTE_INSTANCE_PROFILE_*
_MIG_NAME = re.compile(r" MIG (\S+)$")


def _place(profiles: list[MigProfile], used: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
    """Starts for ``profiles`` side by side (the first that fits, trying each start), None if none."""
    if not profiles:
        return ()
    first, rest = profiles[0], profiles[1:]
    for start in first.starts:
        slices = frozenset(range(start, start + first.size))
        if not slices & used:
            tail = _place(rest, used | slices)
            if tail is not None:
                return (start, *tail)
    return None


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
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"; a 1g.10gb has 9,856 MiB), placed side by side."""
    profiles = {p.name: p for p in H100_PROFILES}
    placements = _place([profiles[name] for name in layout])
    assert placements is not None, f"an H100 cannot hold {layout}"
    devices = tuple(
        Device(
            f"{H100} MIG {profile}",
            f"MIG-7c1d2e3f-4a5b-5c6d-8e9f-{i:02d}{k:02d}00000000",
            _MIG_BYTES[profile],
            gpu_instance_id=GPU_INSTANCE_IDS[k],
            placement=placements[k],
        )
        for k, profile in enumerate(layout)
    )
    return Device(H100, h100(i).uuid, H100_BYTES, mig_enabled=True, mig_devices=devices, **readings)


_MIG_BYTES = {p.name: p.memory_mib * 2**20 for p in H100_PROFILES}
MAX_MIG_DEVICES = 7  # nvmlDeviceGetMaxMigDeviceCount on an H100 in MIG mode
# The GPU instance ids of a GPU's MIG devices in index order: other numbers than the indexes, as on a GPU.
GPU_INSTANCE_IDS = (7, 8, 9, 10, 11, 12, 13)


class _Placement(ctypes.Structure):
    """pynvml's c_nvmlGpuInstancePlacement_t."""

    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


class _Handle:
    """Opaque, like pynvml's c_nvmlDevice_t pointer: only the double can read it. ``mig``: the
    index of a MIG device of GPU ``index`` (a MIG device handle)."""

    def __init__(self, index: int, mig: int | None = None):
        self._index = index
        self._mig = mig


class _InstanceHandle:
    """Opaque, like pynvml's c_nvmlGpuInstance_t and c_nvmlComputeInstance_t: GPU instance ``gi`` of
    GPU ``index`` (its compute instance when ``compute``)."""

    def __init__(self, index: int, gi: int, compute: bool = False):
        self._index = index
        self._gi = gi
        self._compute = compute


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
    GPUs are registered on, drained with nvmlEventSetWait_v2). MIG changes (module
    docstring): ``permitted`` False plays a process without root, ``needs_reset`` the GPUs
    whose MIG mode change waits for a reset, ``unnamed_profiles`` a driver that names no profile.
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
    permitted: bool = True
    needs_reset: set[int] = field(default_factory=set)
    unnamed_profiles: bool = False

    NVML_SUCCESS = 0
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_INSUFFICIENT_SIZE = 7
    NVML_ERROR_IN_USE = 19
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23
    NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12
    NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0
    c_nvmlGpuInstance_t = ctypes.py_object
    c_nvmlComputeInstance_t = ctypes.py_object
    c_nvmlGpuInstancePlacement_t = _Placement
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
        pending = device.mig_enabled if device.mig_pending is None else device.mig_pending
        return [self._mode(device.mig_enabled), self._mode(pending)]

    def _mode(self, enabled: bool) -> int:
        return self.NVML_DEVICE_MIG_ENABLE if enabled else self.NVML_DEVICE_MIG_DISABLE

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

    # MIG re-partitioning (the module docstring says which NVML behaviour it follows)

    def nvmlErrorString(self, result: int) -> str:
        names = {self.NVML_SUCCESS: "Success", self.NVML_ERROR_IN_USE: "In use by another client"}
        return names.get(result, f"NVML error {result}")

    def _permit(self, function: str, index: int) -> None:
        self._check(function, index)
        if not self.permitted:
            raise self.NVMLError("Insufficient Permissions", self.NVML_ERROR_NO_PERMISSION)

    def _replace(self, index: int, **changes) -> None:
        self.devices[index] = dataclasses.replace(self.devices[index], **changes)

    def nvmlDeviceSetMigMode(self, handle: _Handle, mode: int) -> int:
        """Set MIG mode; the activation status: NVML_SUCCESS, or NVML_ERROR_IN_USE where the GPU
        cannot be reset now (the mode is then pending)."""
        device = self._device(handle, "nvmlDeviceSetMigMode")
        if device.mig_enabled is None or handle._mig is not None:
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        self._permit("nvmlDeviceSetMigMode", handle._index)
        enable = mode == self.NVML_DEVICE_MIG_ENABLE
        if enable == device.mig_enabled:
            self._replace(handle._index, mig_pending=None)
            return self.NVML_SUCCESS
        if handle._index in self.needs_reset or device.compute_processes:
            self._replace(handle._index, mig_pending=enable)
            return self.NVML_ERROR_IN_USE
        self._replace(handle._index, mig_enabled=enable, mig_pending=None, mig_devices=(), gpu_instances_without_ci=())
        return self.NVML_SUCCESS

    def _profiles(self, handle: _Handle, function: str) -> tuple[MigProfile, ...]:
        """The GPU's MIG profiles; NVML_ERROR_NOT_SUPPORTED unless it is an H100 in MIG mode."""
        device = self._device(handle, function)
        if not device.mig_enabled or handle._mig is not None or device.name != H100:
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        return H100_PROFILES

    def _profile_by_id(self, handle: _Handle, profile_id: int, function: str) -> MigProfile:
        found = [p for p in self._profiles(handle, function) if p.id == profile_id]
        if not found:
            raise self.NVMLError("Invalid Argument", self.NVML_ERROR_INVALID_ARGUMENT)
        return found[0]

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: _Handle, profile: int, version: int = 2) -> SimpleNamespace:
        """A profile's info by its NVML_GPU_INSTANCE_PROFILE_* enum (pynvml's default, version 2, is
        nvmlDeviceGetGpuInstanceProfileInfoV)."""
        if not 0 <= profile < self.NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise self.NVMLError("Invalid Argument", self.NVML_ERROR_INVALID_ARGUMENT)
        found = [p for p in self._profiles(handle, "nvmlDeviceGetGpuInstanceProfileInfo") if p.enum == profile]
        if not found:
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        p = found[0]
        name = b"" if self.unnamed_profiles else f"MIG {p.name}".encode()
        return SimpleNamespace(
            id=p.id, sliceCount=p.slices, instanceCount=p.instance_count, memorySizeMB=p.memory_mib, name=name
        )

    def _gpu_instances(self, index: int) -> list[GpuInstance]:
        """The GPU's GPU instances: those of its MIG devices, and those without a compute instance."""
        device = self.devices[index]
        with_ci = [
            GpuInstance(m.gpu_instance_id, _MIG_NAME.search(m.name)[1], m.placement)
            for m in device.mig_devices
            if m is not None and _MIG_NAME.search(m.name)
        ]
        return with_ci + list(device.gpu_instances_without_ci)

    def _fill(self, array, count, handles: list) -> None:
        """Write ``handles`` into the caller's array and their number into ``count`` (a ctypes pointer)."""
        if count.contents.value < len(handles):
            count.contents.value = len(handles)
            raise self.NVMLError("Insufficient Size", self.NVML_ERROR_INSUFFICIENT_SIZE)
        for k, found in enumerate(handles):
            array[k] = found
        count.contents.value = len(handles)

    def nvmlDeviceGetGpuInstances(self, handle: _Handle, profile_id: int, array, count) -> int:
        profile = self._profile_by_id(handle, profile_id, "nvmlDeviceGetGpuInstances")
        found = [gi for gi in self._gpu_instances(handle._index) if gi.profile == profile.name]
        self._fill(array, count, [_InstanceHandle(handle._index, gi.id) for gi in found])
        return self.NVML_SUCCESS

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle: _Handle, profile_id: int, placements, count) -> int:
        """The profile's possible placements into the caller's array (None: only their number into ``count``)."""
        profile = self._profile_by_id(handle, profile_id, "nvmlDeviceGetGpuInstancePossiblePlacements")
        possible = [_Placement(start, profile.size) for start in profile.starts]
        if placements is None:
            count.contents.value = len(possible)
        else:
            self._fill(placements, count, possible)
        return self.NVML_SUCCESS

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle: _Handle, profile_id: int, placement) -> _InstanceHandle:
        """A new GPU instance at ``placement`` (a pointer to a c_nvmlGpuInstancePlacement_t)."""
        assert isinstance(placement, ctypes.POINTER(_Placement)), "NVML takes a pointer to the placement"
        profile = self._profile_by_id(handle, profile_id, "nvmlDeviceCreateGpuInstanceWithPlacement")
        self._permit("nvmlDeviceCreateGpuInstanceWithPlacement", handle._index)
        start, size = placement.contents.start, placement.contents.size
        if size != profile.size or start not in profile.starts:
            raise self.NVMLError("Invalid Argument", self.NVML_ERROR_INVALID_ARGUMENT)
        present = self._gpu_instances(handle._index)
        sizes = {p.name: p.size for p in H100_PROFILES}
        used = {s for gi in present for s in range(gi.placement, gi.placement + sizes[gi.profile])}
        taken = sum(gi.profile == profile.name for gi in present)
        if used & set(range(start, start + size)) or taken >= profile.instance_count:
            raise self.NVMLError("Insufficient Resources", self.NVML_ERROR_INSUFFICIENT_RESOURCES)
        new = GpuInstance(min(set(range(1, 15)) - {gi.id for gi in present}), profile.name, start)
        device = self.devices[handle._index]
        self._replace(handle._index, gpu_instances_without_ci=(*device.gpu_instances_without_ci, new))
        return _InstanceHandle(handle._index, new.id)

    def _instance(self, handle: _InstanceHandle, function: str) -> GpuInstance:
        self._check(function, handle._index)
        found = [gi for gi in self._gpu_instances(handle._index) if gi.id == handle._gi]
        if not found:  # destroyed: its handle is no longer valid
            raise self.NVMLError("Invalid Argument", self.NVML_ERROR_INVALID_ARGUMENT)
        return found[0]

    def _mig_device(self, handle: _InstanceHandle) -> Device | None:
        """The MIG device of a GPU instance (its compute instance), None if it has none."""
        devices = self.devices[handle._index].mig_devices
        return next((m for m in devices if m is not None and m.gpu_instance_id == handle._gi), None)

    def nvmlGpuInstanceDestroy(self, handle: _InstanceHandle) -> int:
        gi = self._instance(handle, "nvmlGpuInstanceDestroy")
        self._permit("nvmlGpuInstanceDestroy", handle._index)
        if self._mig_device(handle) is not None:
            raise self.NVMLError("In use by another client", self.NVML_ERROR_IN_USE)
        device = self.devices[handle._index]
        self._replace(
            handle._index, gpu_instances_without_ci=tuple(g for g in device.gpu_instances_without_ci if g != gi)
        )
        return self.NVML_SUCCESS

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, handle: _InstanceHandle, profile: int, eng_profile: int, version: int = 2
    ) -> SimpleNamespace:
        """The compute profile spanning the GPU instance; NVML_ERROR_NOT_SUPPORTED for any other."""
        gi = self._instance(handle, "nvmlGpuInstanceGetComputeInstanceProfileInfo")
        slices = next(p.slices for p in H100_PROFILES if p.name == gi.profile)
        if (
            eng_profile != self.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
            or profile != _COMPUTE_PROFILE_BY_SLICES[slices]
        ):
            raise self.NVMLError("Not Supported", self.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(id=profile, sliceCount=slices, instanceCount=1)

    def nvmlGpuInstanceGetComputeInstances(self, handle: _InstanceHandle, profile_id: int, array, count) -> int:
        self.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            handle, profile_id, self.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        )
        found = [_InstanceHandle(handle._index, handle._gi, compute=True)] if self._mig_device(handle) else []
        self._fill(array, count, found)
        return self.NVML_SUCCESS

    def nvmlGpuInstanceCreateComputeInstance(self, handle: _InstanceHandle, profile_id: int) -> _InstanceHandle:
        """The compute instance over the whole GPU instance: a new MIG device."""
        info = self.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            handle, profile_id, self.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        )
        gi = self._instance(handle, "nvmlGpuInstanceCreateComputeInstance")
        self._permit("nvmlGpuInstanceCreateComputeInstance", handle._index)
        if self._mig_device(handle) is not None or info.instanceCount < 1:
            raise self.NVMLError("Insufficient Resources", self.NVML_ERROR_INSUFFICIENT_RESOURCES)
        device = self.devices[handle._index]
        mig = Device(
            f"{device.name} MIG {gi.profile}",
            f"MIG-a1b2c3d4-5e6f-4a7b-8c9d-{handle._index:02d}{gi.id:02d}00000000",
            _MIG_BYTES[gi.profile],
            gpu_instance_id=gi.id,
            placement=gi.placement,
        )
        self._replace(
            handle._index,
            mig_devices=(*device.mig_devices, mig),
            gpu_instances_without_ci=tuple(g for g in device.gpu_instances_without_ci if g != gi),
        )
        return _InstanceHandle(handle._index, gi.id, compute=True)

    def nvmlComputeInstanceDestroy(self, handle: _InstanceHandle) -> int:
        gi = self._instance(handle, "nvmlComputeInstanceDestroy")
        mig = self._mig_device(handle)
        if not handle._compute or mig is None:
            raise self.NVMLError("Invalid Argument", self.NVML_ERROR_INVALID_ARGUMENT)
        self._permit("nvmlComputeInstanceDestroy", handle._index)
        if mig.compute_processes:
            raise self.NVMLError("In use by another client", self.NVML_ERROR_IN_USE)
        device = self.devices[handle._index]
        self._replace(
            handle._index,
            mig_devices=tuple(m for m in device.mig_devices if m is not mig),
            gpu_instances_without_ci=(*device.gpu_instances_without_ci, gi),
        )
        return self.NVML_SUCCESS

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
