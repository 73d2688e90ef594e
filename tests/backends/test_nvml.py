"""GPUs from NVML: ``discover_gpus`` against a double of pynvml, ``gpu_model`` by table,
and the real pynvml on a host without the NVIDIA driver."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pynvml
import pytest

from egs_hub.backends.local.nvml import NVMLUnavailable, discover_gpus, gpu_model

from ..nvml_double import A100_40, H100, FakeNVML, a100, h100

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
