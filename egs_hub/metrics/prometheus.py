"""GPU telemetry from the NVIDIA DCGM exporter, read through the Prometheus HTTP API.

Vocabulary: the *exporter* is dcgm-exporter, one per node, publishing one
*series* per GPU and *field* (``DCGM_FI_DEV_GPU_UTIL{UUID="GPU-...",gpu="0",
Hostname="node-1",...}``); *Prometheus* scrapes it and answers an *instant
query* with the latest value of every series, each with its *timestamp*. The
*selector* is extra label matchers (``job="dcgm"``) that pick this cluster's
exporters out of everything Prometheus scrapes.

One sample is built per ``UUID`` label from one instant query. Fields map as
in ``FIELDS``; memory total is FB_USED + FB_FREE (+ FB_RESERVED where the
exporter publishes it). DCGM cannot list processes, so ``processes`` stays
None; the pod a GPU is assigned to comes from the exporter's ``pod`` and
``namespace`` labels (Kubernetes only).

A sample's UUID is the inventory's id of the GPU its series are about (core/gpu_names.py):
this host's GPUs by their own UUIDs, a MIG instance's series (its GPU's ``UUID`` and its GPU
instance id ``GPU_I_ID``, and ``GPU_I_PROFILE``) by the instance NVML found with that id, and a
Kubernetes node's GPUs and instances, which the inventory names without UUIDs, by the node
(``Hostname``), index and the pod's namespace; a series no inventory GPU is known to be is left
out. DCGM has no ``DCGM_FI_DEV_GPU_UTIL`` for an instance: its utilization is
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a ratio, times 100), which also stands in for a whole GPU
without ``DCGM_FI_DEV_GPU_UTIL``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ..core.gpu_names import Naming, Series, names
from ..core.samples import GpuSample
from . import MetricsUnavailable

# DCGM field -> GpuSample attribute. FB_FREE and FB_RESERVED only add up to memory_total_mib.
FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "utilization",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "memory_utilization",
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_FB_FREE": None,
    "DCGM_FI_DEV_FB_RESERVED": None,
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_errors",
}
INTEGER_FIELDS = {"xid", "ecc_errors"}
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # the graphics engine's busy ratio: a MIG instance's utilization


def make_query(selector: str = "") -> str:
    """The one instant query that fetches every field of every GPU the selector picks."""
    matchers = [f'__name__=~"{"|".join([*FIELDS, ENGINE_ACTIVE])}"']
    if selector.strip():
        matchers.append(selector.strip().strip(","))
    return "{" + ",".join(matchers) + "}"


def samples_from_query(result_json: Any, naming: Naming | None = None) -> list[GpuSample]:
    """GPU samples from a decoded ``/api/v1/query`` answer, one per inventory GPU its series name
    (``naming``: core/gpu_names.py), ordered by node, index, UUID.

    Series without a UUID, with a GPU instance id that is no number, that name no inventory GPU or of
    other metrics are ignored; a NaN or
    infinite value is no reading. Raises ValueError when the answer is not a successful instant
    vector.
    """
    if not isinstance(result_json, dict):
        raise ValueError(f"expected a JSON object, got {type(result_json).__name__}")
    if result_json.get("status") != "success":
        error = result_json.get("error") or "no error message"
        raise ValueError(f"Prometheus status {result_json.get('status')!r} ({result_json.get('errorType')}): {error}")
    data = result_json.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise ValueError("expected data.resultType 'vector' with a data.result list")

    gpus: dict[tuple[str, str | None], dict[str, Any]] = {}  # (UUID, GPU_I_ID) -> {"labels", "time", field: value}
    for series in data["result"]:
        try:
            labels, pair = series["metric"], series["value"]
            if not isinstance(labels, dict) or not isinstance(pair, list) or len(pair) != 2:
                raise TypeError("expected a metric object and a [time, value] pair")
            name, uuid = labels.get("__name__"), labels.get("UUID")
            timestamp, value = float(pair[0]), float(pair[1])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed series {series!r}: {e}") from e
        instance = labels.get("GPU_I_ID") or None
        if not uuid or name not in (*FIELDS, ENGINE_ACTIVE) or (instance is not None and not instance.isdigit()):
            continue
        gpu = gpus.setdefault((uuid, instance), {"labels": labels, "time": timestamp})
        gpu["time"] = max(gpu["time"], timestamp)
        if math.isfinite(value):
            gpu[name] = value
    found = list(gpus.values())
    named = names([series_of(gpu["labels"]) for gpu in found], naming or Naming())
    samples = (make_sample(uuid, gpu) for uuid, gpu in zip(named, found, strict=True) if uuid is not None)
    return sorted(samples, key=sample_key)


def series_of(labels: dict[str, str]) -> Series:
    """What the exporter's labels say a series is of (core/gpu_names.py)."""
    index, instance = labels.get("gpu", ""), labels.get("GPU_I_ID", "")
    return Series(
        uuid=labels["UUID"],
        node=labels.get("Hostname") or None,
        index=int(index) if index.isdigit() else None,
        gpu_instance=int(instance) if instance else None,
        profile=labels.get("GPU_I_PROFILE") or None,
        namespace=labels.get("namespace") or None,
    )


def make_sample(uuid: str, gpu: dict[str, Any]) -> GpuSample:
    labels = gpu["labels"]
    readings: dict[str, float | int] = {}
    for field, attribute in FIELDS.items():
        if attribute and field in gpu:
            readings[attribute] = int(gpu[field]) if attribute in INTEGER_FIELDS else gpu[field]
    if "utilization" not in readings and ENGINE_ACTIVE in gpu:
        readings["utilization"] = 100 * gpu[ENGINE_ACTIVE]
    used, free = gpu.get("DCGM_FI_DEV_FB_USED"), gpu.get("DCGM_FI_DEV_FB_FREE")
    if used is not None and free is not None:
        readings["memory_total_mib"] = used + free + gpu.get("DCGM_FI_DEV_FB_RESERVED", 0.0)
    index = labels.get("gpu", "")
    return GpuSample(
        uuid=uuid,
        time=datetime.fromtimestamp(gpu["time"], UTC),
        node=labels.get("Hostname") or None,
        index=int(index) if index.isdigit() and not labels.get("GPU_I_ID") else None,  # an instance's is its GPU's
        pod=labels.get("pod") or None,
        namespace=labels.get("namespace") or None,
        **readings,
    )


def sample_key(sample: GpuSample) -> tuple[str, int, str]:  # node, index, UUID
    return (sample.node or "", -1 if sample.index is None else sample.index, sample.uuid)


class PrometheusSource:
    """The DCGM exporter's readings, through the Prometheus at ``url`` (``http://prometheus:9090``)."""

    name = "prometheus"

    def __init__(self, url: str, selector: str = "", timeout: float = 10.0, naming: Callable[[], Naming] = Naming):
        self.url = url.rstrip("/")
        self.selector = selector
        self.timeout = timeout
        self.naming = naming  # what names the exporter's series now (samples_from_query)

    async def sample(self, now: datetime) -> list[GpuSample]:
        """The latest sample of every GPU, stamped with the time Prometheus gives its values, not ``now``.

        That is the instant query's evaluation time on Prometheus's clock; a value
        is at most one scrape interval older, or gone once its series turns stale.
        """
        query_url = f"{self.url}/api/v1/query?" + urlencode({"query": make_query(self.selector)})
        where = f"Prometheus at {self.url}"
        try:
            response = await AsyncHTTPClient().fetch(
                query_url, connect_timeout=self.timeout, request_timeout=self.timeout
            )
        except HTTPClientError as e:
            if e.response is None:  # 599: timeout or connection closed
                raise MetricsUnavailable(
                    f"{where} did not answer ({e}); check that it runs and answers within {self.timeout:g} s"
                ) from e
            raise MetricsUnavailable(
                f"{where} answered HTTP {e.code} ({prometheus_error(e.response.body)}); "
                "check that the URL is Prometheus's own (the address of its web UI) and the selector is valid"
            ) from e
        except OSError as e:
            raise MetricsUnavailable(f"{where} cannot be reached ({e}); check that it runs and the URL") from e
        try:
            return samples_from_query(json.loads(response.body), self.naming())
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            raise MetricsUnavailable(
                f"{where} gave no usable query result ({e}); "
                "check that the URL is Prometheus's own (the address of its web UI)"
            ) from e


def prometheus_error(body: bytes | None) -> str:
    """Prometheus's own error message from an error answer, or the answer's start."""
    text = (body or b"").decode("utf-8", "replace")
    try:
        return str(json.loads(text)["error"])
    except (ValueError, KeyError, TypeError):
        return text[:200].strip() or "empty answer"
