"""The emulator as the real kubernetes_asyncio client sees it: selectors, patches, watch, eviction, errors."""

from __future__ import annotations

import copy

import pytest
from kmock import Server
from kubernetes_asyncio import client, watch

from .builders import gpu_node, pod, pod_disruption_budget
from .cluster import KubeCluster, status_of
from .emulator import ClusterEmulator
from .kubeconfig import write_kubeconfig

KSERVE = ("serving.kserve.io", "v1beta1")


async def watch_events(core: client.CoreV1Api, count: int, **options) -> list[tuple[str, str]]:
    """(type, name) of the first ``count`` node events; fewer if the server ends the watch after 1 s."""
    seen = []
    async with watch.Watch().stream(core.list_node, timeout_seconds=1, **options) as stream:
        async for event in stream:
            seen.append((event["type"], event["raw_object"]["metadata"]["name"]))
            if len(seen) == count:
                break
    return seen


async def test_list_with_label_and_field_selectors(cluster):
    await cluster.add_node(gpu_node("a"))
    await cluster.add_node(gpu_node("b", slice="team-a"))
    await cluster.add_node(gpu_node("c", slice=None))
    names = lambda listed: [n.metadata.name for n in listed.items]  # noqa: E731
    assert names(await cluster.core.list_node(label_selector="egs.io/slice")) == ["a", "b"]
    assert names(await cluster.core.list_node(label_selector="egs.io/slice!=free")) == ["b", "c"]
    assert names(await cluster.core.list_node(label_selector="egs.io/slice in (team-a, x),!egs.io/gpr")) == ["b"]
    assert names(await cluster.core.list_node(field_selector="metadata.name!=a")) == ["b", "c"]
    with pytest.raises(client.ApiException) as bad:
        await cluster.core.list_node(label_selector="a in b")
    assert bad.value.status == 400


async def test_namespaces_are_cluster_scoped_and_selectable(cluster):
    mine = await cluster.add_namespace("team-a", slice="team-a")
    await cluster.add_namespace("other")
    listed = await cluster.core.list_namespace(label_selector="egs.io/slice=team-a")
    assert [n.metadata.name for n in listed.items] == [mine]
    assert (await cluster.core.read_namespace(mine)).metadata.labels == {"egs.io/slice": "team-a"}


async def test_objects_get_metadata_and_namespaces_must_exist(cluster):
    created = await cluster.add_node(gpu_node("a"))
    assert created["metadata"]["uid"] and created["metadata"]["creationTimestamp"]
    with pytest.raises(client.ApiException) as exists:
        await cluster.core.create_node(gpu_node("a"))
    assert exists.value.status == 409
    with pytest.raises(client.ApiException) as missing:
        await cluster.core.create_namespaced_pod("nowhere", pod("p"))
    assert missing.value.status == 404
    namespace = await cluster.add_namespace("team-a")
    made = await cluster.core.create_namespaced_pod(namespace, {**pod(""), "metadata": {"generateName": "job-"}})
    assert made.metadata.name.startswith("job-") and made.metadata.namespace == namespace


async def test_patches_as_the_client_sends_them(cluster):
    await cluster.add_node(gpu_node("a"))
    await cluster.patch_node("a", {"metadata": {"labels": {"egs.io/slice": "team-a", "kubernetes.io/hostname": None}}})
    labels = (await cluster.node("a"))["metadata"]["labels"]
    assert labels["egs.io/slice"] == "team-a" and "kubernetes.io/hostname" not in labels
    await cluster.patch_node("a", [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    assert (await cluster.node("a"))["spec"]["unschedulable"] is True
    # the main resource never changes status, the status subresource changes nothing else
    await cluster.patch_node("a", {"status": {"allocatable": {"nvidia.com/gpu": "1"}}})
    assert (await cluster.node("a"))["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    await cluster.patch_node_status("a", {"conditions": [{"type": "Ready", "status": "False"}]})
    node = await cluster.node("a")
    assert node["status"]["conditions"][0]["status"] == "False" and node["spec"]["unschedulable"] is True


async def test_watch_from_a_resource_version_and_selector_edges(cluster, emulator):
    await cluster.add_node(gpu_node("a"))
    listed = await cluster.core.list_node(label_selector="egs.io/slice=free")
    await cluster.add_node(gpu_node("b"))
    await cluster.patch_node("a", {"metadata": {"labels": {"egs.io/slice": "team-a"}}})
    await cluster.delete_node("b")
    since = listed.metadata.resource_version
    # add_node creates, then sets the status: two events for b
    assert await watch_events(cluster.core, 4, resource_version=since) == [
        ("ADDED", "b"),
        ("MODIFIED", "b"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    # a node leaving the selector is DELETED for that watch
    assert await watch_events(cluster.core, 4, resource_version=since, label_selector="egs.io/slice=free") == [
        ("ADDED", "b"),
        ("MODIFIED", "b"),
        ("DELETED", "a"),
        ("DELETED", "b"),
    ]
    assert await watch_events(cluster.core, 1) == [("ADDED", "a")]
    emulator.compact()
    with pytest.raises(client.ApiException) as gone:
        await watch_events(cluster.core, 1, resource_version=since)
    assert gone.value.status == 410


async def test_eviction_respects_disruption_budgets(cluster):
    await cluster.add_node(gpu_node("a"))
    namespace = await cluster.add_namespace("team-a")
    await cluster.add_pod(namespace, pod("free-to-go", "a"))
    await cluster.add_pod(namespace, pod("guarded", "a", labels={"app": "db"}))
    await cluster.add_budget(namespace, pod_disruption_budget("db", {"app": "db"}))
    body = lambda name: {"metadata": {"name": name, "namespace": namespace}}  # noqa: E731
    await cluster.core.create_namespaced_pod_eviction("free-to-go", namespace, body("free-to-go"))
    with pytest.raises(client.ApiException) as refused:
        await cluster.core.create_namespaced_pod_eviction("guarded", namespace, body("guarded"))
    assert refused.value.status == 429
    assert await cluster.pod_names(namespace) == ["guarded"]
    on_node = await cluster.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=a")
    assert [p.metadata.name for p in on_node.items] == ["guarded"]


async def test_deleting_a_namespace_deletes_its_pods(cluster, emulator):
    namespace = await cluster.add_namespace("team-a")
    await cluster.add_pod(namespace, pod("p"))
    await cluster.core.delete_namespace(namespace)
    assert emulator.get(emulator.resource("v1/pods"), namespace, "p") is None
    assert emulator.get(emulator.resource("v1/namespaces"), None, namespace) is None


async def test_wrong_token_is_unauthorized(cluster, emulator):
    emulator.token = "another"
    with pytest.raises(client.ApiException) as denied:
        await cluster.core.list_node()
    assert denied.value.status == 401


async def test_jobs_have_a_status_subresource(cluster):
    namespace = await cluster.add_namespace("checks")
    batch = client.BatchV1Api(cluster.api)
    body = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": []}}}, "status": {"active": 1}}
    await batch.create_namespaced_job(namespace, body)
    done = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    await batch.patch_namespaced_job("j", namespace, {"status": done})  # the main resource keeps its status
    assert (await batch.read_namespaced_job("j", namespace)).status.conditions is None
    await batch.patch_namespaced_job_status("j", namespace, {"status": done})
    job = await batch.read_namespaced_job("j", namespace)
    assert [c.type for c in job.status.conditions] == ["Complete"] and job.status.succeeded == 1
    await batch.delete_namespaced_job("j", namespace, propagation_policy="Background")
    assert (await batch.list_namespaced_job(namespace)).items == []


async def test_volumes_and_storage_classes_are_cluster_scoped(cluster):
    storage = client.StorageV1Api(cluster.api)
    await storage.create_storage_class(
        {"metadata": {"name": "local"}, "provisioner": "x", "volumeBindingMode": "WaitForFirstConsumer"}
    )
    assert (await storage.read_storage_class("local")).volume_binding_mode == "WaitForFirstConsumer"
    volume = {"metadata": {"name": "pv-1", "namespace": "ignored"}, "spec": {"capacity": {"storage": "1Gi"}}}
    await cluster.core.create_persistent_volume(volume)
    read = await cluster.core.read_persistent_volume("pv-1")
    assert read.metadata.namespace is None and read.spec.capacity == {"storage": "1Gi"}
    await cluster.core.patch_persistent_volume_status("pv-1", {"status": {"phase": "Bound"}})
    assert [v.status.phase for v in (await cluster.core.list_persistent_volume()).items] == ["Bound"]


async def test_a_pod_log_is_the_text_set_served_as_text(cluster, emulator):
    namespace = await cluster.add_namespace("checks")
    await cluster.add_pod(namespace, pod("p"))
    raw = await cluster.core.read_namespaced_pod_log("p", namespace, _preload_content=False)
    assert (raw.status, raw.content_type, await raw.text()) == (200, "text/plain", "")
    emulator.pod_logs[(namespace, "p")] = "one\ntwo\nthree\n"
    assert await cluster.core.read_namespaced_pod_log("p", namespace) == "one\ntwo\nthree\n"
    assert await cluster.core.read_namespaced_pod_log("p", namespace, tail_lines=2) == "two\nthree\n"
    assert await cluster.core.read_namespaced_pod_log("p", namespace, tail_lines=2, limit_bytes=3) == "two"
    with pytest.raises(client.ApiException) as missing:
        await cluster.core.read_namespaced_pod_log("gone", namespace)
    assert missing.value.status == 404


def deployment(name: str, labels: dict, replicas: int = 1) -> dict:
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "main", "image": "vllm"}]}}
    spec = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels}, "spec": spec}


def service(name: str, labels: dict) -> dict:
    spec = {"selector": labels, "ports": [{"port": 80, "targetPort": 8000}], "clusterIP": "10.0.0.7"}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels}, "spec": spec}


async def test_deployments_and_services_are_served(cluster):
    namespace = await cluster.add_namespace("serving")
    await cluster.apps.create_namespaced_deployment(namespace, deployment("llm", {"app": "llm"}))
    await cluster.apps.create_namespaced_deployment(namespace, deployment("other", {"app": "other"}))
    await cluster.core.create_namespaced_service(namespace, service("llm", {"app": "llm"}))
    listed = await cluster.apps.list_namespaced_deployment(namespace, label_selector="app=llm")
    assert [d.metadata.name for d in listed.items] == ["llm"]
    made = await cluster.get("Deployment", namespace, "llm")
    made["spec"]["replicas"] = 2
    await cluster.apps.replace_namespaced_deployment("llm", namespace, made)
    assert (await cluster.get("Deployment", namespace, "llm"))["spec"]["replicas"] == 2
    assert (await cluster.get("Service", namespace, "llm"))["spec"]["clusterIP"] == "10.0.0.7"
    await cluster.apps.delete_namespaced_deployment("llm", namespace)
    await cluster.core.delete_namespaced_service("llm", namespace)
    assert await cluster.get("Deployment", namespace, "llm") is None
    assert await cluster.get("Service", namespace, "llm") is None
    assert [d.metadata.name for d in (await cluster.apps.list_deployment_for_all_namespaces()).items] == ["other"]


async def test_a_deployment_counts_spec_changes_and_its_status_is_set_apart(cluster):
    namespace = await cluster.add_namespace("serving")
    await cluster.apps.create_namespaced_deployment(namespace, deployment("llm", {"app": "llm"}))
    assert (await cluster.get("Deployment", namespace, "llm"))["metadata"]["generation"] == 1
    ready = {"observedGeneration": 1, "replicas": 1, "readyReplicas": 1}
    await cluster.apps.patch_namespaced_deployment("llm", namespace, {"status": ready})  # ignored
    await cluster.apps.patch_namespaced_deployment("llm", namespace, {"metadata": {"labels": {"x": "y"}}})
    made = await cluster.get("Deployment", namespace, "llm")
    assert (made["metadata"]["generation"], made.get("status")) == (1, None)
    await cluster.apps.patch_namespaced_deployment_status("llm", namespace, {"status": ready, "spec": {"replicas": 5}})
    await cluster.apps.patch_namespaced_deployment("llm", namespace, {"spec": {"replicas": 3}})
    made = await cluster.get("Deployment", namespace, "llm")
    assert (made["metadata"]["generation"], made["spec"]["replicas"], made["status"]) == (2, 3, ready)


async def test_an_inference_service_is_a_custom_resource(cluster):
    groups = [g.name for g in (await client.ApisApi(cluster.api).get_api_versions()).groups]
    assert KSERVE[0] in groups
    found = await cluster.custom.get_api_resources(*KSERVE)
    assert [(r.name, r.kind) for r in found.resources if r.name == "inferenceservices"] == [
        ("inferenceservices", "InferenceService")
    ]
    namespace = await cluster.add_namespace("serving")
    body = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llm"},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
    }
    await cluster.custom.create_namespaced_custom_object(*KSERVE, namespace, "inferenceservices", body)
    ready = {"conditions": [{"type": "Ready", "status": "True"}], "url": "http://llm.example"}
    await cluster.custom.patch_namespaced_custom_object_status(
        *KSERVE, namespace, "inferenceservices", "llm", {"status": ready}, _content_type="application/merge-patch+json"
    )
    made = await cluster.custom.get_namespaced_custom_object(*KSERVE, namespace, "inferenceservices", "llm")
    assert (made["metadata"]["generation"], made["spec"], made["status"]) == (1, body["spec"], ready)


async def test_without_kserve_its_api_is_not_there(tmp_path):
    async with ClusterEmulator(kserve=False) as emulator, Server(emulator):
        path = write_kubeconfig(tmp_path / "kubeconfig", str(emulator.url).rstrip("/"), emulator.token, "emulated")
        async with KubeCluster(str(path), "emulated", emulator) as cluster:
            groups = [g.name for g in (await client.ApisApi(cluster.api).get_api_versions()).groups]
            assert "apps" in groups and KSERVE[0] not in groups
            assert await status_of(cluster.custom.get_api_resources(*KSERVE)) == 404
            namespace = await cluster.add_namespace("serving")
            body = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "x"}}
            made = cluster.custom.create_namespaced_custom_object(*KSERVE, namespace, "inferenceservices", body)
            assert await status_of(made) == 404


async def test_a_pod_proxy_answers_the_page_set(cluster, emulator):
    namespace = await cluster.add_namespace("serving")
    await cluster.add_pod(namespace, pod("llm-0"))
    emulator.pod_pages[(namespace, "llm-0", "metrics")] = "vllm:num_requests_running 2\n"
    emulator.pod_pages[(namespace, "llm-0", "v1/models")] = "llm"
    proxy = cluster.core.connect_get_namespaced_pod_proxy_with_path
    raw = await proxy("llm-0:8000", namespace, "metrics", _preload_content=False)
    assert (raw.status, raw.content_type, await raw.text()) == (200, "text/plain", "vllm:num_requests_running 2\n")
    assert await proxy("llm-0", namespace, "v1/models") == "llm"  # the client reads JSON text as a dict
    assert await status_of(proxy("llm-0:8000", namespace, "health")) == 404  # no page set
    assert await status_of(proxy("gone:8000", namespace, "metrics")) == 404
    await emulator.set_outage(True)
    assert await status_of(proxy("llm-0:8000", namespace, "metrics")) == 503
    await emulator.set_outage(False)  # for the cluster's clean-up


async def test_a_pod_proxy_needs_its_own_rbac_rule(cluster, emulator):
    namespace = await cluster.add_namespace("serving")
    await cluster.add_pod(namespace, pod("llm-0"))
    emulator.pod_pages[(namespace, "llm-0", "metrics")] = "up 1\n"
    await cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    role = {"metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    await cluster.rbac.create_namespaced_role(namespace, role)
    subject = {"kind": "ServiceAccount", "name": "reader", "namespace": namespace}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    binding = {"metadata": {"name": "reader"}, "subjects": [subject], "roleRef": ref}
    await cluster.rbac.create_namespaced_role_binding(namespace, binding)
    issued = await cluster.core.create_namespaced_service_account_token("reader", namespace, {"spec": {}})
    configuration = copy.copy(cluster.api.configuration)
    configuration.api_key = {"BearerToken": f"Bearer {issued.status.token}"}
    async with client.ApiClient(configuration) as api:
        proxy = client.CoreV1Api(api).connect_get_namespaced_pod_proxy_with_path
        assert await status_of(proxy("llm-0:8000", namespace, "metrics")) == 403
        role["rules"].append({"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]})
        await cluster.rbac.replace_namespaced_role("reader", namespace, role)
        assert await proxy("llm-0:8000", namespace, "metrics") == "up 1\n"
