"""GPUs of this host from NVML (the ``nvidia-ml-py`` binding, imported as pynvml).

``discover_gpus`` takes the NVML module as a parameter so that hosts without
the NVIDIA driver can exercise it with a double of the same functions.
"""

from __future__ import annotations

from types import ModuleType

import pynvml

from ...core.model import GPU

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


def as_text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def discover_gpus(node: str, cluster: str, nvml: ModuleType = pynvml) -> list[GPU]:
    """Every GPU NVML sees, in index order; NVMLUnavailable when NVML cannot start or read one."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise NVMLUnavailable(str(e)) from None
    index = 0
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            product = as_text(nvml.nvmlDeviceGetName(handle))
            gpus.append(
                GPU(
                    uuid=as_text(nvml.nvmlDeviceGetUUID(handle)),
                    index=index,
                    node=node,
                    cluster=cluster,
                    model=product,
                    memory_mib=nvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
                )
            )
        return gpus
    except nvml.NVMLError as e:
        raise NVMLUnavailable(f"NVML failed reading GPU {index}: {e}") from None
    finally:
        nvml.nvmlShutdown()
