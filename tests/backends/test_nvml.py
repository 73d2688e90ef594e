"""GPUs from NVML: ``discover_gpus`` against a double of pynvml, ``gpu_model`` by table,
and the real pynvml on a host without the NVIDIA driver."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pynvml
import pytest

from egs_hub.backends.local.nvml import NVMLUnavailable, discover_gpus, discover_units, gpu_model, mig_profile

from ..nvml_double import A100_40, H100, Device, FakeNVML, a100, h100, h100_mig

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
    start and discover_gpus says so as NVMLUnavailable; on a GPU host it lists real GPUs (on the
    device tool's H100 with MIG off, 2026-11-27: one unit, GPU-ce457ed6-..., 81,559 MiB, no profile)."""
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
    assert all(g.uuid.startswith(("GPU-", "MIG-")) and g.memory_mib > 1024 and g.model for g in gpus)
    assert all((g.profile is None) == g.uuid.startswith("GPU-") for g in gpus)


# --- MIG instances -------------------------------------------------------------------------


def test_a_gpu_in_mig_mode_is_found_as_its_instances_in_index_order():
    mig = h100_mig(1, layout=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    nvml = FakeNVML([h100(0), mig, h100(2)])
    units = discover_units("gpu-host", "local", nvml=nvml)

    assert [(u.gpu.uuid, u.gpu.index, u.gpu.profile, u.gpu.parent) for u in units] == [
        (h100(0).uuid, 0, None, None),
        *((d.uuid, 1 + k, p, mig.uuid) for k, (d, p) in enumerate(zip(mig.mig_devices, mig_layout(mig), strict=True))),
        (h100(2).uuid, 5, None, None),
    ]
    assert [u.gpu.memory_mib for u in units[1:5]] == [40192, 20096, 9856, 9856]
    assert [u.gpu_instance for u in units] == [None, 7, 8, 9, 10, None]  # DCGM's GPU_I_ID
    assert {u.gpu_memory_mib for u in units} == {81559}  # the whole GPU's, for the shape
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def mig_layout(device: Device) -> list[str]:
    return [d.name.rsplit(" ", 1)[1] for d in device.mig_devices]


def test_gaps_in_the_mig_device_indexes_are_skipped_and_mig_off_or_unsupported_is_a_whole_gpu():
    with_gap = h100_mig(0, layout=("1g.10gb", "1g.10gb"))
    with_gap = Device(**{**with_gap.__dict__, "mig_devices": (with_gap.mig_devices[0], None, with_gap.mig_devices[1])})
    mig_off = h100(1)
    no_mig = Device("NVIDIA GeForce RTX 4090", "GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9", 25757220864)
    gpus = discover_gpus("gpu-host", "local", nvml=FakeNVML([with_gap, mig_off, no_mig]))

    assert [(g.uuid, g.index, g.profile) for g in gpus] == [
        (with_gap.mig_devices[0].uuid, 0, "1g.10gb"),
        (with_gap.mig_devices[2].uuid, 1, "1g.10gb"),
        (mig_off.uuid, 2, None),
        (no_mig.uuid, 3, None),
    ]


def test_a_gpu_in_mig_mode_with_no_instance_offers_nothing():
    empty = Device(**{**h100(0).__dict__, "mig_enabled": True})
    assert discover_gpus("gpu-host", "local", nvml=FakeNVML([empty, h100(1)])) == discover_gpus(
        "gpu-host", "local", nvml=FakeNVML([h100(1)])
    )


def test_a_mig_device_without_a_profile_in_its_name_is_left_out_with_a_warning(caplog):
    mig = h100_mig(0, layout=("1g.10gb", "1g.10gb"))
    odd = Device(**{**mig.mig_devices[1].__dict__, "name": "NVIDIA H100 80GB HBM3"})
    mig = Device(**{**mig.__dict__, "mig_devices": (mig.mig_devices[0], odd)})
    gpus = discover_gpus("gpu-host", "local", nvml=FakeNVML([mig]))

    assert [g.uuid for g in gpus] == [mig.mig_devices[0].uuid]
    assert f"MIG device {odd.uuid} of GPU {mig.uuid}: no profile in its name" in caplog.text


@pytest.mark.parametrize(
    "function", ["nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex"]
)
def test_a_failing_mig_query_is_nvml_unavailable(function: str):
    nvml = FakeNVML([h100_mig(0)], fail_on=function)
    with pytest.raises(NVMLUnavailable, match="NVML failed reading GPU 0: GPU is lost"):
        discover_gpus("gpu-host", "local", nvml=nvml)
    assert nvml.shutdowns == 1


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb+me", "1g.5gb+me"),
        ("NVIDIA H100 80GB HBM3", None),
        ("NVIDIA H100 MIG whole", None),
    ],
)
def test_mig_profile_from_the_mig_device_name(name: str, want: str | None):
    assert mig_profile(name) == want


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
