"""Inference endpoints on a Kubernetes cluster end to end: a real egs-hub runs an endpoint on an emulated
cluster ("kc", one 8-GPU node; the emulator runs in a thread, as in test_clusters.py).

The test plays the kubelet (a Deployment's ready replicas) and the endpoint's Service: a small HTTP
server on loopback, which the service is configured to reach (``endpoint_service_url``) instead of the
cluster's DNS name. The tests run in order: refusals naming the field; an endpoint's replica GPR
provisioned on the node and its Deployment pinned there behind the Service; ready once the
Deployment is; a request through the hub's proxy answered by the Service; delete removes it all.
"""

from __future__ import annotations

import http.server
import os
import threading

import pytest
import requests

from ..k8s.builders import gpu_node
from .hub import HERE, sqlite_hub, until_status, wait_for
from .test_clusters import CONTEXT, EmulatorThread

NAMESPACE = "ml-home"


class StandIn(http.server.BaseHTTPRequestHandler):
    """The endpoint's Service: answers every GET with the path it was asked for."""

    def do_GET(self) -> None:
        body = f"the cluster answers {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    directory = tmp_path_factory.mktemp("endpoints-kube")
    service = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    config = directory / "endpoints_config.py"
    config.write_text(
        f"load_subconfig({os.path.join(HERE, 'hub_test_config.py')!r})\n"
        f"c.EGSService.endpoint_service_url = 'http://127.0.0.1:{service.server_port}'\n"
    )
    try:
        with EmulatorThread() as emulators:
            emulator, kube, path = emulators.cluster(directory, "kc", gpu_node("gpu-1"))
            with sqlite_hub(directory, config=str(config)) as hub:
                admin = hub.admin()
                admin.post("clusters", {"name": "kc", "kubeconfig": path, "context": CONTEXT}, expect=201)
                body = {"name": "ml", "members": ["ml-member"], "namespaces": {"kc": [NAMESPACE]}}
                admin.post("slices", body, expect=201)
                admin.post("slices", {"name": "bare", "members": ["ml-member"]}, expect=201)
                token = hub.user_token("ml-member")
                yield {"hub": hub, "admin": admin, "member": hub.client(token), "token": token, "kube": kube,
                       "run": emulators.run}  # fmt: skip
            # The stopped service's watches are still open on the emulator (aiohttp does not cancel a
            # handler whose client left) until a write wakes them: an outage ends them all.
            emulators.run(emulator.set_outage(True))
            emulators.run(emulator.set_outage(False))
    finally:
        service.shutdown()


def endpoint(world, name: str) -> dict:
    return world["member"].get(f"endpoints/ml/{name}", expect=200)


def test_what_a_cluster_cannot_run_is_refused_naming_the_field(world):
    member = world["member"]
    body = {"slice": "ml", "name": "x", "cluster": "kc", "gpus": 1}
    no_image = member.post("endpoints", {**body, "runtime": "command", "command": ["srv", "{port}"]}, expect=422)
    assert no_image["field"] == "image" and "kc" in no_image["message"]
    path = member.post("endpoints", {**body, "runtime": "vllm", "model": "./my-model"}, expect=422)
    assert path["field"] == "model" and "this host only" in path["message"]
    bare = member.post("endpoints", {**body, "slice": "bare", "runtime": "vllm", "model": "org/m"}, expect=422)
    assert bare["field"] == "slice" and "no namespace on cluster kc" in bare["message"]
    elsewhere = member.post(
        "endpoints", {**body, "cluster": "nowhere", "runtime": "vllm", "model": "org/m"}, expect=422
    )
    assert elsewhere["field"] == "cluster"
    assert member.get("endpoints?slice=ml", expect=200)["endpoints"] == []


def test_an_endpoint_runs_as_a_deployment_on_its_replica_gpr_node(world):
    member, run, kube = world["member"], world["run"], world["kube"]
    body = {"slice": "ml", "name": "chat", "runtime": "vllm", "model": "org/m", "gpus": 1, "cluster": "kc"}
    body["min_replicas"] = 1
    member.post("endpoints", body, expect=202)
    (gpr_id,) = wait_for(lambda: endpoint(world, "chat")["gprs"], 30, "the replica's GPR")
    until_status(world["admin"], gpr_id, "provisioned", timeout=30)
    node = run(kube.node("gpu-1"))
    assert node["metadata"]["labels"]["egs.io/gpr"] == str(gpr_id)
    name = f"ep-chat-{gpr_id}"
    deployment = wait_for(lambda: run(kube.get("Deployment", NAMESPACE, name)), 30, "the replica's Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"egs.io/gpr": str(gpr_id)}
    assert pod["containers"][0]["image"] == "vllm/vllm-openai:v0.11.0"
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert run(kube.get("Service", NAMESPACE, "ep-chat")) is not None
    seen = endpoint(world, "chat")
    assert seen["status"] == "starting" and seen["cluster"] == "kc"


def test_it_is_ready_once_its_deployment_is_and_answers_through_the_hub(world):
    run, kube = world["run"], world["kube"]
    (gpr_id,) = endpoint(world, "chat")["gprs"]
    ready = {"status": {"readyReplicas": 1, "replicas": 1}}
    run(kube.apps.patch_namespaced_deployment_status(f"ep-chat-{gpr_id}", NAMESPACE, ready))
    wait_for(lambda: endpoint(world, "chat")["status"] == "ready", 30, "the endpoint to be ready")
    url = f"{world['hub'].url}/services/egs/endpoints/ml/chat/v1/models"
    answer = requests.get(url, headers={"Authorization": f"token {world['token']}"}, timeout=30)
    assert answer.status_code == 200 and answer.text == "the cluster answers /v1/models"
    assert requests.get(url, timeout=30).status_code == 401


def test_deleting_it_removes_its_objects_and_ends_its_gpr(world):
    run, kube = world["run"], world["kube"]
    (gpr_id,) = endpoint(world, "chat")["gprs"]
    world["member"].call("DELETE", "endpoints/ml/chat", expect=204)
    wait_for(lambda: run(kube.get("Deployment", NAMESPACE, f"ep-chat-{gpr_id}")) is None, 30, "the Deployment gone")
    wait_for(lambda: run(kube.get("Service", NAMESPACE, "ep-chat")) is None, 30, "the Service gone")
    gpr = world["admin"].get(f"gprs/{gpr_id}", expect=200)
    assert gpr["status"] in ("releasing", "complete", "released")
