"""GPUs of this host from NVML (the ``nvidia-ml-py`` binding, imported as pynvml).

``discover_gpus`` takes the NVML module as a parameter so that hosts without
the NVIDIA driver can exercise it with a double of the same functions. A GPU in
MIG mode is found as its MIG instances (core/sharing.py), read with
nvmlDeviceGetMigMode, nvmlDeviceGetMaxMigDeviceCount and
nvmlDeviceGetMigDeviceHandleByIndex; an instance's profile is in its name.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from types import ModuleType

import pynvml

from ...core.model import GPU
from ...core.sharing import MIG_PROFILE
from ...nvml_handles import as_text, mig_enabled, mig_handles

log = logging.getLogger(__name__)
_MIG_NAME = re.compile(r"\bMIG\s+(\S+)")

_VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro"}


class NVMLUnavailable(Exception):
    """No NVIDIA driver or library here; the message is NVML's own."""


def gpu_model(product: str) -> str:
    """A short model name: "NVIDIA H100 80GB HBM3" -> "H100", "NVIDIA GeForce RTX 4090" -> "RTX-4090"."""
    words = [w for w in product.split() if w.lower() not in _VENDOR_WORDS]
    if not words:
        return product.strip() or "GPU"
    if words[0].upper() in {"RTX", "GTX"} and len(words) > 1:
        return f"{words[0].upper()}-{words[1]}"
    return words[0].split("-")[0]


@dataclass(frozen=True)
class Unit:
    """A unit NVML found: a whole GPU, or a MIG instance (``gpu.parent`` and ``gpu.profile`` set);
    ``gpu_memory_mib`` is the whole GPU's memory (the instance's parent's); ``gpu_instance`` is a MIG
    instance's GPU instance id (``nvmlDeviceGetGpuInstanceId``, by which the DCGM exporter names it:
    ``GPU_I_ID``), None for a whole GPU or where NVML cannot tell."""

    gpu: GPU
    gpu_memory_mib: int
    gpu_instance: int | None = None


def discover_gpus(node: str, cluster: str, nvml: ModuleType = pynvml) -> list[GPU]:
    """Every unit NVML sees (``discover_units``)."""
    return [unit.gpu for unit in discover_units(node, cluster, nvml)]


def discover_units(node: str, cluster: str, nvml: ModuleType = pynvml) -> list[Unit]:
    """Every GPU NVML sees, in index order, a GPU in MIG mode as its MIG instances (in their
    index order; a GPU in MIG mode with none has no unit); NVMLUnavailable when NVML cannot
    start or read one."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise NVMLUnavailable(str(e)) from None
    index = 0
    try:
        units: list[Unit] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            product = as_text(nvml.nvmlDeviceGetName(handle))
            uuid = as_text(nvml.nvmlDeviceGetUUID(handle))
            memory_mib = nvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
            if mig_enabled(nvml, handle):
                units.extend(_instances(nvml, handle, uuid, memory_mib, node, cluster, len(units)))
            else:
                units.append(Unit(GPU(uuid, len(units), node, cluster, product, memory_mib), memory_mib))
        return units
    except nvml.NVMLError as e:
        raise NVMLUnavailable(f"NVML failed reading GPU {index}: {e}") from None
    finally:
        nvml.nvmlShutdown()


def mig_profile(name: str) -> str | None:
    """The profile in a MIG device's name, "NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb"."""
    found = _MIG_NAME.search(name)
    return found[1].lower() if found and MIG_PROFILE.fullmatch(found[1].lower()) else None


def _instances(nvml: ModuleType, handle, parent: str, memory_mib: int, node: str, cluster: str, first: int):
    """The MIG instances of the GPU ``parent``, numbered from ``first``; one whose name has no
    profile is left out, with a warning."""
    units = []
    for mig in mig_handles(nvml, handle):
        name = as_text(nvml.nvmlDeviceGetName(mig))
        uuid = as_text(nvml.nvmlDeviceGetUUID(mig))
        profile = mig_profile(name)
        if profile is None:
            log.warning("MIG device %s of GPU %s: no profile in its name %r; left out", uuid, parent, name)
            continue
        instance_mib = nvml.nvmlDeviceGetMemoryInfo(mig).total // 2**20
        gpu = GPU(uuid, first + len(units), node, cluster, name, instance_mib, parent=parent, profile=profile)
        units.append(Unit(gpu, memory_mib, _gpu_instance(nvml, mig)))
    return units


def _gpu_instance(nvml: ModuleType, mig) -> int | None:
    """The MIG device's GPU instance id; None where NVML does not support asking."""
    try:
        return int(nvml.nvmlDeviceGetGpuInstanceId(mig))
    except nvml.NVMLError as e:
        if getattr(e, "value", None) == nvml.NVML_ERROR_NOT_SUPPORTED:
            return None
        raise
