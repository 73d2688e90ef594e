"""GPUs from NVML: ``discover_gpus`` against a double of pynvml, ``gpu_model`` by table,
and the real pynvml on a host without the NVIDIA driver."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml
import pytest

from egs_hub.backends.local.nvml import NVMLUnavailable, discover_gpus, gpu_model

H100 = "NVIDIA H100 80GB HBM3"
H100_BYTES = 85520809984  # what nvmlDeviceGetMemoryInfo(...).total says on an H100 SXM 80GB
A100_40 = "NVIDIA A100-SXM4-40GB"
A100_40_BYTES = 42505273344


@dataclass(frozen=True)
class Device:
    """One GPU as NVML reports it."""

    name: str
    uuid: str
    total_bytes: int


def h100(i: int) -> Device:
    return Device(H100, f"GPU-4b0e6f7a-1c2d-3e4f-5a6b-7c8d9e0f1a{i:02d}", H100_BYTES)


def a100(i: int) -> Device:
    return Device(A100_40, f"GPU-9d8c7b6a-5f4e-3d2c-1b0a-0f1e2d3c4b{i:02d}", A100_40_BYTES)


class _Handle:
    """Opaque, like pynvml's c_nvmlDevice_t pointer: only the double can read it."""

    def __init__(self, index: int):
        self._index = index


@dataclass
class FakeNVML:
    """A double of the pynvml module (nvidia-ml-py): the functions ``discover_gpus`` calls.

    ``devices`` are what the driver sees, in index order. ``as_bytes`` answers names
    and UUIDs as bytes, as bindings before nvidia-ml-py 11.515 did. ``init_error`` makes
    nvmlInit fail with that message (no driver); ``fail_on`` names a device function
    that fails (a GPU fallen off the bus). ``inits``/``shutdowns`` count the calls.
    Tests change ``devices`` between calls to play GPUs appearing or vanishing.
    """

    devices: list[Device] = field(default_factory=list)
    as_bytes: bool = False
    init_error: str | None = None
    fail_on: str | None = None
    inits: int = 0
    shutdowns: int = 0

    class NVMLError(Exception):
        """pynvml raises subclasses of NVMLError whose str() is NVML's message."""

    def _check(self, function: str) -> None:
        if self.fail_on == function:
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
        self._check("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.devices):
            raise self.NVMLError("Invalid Argument")
        return _Handle(index)

    def _device(self, handle: _Handle) -> Device:
        return self.devices[handle._index]

    def nvmlDeviceGetName(self, handle: _Handle) -> str | bytes:
        self._check("nvmlDeviceGetName")
        return self._text(self._device(handle).name)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str | bytes:
        self._check("nvmlDeviceGetUUID")
        return self._text(self._device(handle).uuid)

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        self._check("nvmlDeviceGetMemoryInfo")
        total = self._device(handle).total_bytes
        return SimpleNamespace(total=total, free=total - 2**29, used=2**29)


# --- discover_gpus -------------------------------------------------------------------------


@dataclass(frozen=True)
class DiscoverCase:
    nvml: FakeNVML
    want: list[tuple[str, int, str, int]]  # (uuid, index, model, memory_mib) per GPU, in order


DISCOVER_CASES = {
    "no GPUs": DiscoverCase(FakeNVML(), want=[]),
    "four H100s, str answers": DiscoverCase(
        FakeNVML([h100(i) for i in range(4)]),
        want=[(h100(i).uuid, i, H100, 81559) for i in range(4)],
    ),
    "older bindings answer bytes": DiscoverCase(
        FakeNVML([h100(0), h100(1)], as_bytes=True),
        want=[(h100(0).uuid, 0, H100, 81559), (h100(1).uuid, 1, H100, 81559)],
    ),
    "mixed models keep NVML's index order": DiscoverCase(
        FakeNVML([a100(0), h100(0), a100(1)]),
        want=[
            (a100(0).uuid, 0, A100_40, 40536),
            (h100(0).uuid, 1, H100, 81559),
            (a100(1).uuid, 2, A100_40, 40536),
        ],
    ),
}


@pytest.mark.parametrize("case", DISCOVER_CASES.values(), ids=DISCOVER_CASES.keys())
def test_discover_gpus(case: DiscoverCase):
    gpus = discover_gpus("gpu-host", "local", nvml=case.nvml)

    assert [(g.uuid, g.index, g.model, g.memory_mib) for g in gpus] == case.want
    assert all(isinstance(g.uuid, str) and isinstance(g.model, str) for g in gpus)
    assert {(g.node, g.cluster, g.declared, g.healthy) for g in gpus} <= {("gpu-host", "local", False, True)}
    assert (case.nvml.inits, case.nvml.shutdowns) == (1, 1)


def test_nvml_init_failing_is_nvml_unavailable_with_nvml_message():
    nvml = FakeNVML([h100(0)], init_error="Driver Not Loaded")

    with pytest.raises(NVMLUnavailable, match=r"^Driver Not Loaded$"):
        discover_gpus("gpu-host", "local", nvml=nvml)
    assert nvml.shutdowns == 0  # NVML must not be shut down when it did not start


@pytest.mark.parametrize(
    "function",
    [
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetMemoryInfo",
    ],
)
def test_a_failing_device_query_is_nvml_unavailable_and_shuts_nvml_down(function: str):
    nvml = FakeNVML([h100(0), h100(1)], fail_on=function)

    with pytest.raises(NVMLUnavailable, match="NVML failed reading GPU 0: GPU is lost"):
        discover_gpus("gpu-host", "local", nvml=nvml)
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_real_pynvml_on_this_host():
    """The real binding. Without the NVIDIA driver (this development host, CI) NVML cannot
    start and discover_gpus says so as NVMLUnavailable; on a GPU host it lists real GPUs."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        driver_error = str(e)
    else:
        driver_error = None
        pynvml.nvmlShutdown()

    if driver_error is not None:
        with pytest.raises(NVMLUnavailable, match=re.escape(driver_error)):
            discover_gpus("gpu-host", "local")
        return
    gpus = discover_gpus("gpu-host", "local")
    assert gpus, "NVML started but found no GPU"
    assert [g.index for g in gpus] == list(range(len(gpus)))
    assert all(g.uuid.startswith("GPU-") and g.memory_mib > 1024 and g.model for g in gpus)


# --- gpu_model -----------------------------------------------------------------------------

GPU_MODEL_CASES = {
    "H100 SXM": ("NVIDIA H100 80GB HBM3", "H100"),
    "H100 PCIe": ("NVIDIA H100 PCIe", "H100"),
    "A100 with form factor suffix": ("NVIDIA A100-SXM4-40GB", "A100"),
    "Tesla branding": ("Tesla V100-SXM2-16GB", "V100"),
    "GeForce RTX": ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    "workstation RTX": ("NVIDIA RTX A6000", "RTX-A6000"),
    "Quadro RTX": ("Quadro RTX 8000", "RTX-8000"),
    "L4": ("NVIDIA L4", "L4"),
    "surrounding spaces": ("  NVIDIA L40S  ", "L40S"),
    "only vendor words": ("NVIDIA", "NVIDIA"),
    "empty": ("", "GPU"),
}


@pytest.mark.parametrize(("product", "want"), GPU_MODEL_CASES.values(), ids=GPU_MODEL_CASES.keys())
def test_gpu_model(product: str, want: str):
    assert gpu_model(product) == want
