"""Inference endpoints' workloads on a cluster (endpoint_workloads.py) through the real client, against the
emulator: the test plays the kubelet (pods, their status, a Deployment's ready replicas, a pod's metrics
page) and KServe (an InferenceService's Ready condition)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import pytest
from kmock import Server

from egs_hub.backends.kubernetes import KubernetesBackend
from egs_hub.backends.kubernetes import endpoint_objects as eo
from egs_hub.backends.kubernetes.endpoint_workloads import EndpointWorkloads, Wanted
from egs_hub.core.endpoints import EndpointSpec

from . import emulator as emulated
from .emulator import ClusterEmulator
from .kubeconfig import write_kubeconfig

VLLM = EndpointSpec(
    slice="team-a", name="chat", runtime="vllm", model="org/m", health_path="/health", metrics_path="/metrics"
)
COMMAND = EndpointSpec(slice="team-a", name="echo", runtime="command", command=("srv", "{port}"), image="img:1")
KSERVE = EndpointSpec(slice="team-a", name="hf", runtime="kserve", model="org/m")
GPUS = ("emu/gpu-a/gpu0", "emu/gpu-a/gpu1")
pytestmark = pytest.mark.usefixtures("emulator")  # the test plays the kubelet: emulator only


def wanted(spec: EndpointSpec, gpr: int, namespace: str, image: str = "vllm/vllm-openai:v0.11.0") -> Wanted:
    place = eo.placement(spec.slice, gpr, GPUS)
    if spec.runtime == "kserve":
        return Wanted((1, gpr), eo.inference_service(spec, gpr, namespace, place), None, spec.metrics_path)
    return Wanted(
        (1, gpr), eo.deployment(spec, gpr, namespace, place, image), eo.service(spec, namespace), spec.metrics_path
    )


@pytest.fixture
async def workloads(make_backend) -> EndpointWorkloads:
    backend = make_backend()
    return EndpointWorkloads("emu", backend.api_client, backend.request_timeout)


async def start_pod(cluster, replica: Wanted, name: str, status: dict) -> None:
    """What the kubelet does for a replica's workload: a pod with its labels, and that pod's status."""
    namespace = replica.workload["metadata"]["namespace"]
    labels = replica.workload["metadata"]["labels"]
    body = {"metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "server", "image": "x"}]}}
    await cluster.core.create_namespaced_pod(namespace, body)
    await cluster.core.patch_namespaced_pod_status(name, namespace, {"status": status})


READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


async def test_a_replica_is_made_and_ready_once_its_pod_is(cluster, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    replica = wanted(VLLM, 7, namespace)
    seen = await workloads.check([replica])
    assert seen[(1, 7)].state == "starting"
    deployment = await cluster.get("Deployment", namespace, "ep-chat-7")
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"egs.io/gpr": "7"}
    assert (await cluster.get("Service", namespace, "ep-chat"))["spec"]["ports"][0]["targetPort"] == 8000
    await start_pod(cluster, replica, "ep-chat-7-a", READY)
    await cluster.apps.patch_namespaced_deployment_status("ep-chat-7", namespace, {"status": {"readyReplicas": 1}})
    seen = await workloads.check([replica])
    assert seen[(1, 7)] == eo.Seen("ready", "", 0, ("ep-chat-7-a",))


async def test_an_unchanged_replica_is_not_written_and_a_changed_one_is_replaced(cluster, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    await workloads.check([wanted(VLLM, 7, namespace)])
    version = (await cluster.get("Deployment", namespace, "ep-chat-7"))["metadata"]["resourceVersion"]
    await workloads.check([wanted(VLLM, 7, namespace)])
    assert (await cluster.get("Deployment", namespace, "ep-chat-7"))["metadata"]["resourceVersion"] == version
    await workloads.check([wanted(VLLM, 7, namespace, image="vllm/vllm-openai:v0.12.0")])
    changed = await cluster.get("Deployment", namespace, "ep-chat-7")
    assert changed["metadata"]["resourceVersion"] != version
    assert changed["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.12.0"


async def test_an_older_service_is_replaced_keeping_its_cluster_ip(cluster, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    older = eo.service(VLLM, namespace)
    older["metadata"]["annotations"][eo.SPEC_HASH] = "an-older-version"
    older["spec"]["clusterIP"] = "10.0.0.9"
    del older["spec"]["ports"][0]["name"]
    await cluster.core.create_namespaced_service(namespace, older)
    await workloads.check([wanted(VLLM, 7, namespace)])
    service = await cluster.get("Service", namespace, "ep-chat")
    assert service["spec"]["clusterIP"] == "10.0.0.9" and service["spec"]["ports"][0]["name"] == "http"
    assert service["metadata"]["annotations"][eo.SPEC_HASH] == eo.spec_hash(eo.service(VLLM, namespace))


async def test_a_crash_looping_pod_fails_its_replica_saying_why(cluster, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    replica = wanted(COMMAND, 8, namespace)
    await workloads.check([replica])
    crash = {
        "name": "server",
        "image": "img:1",
        "imageID": "",
        "ready": False,
        "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting"}},
        "lastState": {"terminated": {"exitCode": 2}},
    }
    await start_pod(cluster, replica, "ep-echo-8-x", {"phase": "Running", "containerStatuses": [crash]})
    seen = (await workloads.check([replica]))[(1, 8)]
    assert seen.state == "failed" and seen.restarts == 3
    assert seen.message == "pod ep-echo-8-x: CrashLoopBackOff (last exit code 2): back-off 40s restarting"


async def test_what_no_replica_keeps_is_deleted_also_by_a_restarted_runner(cluster, workloads, make_backend):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    await workloads.check([wanted(VLLM, 7, namespace), wanted(VLLM, 9, namespace)])
    await workloads.check([wanted(VLLM, 9, namespace)])
    assert await cluster.get("Deployment", namespace, "ep-chat-7") is None
    assert await cluster.get("Deployment", namespace, "ep-chat-9") is not None
    backend = make_backend()
    restarted = EndpointWorkloads("emu", backend.api_client, backend.request_timeout)
    assert await restarted.check([]) == {}
    assert await cluster.get("Deployment", namespace, "ep-chat-9") is None
    assert await cluster.get("Service", namespace, "ep-chat") is None


async def test_a_kserve_replica_is_an_inference_service(cluster, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    replica = wanted(KSERVE, 5, namespace)
    assert await workloads.has_kserve()
    assert (await workloads.check([replica]))[(1, 5)].state == "starting"
    args = ("serving.kserve.io", "v1beta1", namespace, "inferenceservices", "ep-hf-5")
    made = await cluster.custom.get_namespaced_custom_object(*args)
    assert made["spec"]["predictor"]["model"]["storageUri"] == "hf://org/m"
    assert await cluster.get("Service", namespace, "ep-hf") is None  # KServe makes the predictor's Service
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    await cluster.custom.patch_namespaced_custom_object_status(
        *args, ready, _content_type="application/merge-patch+json"
    )
    assert (await workloads.check([replica]))[(1, 5)].state == "ready"
    changed = dataclasses.replace(KSERVE, args=("--max_length", "4096"))
    await workloads.check(
        [Wanted((1, 5), eo.inference_service(changed, 5, namespace, eo.placement("team-a", 5, GPUS)))]
    )
    replaced = await cluster.custom.get_namespaced_custom_object(*args)
    assert replaced["spec"]["predictor"]["model"]["args"] == ["--model_name=hf", "--max_length", "4096"]
    await workloads.check([])
    with pytest.raises(Exception, match="404"):
        await cluster.custom.get_namespaced_custom_object(*args)


@pytest.fixture
async def no_kserve(tmp_path) -> AsyncIterator[EndpointWorkloads]:
    """Workloads on a cluster without KServe's CRD."""
    async with ClusterEmulator(kserve=False) as emulator, Server(emulator):
        path = write_kubeconfig(tmp_path / "kubeconfig", str(emulator.url).rstrip("/"), emulator.token, "bare")
        backend = KubernetesBackend("bare", kubeconfig=str(path), context="bare", request_timeout=3.0)
        try:
            yield EndpointWorkloads("bare", backend.api_client, backend.request_timeout)
        finally:
            await backend.close()


async def test_without_kserve_nothing_asks_for_inference_services(no_kserve):
    assert not await no_kserve.has_kserve()
    assert await no_kserve.check([]) == {}


async def test_a_namespace_that_is_not_there_fails_the_replica_saying_so(workloads):
    seen = (await workloads.check([wanted(VLLM, 7, "nowhere")]))[(1, 7)]
    assert seen.state == "failed"
    assert "cannot make Deployment nowhere/ep-chat-7 on cluster emu: namespace nowhere" in seen.message


async def test_an_api_outage_leaves_replicas_starting_saying_why(cluster, emulator, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    await emulator.set_outage(True)
    seen = (await workloads.check([wanted(VLLM, 7, namespace)]))[(1, 7)]
    await emulator.set_outage(False)
    assert seen.state == "starting" and seen.message.startswith("cannot read cluster emu: HTTP 503")
    assert (await workloads.check([wanted(VLLM, 7, namespace)]))[(1, 7)].state == "starting"
    assert await cluster.get("Deployment", namespace, "ep-chat-7") is not None


async def test_a_kubeconfig_that_cannot_be_loaded_is_said_on_the_replica(make_backend, tmp_path):
    backend = make_backend(kubeconfig=str(tmp_path / "missing"))
    broken = EndpointWorkloads("emu", backend.api_client)
    seen = (await broken.check([wanted(VLLM, 7, "ns")]))[(1, 7)]
    assert seen.state == "starting" and "cannot read cluster emu: cluster emu: cannot load" in seen.message


@contextlib.contextmanager
def counted() -> list:
    requests: list = []
    observer = lambda attributes, agent, scope: requests.append(attributes)  # noqa: E731
    emulated.OBSERVERS.append(observer)
    try:
        yield requests
    finally:
        emulated.OBSERVERS.remove(observer)


async def test_a_cluster_with_nothing_left_is_not_read_again(cluster, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    await workloads.check([wanted(VLLM, 7, namespace)])
    with counted() as requests:
        await workloads.check([])  # lists, then deletes the Deployment and the Service
        deleting = len(requests)
        await workloads.check([])  # lists, finds nothing
        assert len(requests) > deleting
        finding = len(requests)
        await workloads.check([])
        await workloads.check([])
    assert len(requests) == finding
    assert {a.verb for a in requests} >= {"list", "delete"}


async def test_queues_are_read_through_the_pod_proxy(cluster, emulator, workloads):
    namespace = await cluster.add_namespace("team-a", slice="team-a")
    replica = wanted(VLLM, 7, namespace)
    await workloads.check([replica])
    await start_pod(cluster, replica, "ep-chat-7-a", READY)
    await start_pod(cluster, replica, "ep-chat-7-b", READY)
    await cluster.apps.patch_namespaced_deployment_status("ep-chat-7", namespace, {"status": {"readyReplicas": 2}})
    emulator.pod_pages[(namespace, "ep-chat-7-a", "metrics")] = 'vllm:num_requests_waiting{model_name="org/m"} 3.0\n'
    seen = (await workloads.check([replica]))[(1, 7)]
    assert seen.ready_pods == ("ep-chat-7-a", "ep-chat-7-b")
    assert await workloads.queued(replica.workload, seen, "/metrics") == 3  # b answers 404: nothing


async def test_an_unreadable_cluster_keeping_nothing_is_not_read_at_every_pass(make_backend, tmp_path):
    backend = make_backend(kubeconfig=str(tmp_path / "missing"))
    calls = []

    async def api():
        calls.append(1)
        return await backend.api_client()

    broken = EndpointWorkloads("emu", api)
    assert await broken.check([]) == {}
    assert await broken.check([]) == {}  # within IDLE_RETRY: not read
    assert len(calls) == 1
    assert (await broken.check([wanted(VLLM, 7, "ns")]))[(1, 7)].state == "starting"  # a replica: read at once
    assert len(calls) == 2
