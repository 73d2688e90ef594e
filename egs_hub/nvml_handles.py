"""NVML's handles and texts, read the same by the local backend (backends/local/nvml.py,
mig_partition.py) and the GPU metrics (metrics/nvml.py): each takes the NVML module (pynvml, or a
double of its functions) as a parameter."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType


def as_text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def mig_modes(nvml: ModuleType, handle) -> tuple[bool, bool] | None:
    """Whether MIG mode is on now and after a reset; None on a GPU without MIG (NVML answers
    NOT_SUPPORTED)."""
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError as e:
        if getattr(e, "value", None) == nvml.NVML_ERROR_NOT_SUPPORTED:
            return None
        raise
    return current == nvml.NVML_DEVICE_MIG_ENABLE, pending == nvml.NVML_DEVICE_MIG_ENABLE


def mig_enabled(nvml: ModuleType, handle) -> bool:
    """Whether the GPU is in MIG mode now."""
    modes = mig_modes(nvml, handle)
    return modes is not None and modes[0]


def mig_handles(nvml: ModuleType, handle) -> Iterator:
    """The handles of the MIG devices of a GPU in MIG mode, in index order (gaps skipped)."""
    for k in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            yield nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, k)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) == nvml.NVML_ERROR_NOT_FOUND:  # no instance at this index
                continue
            raise
