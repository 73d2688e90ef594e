"""Issue 45 on Kubernetes: an endpoint's pods run the member's code in the slice's namespace, so they get
no ServiceAccount token (the namespace's default one would be mounted otherwise) and nothing of the
service's Secrets: no secret or projected volume, no variable from a Secret."""

from __future__ import annotations

import pytest

from egs_hub.backends.kubernetes import endpoint_objects as eo
from egs_hub.core.endpoints import EndpointSpec

COMMAND = EndpointSpec(
    slice="team-a", name="files", runtime="command", command=("python3", "-m", "http.server", "{port}"),
    image="python:3.12-slim", env={"GREETING": "hi"},
)  # fmt: skip
VLLM = EndpointSpec(slice="team-a", name="chat", runtime="vllm", model="Qwen/Qwen2.5-0.5B-Instruct")
KSERVE = EndpointSpec(slice="team-a", name="hf", runtime="kserve", model="org/model", health_path="/")
KSERVE_IMAGE = EndpointSpec(slice="team-a", name="own", runtime="kserve", model="m", image="me/server:1")
PLACE = eo.placement("team-a", 7, ("east/gpu-a/gpu0",))


def pod_specs() -> dict[str, dict]:
    """The pod template of every kind of endpoint workload (an InferenceService's predictor is one)."""
    return {
        "command": eo.deployment(COMMAND, 7, "team-a-home", PLACE, "python:3.12-slim")["spec"]["template"]["spec"],
        "vllm": eo.deployment(VLLM, 7, "team-a-home", PLACE, "vllm/vllm-openai:v0.11.0")["spec"]["template"]["spec"],
        "kserve": eo.inference_service(KSERVE, 7, "team-a-home", PLACE)["spec"]["predictor"],
        "kserve-image": eo.inference_service(KSERVE_IMAGE, 7, "team-a-home", PLACE)["spec"]["predictor"],
    }


@pytest.mark.parametrize("kind", pod_specs())
def test_an_endpoint_pod_mounts_no_service_account_token(kind):
    pod = pod_specs()[kind]
    assert pod.get("automountServiceAccountToken") is False
    assert "serviceAccountName" not in pod and "serviceAccount" not in pod


@pytest.mark.parametrize("kind", pod_specs())
def test_an_endpoint_pod_reaches_no_secret(kind):
    pod = pod_specs()[kind]
    for volume in pod.get("volumes", []):
        assert not {"secret", "projected"} & set(volume), volume
    containers = pod.get("containers") or [pod["model"]]
    for container in containers:
        assert "envFrom" not in container
        assert all("valueFrom" not in variable for variable in container.get("env", [])), container["env"]
