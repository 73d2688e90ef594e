"""An inference endpoint's Kubernetes objects (endpoint_objects.py): placement, manifests, names, and a
replica's state as read from its workload and pods; the manifests checked with kubernetes-validate."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from egs_hub.backends.kubernetes import endpoint_objects as eo
from egs_hub.core.endpoints import EndpointSpec

KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
VLLM = EndpointSpec(
    slice="team-a", name="chat", runtime="vllm", model="Qwen/Qwen2.5-0.5B-Instruct", args=("--max-model-len", "4096"),
    env={"HF_HOME": "/cache"}, health_path="/health", metrics_path="/metrics",
)  # fmt: skip
COMMAND = EndpointSpec(
    slice="team-a", name="echo", runtime="command", command=("python", "-m", "http.server", "{port}"),
    image="python:3.12-slim",
)  # fmt: skip
KSERVE = EndpointSpec(slice="team-a", name="hf", runtime="kserve", model="org/model", health_path="/")
WHOLE = ("east/gpu-a/gpu0", "east/gpu-a/gpu1", "east/gpu-b/gpu0", "east/gpu-b/gpu1")


def test_whole_gpus_are_one_pod_per_node_on_the_gpr_nodes():
    place = eo.placement("team-a", 7, WHOLE)
    assert place.pods == 2 and place.limits == {"nvidia.com/gpu": 2}
    assert place.node_selector == {"egs.io/gpr": "7"}
    assert place.tolerations == (
        {"key": "egs.io/slice", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"},
    )


def test_mig_instances_and_shares_go_to_the_slice_share_nodes():
    mig = eo.placement("team-a", 8, ("east/gpu-a/mig-1g.10gb-0", "east/gpu-a/mig-1g.10gb-1"))
    assert mig.pods == 1 and mig.limits == {"nvidia.com/mig-1g.10gb": 2}
    assert mig.node_selector == {"share.egs.io/team-a": "true"} and mig.tolerations[0]["value"] == "free"
    shared = eo.placement("team-a", 9, ("east/gpu-a/gpu0::1",))
    assert shared.limits == {"nvidia.com/gpu.shared": 1}


@pytest.mark.parametrize(
    ("gpus", "says"),
    [
        ((), "holds no GPUs"),
        (("east/gpu-a/gpu0", "east/gpu-a/gpu1", "east/gpu-b/gpu0"), "different GPUs"),
        (("east/gpu-a/gpu0", "east/gpu-a/mig-1g.10gb-0"), "one kind of GPU"),
    ],
)
def test_gpus_one_pod_template_cannot_ask_for_are_refused_saying_why(gpus, says):
    with pytest.raises(eo.Unplaceable, match=says):
        eo.placement("team-a", 7, gpus)


def test_names_are_dns_labels_and_long_ones_stay_apart():
    assert eo.workload_name("chat", 12) == "ep-chat-12" and eo.service_name("chat") == "ep-chat"
    long_a, long_b = "a" * 60 + "x", "a" * 60 + "y"
    names = {eo.workload_name(long_a, 123456), eo.workload_name(long_b, 123456), eo.service_name(long_a)}
    assert len(names) == 3 and all(len(n) <= 63 for n in names)
    assert eo.workload_name(long_a, 123456).endswith("-123456")


def test_the_vllm_deployment_serves_the_model_on_the_gpr_gpus():
    place = eo.placement("team-a", 7, WHOLE)
    deployment = eo.deployment(VLLM, 7, "team-a-home", place, "vllm/vllm-openai:v0.11.0")
    assert deployment["metadata"]["name"] == "ep-chat-7" and deployment["metadata"]["namespace"] == "team-a-home"
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == [
        "vllm", "serve", "Qwen/Qwen2.5-0.5B-Instruct", "--host", "0.0.0.0", "--port", "8000", "--max-model-len", "4096",
    ]  # fmt: skip
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"HF_HOME": "/cache", "EGS_SLICE": "team-a", "EGS_ENDPOINT": "chat", "EGS_GPRS": "7", "PORT": "8000"}
    assert pod["nodeSelector"] == {"egs.io/gpr": "7"} and pod["volumes"][0]["emptyDir"] == {"medium": "Memory"}
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert deployment["spec"]["selector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]


def test_the_command_deployment_runs_the_command_in_its_image_on_the_port():
    deployment = eo.deployment(COMMAND, 3, "ns", eo.placement("team-a", 3, WHOLE[:1]), "ignored-default")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "http.server", "8000"]
    assert "volumes" not in deployment["spec"]["template"]["spec"]


def test_the_service_selects_every_replica_pod_of_the_endpoint():
    service = eo.service(VLLM, "team-a-home")
    assert service["metadata"]["name"] == "ep-chat"
    assert service["spec"]["selector"] == {
        "app.kubernetes.io/managed-by": "egs-hub", "app.kubernetes.io/component": "egs-endpoint",
        "egs.io/slice": "team-a", "egs.io/endpoint": "chat",
    }  # fmt: skip
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8000, "protocol": "TCP"}]
    pod_labels = eo.deployment(VLLM, 7, "ns", eo.placement("team-a", 7, WHOLE), "img")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod_labels["metadata"]["labels"].items()


def test_the_inference_service_uses_the_hugging_face_runtime_in_raw_deployment_mode():
    isvc = eo.inference_service(KSERVE, 5, "ns", eo.placement("team-a", 5, WHOLE[:2]))
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1" and isvc["kind"] == "InferenceService"
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"
    predictor = isvc["spec"]["predictor"]
    assert predictor["minReplicas"] == predictor["maxReplicas"] == 1
    assert predictor["model"]["modelFormat"] == {"name": "huggingface"}
    assert predictor["model"]["storageUri"] == "hf://org/model"
    assert predictor["model"]["args"] == ["--model_name=hf"]
    assert predictor["model"]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert predictor["labels"]["egs.io/gpr"] == "5" and predictor["nodeSelector"] == {"egs.io/gpr": "5"}
    assert eo.storage_uri("s3://bucket/model") == "s3://bucket/model"
    own = eo.inference_service(
        EndpointSpec(slice="team-a", name="hf", runtime="kserve", model="m", image="me/server:1"), 5, "ns",
        eo.placement("team-a", 5, WHOLE[:1]),
    )  # fmt: skip
    assert "model" not in own["spec"]["predictor"]
    assert own["spec"]["predictor"]["containers"][0]["image"] == "me/server:1"


def test_the_spec_hash_changes_with_what_is_wanted_only():
    place = eo.placement("team-a", 7, WHOLE)
    first = eo.deployment(VLLM, 7, "ns", place, "img:1")
    assert eo.spec_hash(first) == eo.spec_hash(eo.deployment(VLLM, 7, "ns", place, "img:1"))
    assert eo.spec_hash(first) != eo.spec_hash(eo.deployment(VLLM, 7, "ns", place, "img:2"))
    found = copy.deepcopy(first)
    found["metadata"]["resourceVersion"] = "41"
    found["spec"]["progressDeadlineSeconds"] = 600  # the API server's default
    assert eo.spec_hash(found) == eo.spec_hash(first)


def test_a_replaced_service_keeps_its_cluster_ip():
    wanted = eo.service(VLLM, "ns")
    found = {**copy.deepcopy(wanted), "spec": {**wanted["spec"], "clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"]}}
    found["metadata"]["resourceVersion"] = "12"
    body = eo.replaced(wanted, found)
    assert body["spec"]["clusterIP"] == "10.0.0.9" and body["metadata"]["resourceVersion"] == "12"
    assert "clusterIP" not in wanted["spec"]


def pod(name: str, *, ready=False, waiting=None, restarts=0, exit_code=None, unscheduled=None) -> dict:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if unscheduled:
        conditions.append({"type": "PodScheduled", "status": "False", "message": unscheduled})
    container = {"name": "server", "restartCount": restarts, "state": {}}
    if waiting:
        container["state"] = {"waiting": {"reason": waiting, "message": "back-off"}}
    if exit_code is not None:
        container["lastState"] = {"terminated": {"exitCode": exit_code}}
    return {"metadata": {"name": name}, "status": {"conditions": conditions, "containerStatuses": [container]}}


DEPLOYMENT = {"kind": "Deployment", "status": {}}


@pytest.mark.parametrize(
    ("workload", "pods", "state", "says"),
    [
        (None, [], "starting", "being made"),
        ({"kind": "Deployment", "status": {"readyReplicas": 1}}, [pod("p", ready=True)], "ready", ""),
        (DEPLOYMENT, [pod("p", unscheduled="0/3 nodes are available")], "starting", "pod p is not scheduled: 0/3"),
        (DEPLOYMENT, [pod("p", waiting="ImagePullBackOff")], "failed", "pod p: ImagePullBackOff"),
        (DEPLOYMENT, [pod("p", waiting="CrashLoopBackOff", restarts=3, exit_code=2)], "failed", "last exit code 2"),
        (DEPLOYMENT, [pod("p", waiting="CrashLoopBackOff", restarts=1, exit_code=2)], "starting", ""),
        (
            {"kind": "InferenceService", "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            [pod("q", ready=True)],
            "ready",
            "",
        ),
        (
            {
                "kind": "InferenceService",
                "status": {"conditions": [{"type": "Ready", "status": "False", "message": "m"}]},
            },
            [],
            "starting",
            "m",
        ),
    ],
)
def test_a_replica_state_is_read_from_its_workload_and_pods(workload, pods, state, says):
    found = eo.seen(workload, pods)
    assert found.state == state and says in found.message
    if state == "ready":
        assert found.ready_pods == tuple(p["metadata"]["name"] for p in pods)


def test_restarts_are_counted_across_pods():
    assert eo.seen(DEPLOYMENT, [pod("a", restarts=1), pod("b", restarts=2)]).restarts == 3


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_manifests_are_valid_kubernetes_objects(version):
    place = eo.placement("team-a", 7, WHOLE)
    for obj in (
        eo.deployment(VLLM, 7, "ns", place, "vllm/vllm-openai:v0.11.0"),
        eo.deployment(COMMAND, 7, "ns", place, "python:3.12-slim"),
        eo.service(VLLM, "ns"),
    ):
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_inference_service_predictor_is_a_valid_pod_spec(version):
    """kubernetes-validate knows no CRD: the predictor's pod part is checked as the pod KServe makes of it."""
    predictor = eo.inference_service(KSERVE, 5, "ns", eo.placement("team-a", 5, WHOLE))["spec"]["predictor"]
    container = {"name": "kserve-container", "image": "kserve/huggingfaceserver:v0.15.0", **predictor["model"]}
    del container["modelFormat"], container["storageUri"]
    pod_obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hf-5-predictor", "labels": predictor["labels"]},
        "spec": {
            "containers": [container],
            "nodeSelector": predictor["nodeSelector"],
            "tolerations": predictor["tolerations"],
        },
    }
    kubernetes_validate.validate(pod_obj, version, strict=True)
