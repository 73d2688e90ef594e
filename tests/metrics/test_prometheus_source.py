"""PrometheusSource: the pure mapping by table, then against a real Prometheus scraping a recorded exposition."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port
from tornado.web import Application, RequestHandler

from egs_hub.core.gpu_names import KubeGPU, Naming
from egs_hub.core.samples import GpuSample
from egs_hub.metrics import MetricsUnavailable
from egs_hub.metrics.prometheus import PrometheusSource, make_query, samples_from_query

from .prometheus_server import (
    ExpositionServer,
    Prometheus,
    free_port,
    read_recorded_exposition,
    start_prometheus,
    wait_for_scrape,
)

T0 = 1_760_000_000.5
TIME0 = datetime.fromtimestamp(T0, UTC)
UUID0 = "GPU-3f6e2a1c-8b7d-4e55-a0c2-9d1b7e4f6a10"  # in the recording: used by pod egs-ml-team/jupyter-alice
UUID1 = "GPU-b81c4d92-07ae-4f3b-9e61-52c8d0a7e3f4"  # in the recording: idle, last XID 31


def series(name: str, value: str, uuid: str | None = "GPU-a", t: float = T0, **labels: str) -> dict[str, Any]:
    """One instant-vector element as Prometheus answers it."""
    metric = {"__name__": name, "job": "dcgm", "instance": "10.0.0.7:9400", **labels}
    if uuid is not None:
        metric["UUID"] = uuid
    return {"metric": metric, "value": [t, value]}


def answer(*result: dict[str, Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(result)}}


# ---- samples_from_query, by table -------------------------------------------------------------------------------


@dataclass
class Case:
    result: list[dict[str, Any]]
    want: list[GpuSample] = field(default_factory=list)  # exactly these samples, in this order
    naming: Naming = field(default_factory=Naming)  # the inventory GPUs known (core/gpu_names.py)


NODE = {"gpu": "0", "Hostname": "node-a"}
MIG_A = {"GPU_I_ID": "7", "GPU_I_PROFILE": "1g.10gb"}
CASES = {
    "every field maps": Case(
        result=[
            series("DCGM_FI_DEV_GPU_UTIL", "97", **NODE, pod="jupyter-alice", namespace="team-a", container="nb"),
            series("DCGM_FI_DEV_MEM_COPY_UTIL", "38", **NODE),
            series("DCGM_FI_DEV_FB_USED", "61440", **NODE),
            series("DCGM_FI_DEV_FB_FREE", "19576", **NODE),
            series("DCGM_FI_DEV_FB_RESERVED", "543", **NODE),
            series("DCGM_FI_DEV_GPU_TEMP", "57", **NODE),
            series("DCGM_FI_DEV_POWER_USAGE", "512.345", **NODE),
            series("DCGM_FI_DEV_POWER_MGMT_LIMIT", "700", **NODE),
            series("DCGM_FI_DEV_SM_CLOCK", "1980", **NODE),
            series("DCGM_FI_DEV_XID_ERRORS", "31", **NODE),
            series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "2", **NODE),
        ],
        want=[
            GpuSample(
                uuid="GPU-a",
                time=TIME0,
                node="node-a",
                index=0,
                utilization=97,
                memory_utilization=38,
                memory_used_mib=61440,
                memory_total_mib=81559,  # used + free + reserved
                temperature_c=57,
                power_w=512.345,
                power_limit_w=700,
                sm_clock_mhz=1980,
                xid=31,
                ecc_errors=2,
                pod="jupyter-alice",
                namespace="team-a",
            )
        ],
    ),
    "total without FB_RESERVED is used + free": Case(
        result=[series("DCGM_FI_DEV_FB_USED", "100"), series("DCGM_FI_DEV_FB_FREE", "900")],
        want=[GpuSample(uuid="GPU-a", time=TIME0, memory_used_mib=100, memory_total_mib=1000)],
    ),
    "no total without FB_FREE": Case(
        result=[series("DCGM_FI_DEV_FB_USED", "100"), series("DCGM_FI_DEV_FB_RESERVED", "500")],
        want=[GpuSample(uuid="GPU-a", time=TIME0, memory_used_mib=100)],
    ),
    "readings a series does not give stay None; empty pod labels are None": Case(
        result=[series("DCGM_FI_DEV_GPU_TEMP", "40", pod="", namespace="", gpu="")],
        want=[GpuSample(uuid="GPU-a", time=TIME0, temperature_c=40)],
    ),
    "NaN and Inf are no reading": Case(
        result=[series("DCGM_FI_DEV_GPU_UTIL", "NaN"), series("DCGM_FI_DEV_XID_ERRORS", "+Inf")],
        want=[GpuSample(uuid="GPU-a", time=TIME0)],
    ),
    "series without UUID, of other metrics or of MIG instances not known are ignored": Case(
        result=[
            series("DCGM_FI_DEV_GPU_UTIL", "50", uuid=None),
            series("DCGM_FI_DEV_MEM_CLOCK", "2619", uuid="GPU-b"),
            series("DCGM_FI_DEV_FB_USED", "10", GPU_I_ID="3", GPU_I_PROFILE="1g.10gb"),
            series("DCGM_FI_DEV_FB_USED", "20"),
        ],
        want=[GpuSample(uuid="GPU-a", time=TIME0, memory_used_mib=20)],
        naming=Naming(instances={("GPU-a", 4): "MIG-a4", ("GPU-b", 3): "MIG-b3"}),
    ),
    "a MIG instance known is sampled by its UUID, its engine's busy ratio as utilization": Case(
        result=[
            series("DCGM_FI_DEV_GPU_TEMP", "48", **NODE),
            series("DCGM_FI_DEV_FB_USED", "10048", GPU_I_ID="1", GPU_I_PROFILE="3g.40gb", pod="p", **NODE),
            series("DCGM_FI_DEV_FB_FREE", "30144", GPU_I_ID="1", GPU_I_PROFILE="3g.40gb", pod="p", **NODE),
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.5", GPU_I_ID="1", GPU_I_PROFILE="3g.40gb", pod="p", **NODE),
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0", GPU_I_ID="x", **NODE),
        ],
        want=[  # an instance has no index (its gpu label is its GPU's): it comes first on its node
            GpuSample(
                uuid="MIG-a1",
                time=TIME0,
                node="node-a",
                utilization=50,
                memory_used_mib=10048,
                memory_total_mib=40192,
                pod="p",
            ),
            GpuSample(uuid="GPU-a", time=TIME0, node="node-a", index=0, temperature_c=48),
        ],
        naming=Naming(instances={("GPU-a", 1): "MIG-a1"}),
    ),
    "the engine's busy ratio stands in for a GPU without DCGM_FI_DEV_GPU_UTIL, not over it": Case(
        result=[
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.25", uuid="GPU-a"),
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.25", uuid="GPU-b"),
            series("DCGM_FI_DEV_GPU_UTIL", "40", uuid="GPU-b"),
        ],
        want=[
            GpuSample(uuid="GPU-a", time=TIME0, utilization=25),
            GpuSample(uuid="GPU-b", time=TIME0, utilization=40),
        ],
    ),
    "one sample per UUID, ordered by node and index, stamped with its latest series": Case(
        result=[
            series("DCGM_FI_DEV_GPU_UTIL", "1", uuid="GPU-z", gpu="1", Hostname="node-a"),
            series("DCGM_FI_DEV_GPU_UTIL", "2", uuid="GPU-y", gpu="0", Hostname="node-b"),
            series("DCGM_FI_DEV_GPU_UTIL", "3", uuid="GPU-x", gpu="0", Hostname="node-a"),
            series("DCGM_FI_DEV_GPU_TEMP", "30", uuid="GPU-x", gpu="0", Hostname="node-a", t=T0 + 2),
        ],
        want=[
            GpuSample(
                uuid="GPU-x", time=TIME0 + timedelta(seconds=2), node="node-a", index=0, utilization=3, temperature_c=30
            ),
            GpuSample(uuid="GPU-z", time=TIME0, node="node-a", index=1, utilization=1),
            GpuSample(uuid="GPU-y", time=TIME0, node="node-b", index=0, utilization=2),
        ],
    ),
    "a Kubernetes node's GPUs and instances by the inventory's ids, not by UUID": Case(
        result=[
            series("DCGM_FI_DEV_GPU_UTIL", "90", uuid="GPU-k1", gpu="1", Hostname="kube-a"),
            series("DCGM_FI_DEV_GPU_TEMP", "41", uuid="GPU-k0", gpu="0", Hostname="kube-a"),
            series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.5", uuid="GPU-k2", gpu="2", Hostname="kube-a", **MIG_A),
            series("DCGM_FI_DEV_GPU_TEMP", "50", uuid="GPU-k2", gpu="2", Hostname="kube-a"),  # in MIG mode
        ],
        want=[
            GpuSample(uuid="east/kube-a/mig-1g.10gb-0", time=TIME0, node="kube-a", utilization=50),
            GpuSample(uuid="east/kube-a/gpu0", time=TIME0, node="kube-a", index=0, temperature_c=41),
            GpuSample(uuid="east/kube-a/gpu1", time=TIME0, node="kube-a", index=1, utilization=90),
        ],
        naming=Naming(
            kube_gpus=[
                KubeGPU("east/kube-a/gpu0", "east", "kube-a", 0),
                KubeGPU("east/kube-a/gpu1", "east", "kube-a", 1),
                KubeGPU("east/kube-a/mig-1g.10gb-0", "east", "kube-a:1g.10gb", 0, "1g.10gb"),
            ]
        ),
    ),
    "nothing matched": Case(result=[], want=[]),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_samples_from_query(case: Case) -> None:
    assert samples_from_query(answer(*case.result), case.naming) == case.want


BAD_ANSWERS = {  # answer -> words the error must contain
    "not an object": ([1, 2], "JSON object"),
    "status error": ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "parse error"),
    "matrix, not vector": ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "vector"),
    "no data": ({"status": "success"}, "vector"),
    "value is not a pair": (answer({"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL"}, "value": "97"}), "malformed"),
    "value is not a number": (answer(series("DCGM_FI_DEV_GPU_UTIL", "busy")), "malformed"),
    "series is not an object": (answer("DCGM_FI_DEV_GPU_UTIL"), "malformed"),
}


@pytest.mark.parametrize(("bad", "want_words"), BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
def test_samples_from_query_rejects_malformed_answers(bad: Any, want_words: str) -> None:
    with pytest.raises(ValueError, match=want_words):
        samples_from_query(bad)


def test_query_is_one_selector_with_the_extra_matchers() -> None:
    assert make_query().startswith('{__name__=~"DCGM_FI_DEV_GPU_UTIL|')
    assert make_query(' job="dcgm", ').endswith('|DCGM_FI_PROF_GR_ENGINE_ACTIVE",job="dcgm"}')


# ---- PrometheusSource against a real Prometheus -------------------------------------------------------------------

RECORDED = read_recorded_exposition()
WANT_RECORDED = [  # time is checked apart: it is Prometheus's
    GpuSample(
        uuid=UUID0,
        time=TIME0,
        node="gpu-node-1",
        index=0,
        utilization=97,
        memory_utilization=38,
        memory_used_mib=61440,
        memory_total_mib=81559,
        temperature_c=57,
        power_w=512.345,
        sm_clock_mhz=1980,
        xid=0,
        pod="jupyter-alice",
        namespace="egs-ml-team",
    ),
    GpuSample(
        uuid=UUID1,
        time=TIME0,
        node="gpu-node-1",
        index=1,
        utilization=0,
        memory_utilization=0,
        memory_used_mib=0,
        memory_total_mib=81559,
        temperature_c=29,
        power_w=71.208,
        sm_clock_mhz=345,
        xid=31,
    ),
]


@pytest.fixture(scope="module")
def exposition() -> Iterator[ExpositionServer]:
    with ExpositionServer(RECORDED) as server:
        yield server


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, exposition: ExpositionServer) -> Iterator[Prometheus]:
    prom = start_prometheus(str(tmp_path_factory.mktemp("prometheus")), [exposition.address])
    yield prom
    prom.stop()


def utilization_is(want: dict[str, float]):  # UUID -> value, for wait_for_scrape
    return lambda result: {r["metric"]["UUID"]: float(r["value"][1]) for r in result} == want


@pytest.fixture
def scraped(exposition: ExpositionServer, prometheus: Prometheus) -> Prometheus:
    """Prometheus once it has scraped the recorded exposition (again, if a test changed it)."""
    exposition.text = RECORDED
    wait_for_scrape(prometheus.url, "DCGM_FI_DEV_GPU_UTIL", utilization_is({UUID0: 97, UUID1: 0}))
    return prometheus


def without_time(samples: list[GpuSample]) -> list[GpuSample]:
    return [dataclasses.replace(s, time=TIME0) for s in samples]


async def test_maps_every_field_of_the_recorded_exporter(scraped: Prometheus) -> None:
    before = datetime.now(UTC)
    samples = await PrometheusSource(scraped.url).sample(before)
    assert without_time(samples) == WANT_RECORDED
    assert all(s.processes is None for s in samples)  # DCGM cannot list processes
    for s in samples:  # Prometheus's own evaluation time, in UTC
        assert s.time.tzinfo == UTC and abs(s.time - before) < timedelta(seconds=30)


async def test_a_changed_exposition_shows_up_after_the_next_scrape(
    scraped: Prometheus, exposition: ExpositionServer
) -> None:
    gpu0 = [line for line in RECORDED.splitlines() if UUID1 not in line]  # GPU 1 is gone from the node
    exposition.text = "\n".join(line.replace("} 97", "} 12") if "GPU_UTIL" in line else line for line in gpu0) + "\n"
    wait_for_scrape(scraped.url, "DCGM_FI_DEV_GPU_UTIL", utilization_is({UUID0: 12}))

    samples = await PrometheusSource(scraped.url).sample(datetime.now(UTC))

    assert without_time(samples) == [dataclasses.replace(WANT_RECORDED[0], utilization=12)]


MIG_EXPOSITION = os.path.join(os.path.dirname(__file__), "dcgm_mig_exposition.txt")
MIG_GPU = "GPU-5d2c9a7e-3b1f-4c6d-8e0a-1f2b3c4d5e60"


async def test_mig_instances_are_sampled_per_instance_through_prometheus(
    scraped: Prometheus, exposition: ExpositionServer
) -> None:
    """An H100 in MIG mode as the exporter publishes it: each instance NVML found (by its GPU's UUID and
    GPU instance id) is one sample, with its own memory, busy ratio and pod; an instance not found is
    left out; the GPU's own series (no GPU_I_ID) stay the GPU's."""
    with open(MIG_EXPOSITION, encoding="utf-8") as f:
        exposition.text = f.read()
    instance_ids = lambda result: sorted(r["metric"].get("GPU_I_ID", "") for r in result) == ["1", "13"]  # noqa: E731
    wait_for_scrape(scraped.url, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", instance_ids)
    instances = {(MIG_GPU, 1): "MIG-11111111-2222-5333-8444-555555555555"}

    samples = await PrometheusSource(scraped.url, naming=lambda: Naming(instances=instances)).sample(datetime.now(UTC))

    assert without_time(samples) == [
        GpuSample(
            uuid="MIG-11111111-2222-5333-8444-555555555555",
            time=TIME0,
            node="gpu-node-2",
            utilization=78.4913,
            memory_used_mib=10048,
            memory_total_mib=40192,
            pod="jupyter-bob",
            namespace="egs-ml-team",
        ),
        GpuSample(uuid=MIG_GPU, time=TIME0, node="gpu-node-2", index=0, temperature_c=48),
    ]


async def test_mig_instances_on_kubernetes_are_named_by_the_workspace_using_them(
    scraped: Prometheus, exposition: ExpositionServer
) -> None:
    """The same H100 as a Kubernetes node's (mixed strategy): Kubernetes does not say which instance a pod
    got, so the instance its pod in egs-ml-team uses is one the ml workspace holds (not the first of its
    profile), the idle one the next free of its profile; the GPU in MIG mode is no whole GPU of the node."""
    with open(MIG_EXPOSITION, encoding="utf-8") as f:
        exposition.text = f.read()
    instance_ids = lambda result: sorted(r["metric"].get("GPU_I_ID", "") for r in result) == ["1", "13"]  # noqa: E731
    wait_for_scrape(scraped.url, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", instance_ids)
    node = "east/gpu-node-2"
    naming = Naming(
        kube_gpus=[
            KubeGPU(f"{node}/mig-3g.40gb-0", "east", "gpu-node-2:3g.40gb", 0, "3g.40gb", holder="vision"),
            KubeGPU(f"{node}/mig-3g.40gb-1", "east", "gpu-node-2:3g.40gb", 1, "3g.40gb", holder="ml"),
            KubeGPU(f"{node}/mig-1g.10gb-0", "east", "gpu-node-2:1g.10gb", 0, "1g.10gb"),
        ],
        namespaces={("east", "egs-ml-team"): "ml", ("east", "egs-vision"): "vision"},
    )

    samples = await PrometheusSource(scraped.url, naming=lambda: naming).sample(datetime.now(UTC))

    assert [(s.uuid, s.utilization, s.pod) for s in samples] == [
        (f"{node}/mig-1g.10gb-0", 0, None),
        (f"{node}/mig-3g.40gb-1", 78.4913, "jupyter-bob"),
    ]


SELECTORS = {  # selector -> UUIDs wanted
    'job="dcgm"': [UUID0, UUID1],
    'Hostname="gpu-node-1",pod="jupyter-alice"': [UUID0],
    'job="elsewhere"': [],
}


@pytest.mark.parametrize(("selector", "want_uuids"), SELECTORS.items(), ids=SELECTORS.keys())
async def test_selector_picks_the_series(scraped: Prometheus, selector: str, want_uuids: list[str]) -> None:
    samples = await PrometheusSource(scraped.url, selector=selector).sample(datetime.now(UTC))
    assert [s.uuid for s in samples] == want_uuids


async def test_an_invalid_selector_gives_prometheus_own_error(scraped: Prometheus) -> None:
    with pytest.raises(MetricsUnavailable, match=r"answered HTTP 400 \(.*parse error") as error:
        await PrometheusSource(scraped.url, selector="job==").sample(datetime.now(UTC))
    assert scraped.url in str(error.value) and "selector" in str(error.value)


# ---- what goes wrong ---------------------------------------------------------------------------------------------


async def test_prometheus_down_is_unavailable_saying_where() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(MetricsUnavailable, match="cannot be reached") as error:
        await PrometheusSource(url).sample(datetime.now(UTC))
    assert url in str(error.value) and "check that it runs" in str(error.value)


async def test_a_silent_prometheus_times_out() -> None:
    with socket.socket() as listening:  # accepts connections (backlog) but never answers
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(MetricsUnavailable, match=r"did not answer \(.*[Tt]imeout.*within 0.3 s") as error:
            await PrometheusSource(url, timeout=0.3).sample(datetime.now(UTC))
    assert url in str(error.value)


async def test_the_exporter_url_is_not_prometheus(exposition: ExpositionServer) -> None:
    with pytest.raises(MetricsUnavailable, match="answered HTTP 404") as error:
        await PrometheusSource(exposition.url).sample(datetime.now(UTC))
    assert exposition.url in str(error.value) and "Prometheus's own" in str(error.value)


class Canned(RequestHandler):
    def get(self) -> None:
        code, content_type, body = self.settings["answer"]
        self.set_status(code)
        self.set_header("Content-Type", content_type)
        self.finish(body)


@pytest.fixture
async def canned() -> AsyncIterator[Any]:
    """Start a server whose /api/v1/query gives one canned (code, content type, body); yields a starter."""
    servers: list[HTTPServer] = []

    def serve(code: int, content_type: str, body: str) -> str:
        sock, port = bind_unused_port()
        server = HTTPServer(Application([(r"/api/v1/query", Canned)], answer=(code, content_type, body)))
        server.add_sockets([sock])
        servers.append(server)
        return f"http://127.0.0.1:{port}"

    yield serve
    for server in servers:
        server.stop()


CANNED = {  # (code, content type, body) -> words the error must contain
    "HTML page": ((200, "text/html", "<html>Grafana</html>"), "no usable query result"),
    "status error with 200": (
        (200, "application/json", '{"status":"error","errorType":"timeout","error":"query timed out"}'),
        "query timed out",
    ),
    "unavailable": ((503, "application/json", '{"status":"error","error":"TSDB not ready"}'), "HTTP 503.*TSDB"),
    "truncated JSON": ((200, "application/json", '{"status":"success","data":{'), "no usable query result"),
}


@pytest.mark.parametrize(("canned_answer", "want_words"), CANNED.values(), ids=CANNED.keys())
async def test_a_non_prometheus_answer_is_unavailable(canned: Any, canned_answer: tuple, want_words: str) -> None:
    url = canned(*canned_answer)
    with pytest.raises(MetricsUnavailable, match=want_words) as error:
        await PrometheusSource(url).sample(datetime.now(UTC))
    assert url in str(error.value)
