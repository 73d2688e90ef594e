"""Slices on Kubernetes clusters end to end: a real egs-hub sets slices up on an emulated cluster.

One hub and one emulated cluster ("kc", one 8-GPU node) for the module (the
emulator runs in a thread, as in test_clusters.py); the tests run in order:
a slice with namespaces is set up there, a namespace of another slice is a 409
and an unreachable cluster a 503 with nothing written, members download a
kubeconfig that works there, a GPR moves the quota and records Events, the
webhook route answers AdmissionReviews from the store, deleting the slice
removes what egs-hub created and releases what it adopted, and a slice that
leaves the cluster while it is not registered is removed there once it is back.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
from datetime import UTC, datetime, timedelta

import pytest
import requests
import yaml
from kmock import Server
from kubernetes_asyncio import client, config

from egs_hub.client import EGSClient
from egs_hub.core.requests import ClusterCreate
from egs_hub.service.clusters import Clusters
from egs_hub.service.slice_setup import SliceSetup

from ..k8s.builders import gpu_node, pod
from ..k8s.cluster import KubeCluster
from ..k8s.emulator import ClusterEmulator
from ..k8s.kubeconfig import write_kubeconfig
from ..k8s.test_webhook import patched
from .hub import sqlite_hub, until_status, wait_for
from .stores import store_with_slice
from .test_clusters import CONTEXT, EmulatorThread, closed_port, eventually

ADMISSION = pathlib.Path(__file__).parents[1] / "k8s" / "admission"
SLICE_LABEL = "egs.io/slice"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    directory = tmp_path_factory.mktemp("slices-on-clusters")
    with EmulatorThread() as emulators:
        emulator, kube, path = emulators.cluster(directory, "kc", gpu_node("gpu-1"))
        emulators.run(kube.core.create_namespace({"metadata": {"name": "shared-tools"}}))
        emulators.run(kube.core.create_namespace({"metadata": {"name": "owned", "labels": {SLICE_LABEL: "other"}}}))
        with sqlite_hub(directory) as hub:
            admin = hub.admin()
            admin.post("clusters", {"name": "kc", "kubeconfig": path, "context": CONTEXT}, expect=201)
            member = hub.client(hub.user_token("ml-member"))
            yield {
                "hub": hub,
                "admin": admin,
                "member": member,
                "kube": kube,
                "run": emulators.run,
                "emulator": emulator,
                "dir": directory,
                "kubeconfig": path,
            }


def namespace_labels(world, name: str) -> dict | None:
    found = world["run"](world["kube"].namespace(name))
    return None if found is None else found["metadata"].get("labels") or {}


def quota(world, namespace: str) -> str | None:
    found = world["run"](world["kube"].get("ResourceQuota", namespace, "egs-gpus"))
    return None if found is None else found["spec"]["hard"]["requests.nvidia.com/gpu"]


def events(world, namespace: str) -> list[tuple[str, str, str]]:
    """(type, reason, involved kind) of egs-hub's Events in the namespace, oldest first."""

    async def listed():
        items = (await world["kube"].core.list_namespaced_event(namespace)).items
        return [i for i in items if i.source and i.source.component == "egs-hub"]

    found = sorted(world["run"](listed()), key=lambda e: (e.first_timestamp, e.metadata.name))
    return [(e.type, e.reason, e.involved_object.kind) for e in found]


def test_a_slice_with_namespaces_is_set_up_on_its_cluster(world):
    admin, kube, run = world["admin"], world["kube"], world["run"]
    body = {"name": "ml", "members": ["ml-member"], "namespaces": {"kc": ["ml-home", "shared-tools"]}}
    created = admin.post("slices", body, expect=201)
    assert created["namespaces"] == {"kc": ["ml-home", "shared-tools"]}  # in the order given: home first
    assert namespace_labels(world, "ml-home")[SLICE_LABEL] == "ml"
    assert namespace_labels(world, "shared-tools")[SLICE_LABEL] == "ml"
    assert run(kube.names("ServiceAccount", "ml-home")) == ["egs-ml"]
    assert run(kube.names("ServiceAccount", "shared-tools")) == []
    for namespace in ("ml-home", "shared-tools"):
        assert run(kube.names("Role", namespace)) == ["egs-deployment", "egs-reader"]
        assert run(kube.names("RoleBinding", namespace)) == ["egs-deployment", "egs-reader"]
        # It holds no GPU there: no quota object, so its GPU pods wait (Pending) rather than being refused.
        assert quota(world, namespace) is None
    admin.post("slices", {"name": "bare"}, expect=201)  # no namespaces anywhere


def test_admins_see_the_role_templates_every_slice_namespace_gets(world):
    templates = world["admin"].get("role-templates", expect=200)["role_templates"]
    assert [(t["name"], t["builtin"]) for t in templates] == [("deployment", True), ("reader", True)]
    assert templates[0]["subjects"] == [
        {"kind": "ServiceAccount", "name": "{service_account}", "namespace": "{service_account_namespace}"}
    ]
    assert world["member"].get("role-templates", expect=403)["message"].startswith("this needs the JupyterHub scope")


def test_a_namespace_of_another_slice_is_a_conflict_and_nothing_is_written(world):
    admin = world["admin"]
    body = {"name": "ml2", "members": ["ml2-member"], "namespaces": {"kc": ["ml2-home", "owned"]}}
    refused = admin.post("slices", body, expect=409)
    assert "cluster kc" in refused["message"] and "namespace owned belongs to slice other" in refused["message"]
    admin.get("slices/ml2", expect=404)
    assert namespace_labels(world, "ml2-home") is None
    assert namespace_labels(world, "owned") == {SLICE_LABEL: "other"}
    assert all(g["name"] != "ml2" for g in world["hub"].hub_api("GET", "groups"))
    # Moving an existing slice onto it is refused the same way, and the slice keeps what it had.
    refused = admin.call("PATCH", "slices/ml", {"namespaces": {"kc": ["ml-home", "owned"]}}, expect=409)
    assert "namespace owned belongs to slice other" in refused["message"]
    assert admin.get("slices/ml")["namespaces"] == {"kc": ["ml-home", "shared-tools"]}
    assert namespace_labels(world, "shared-tools")[SLICE_LABEL] == "ml"


def test_namespaces_on_an_unknown_or_unreachable_cluster_are_refused(world):
    admin = world["admin"]
    refused = admin.post("slices", {"name": "ml3", "namespaces": {"nowhere": ["a"]}}, expect=400)
    assert refused["field"] == "namespaces.nowhere" and "no cluster named 'nowhere'" in refused["message"]
    gone = write_kubeconfig(world["dir"] / "gone.kubeconfig", f"http://127.0.0.1:{closed_port()}", "t", CONTEXT)
    admin.post("clusters", {"name": "gone", "kubeconfig": str(gone), "context": CONTEXT}, expect=201)
    refused = admin.post("slices", {"name": "ml3", "namespaces": {"gone": ["a"], "kc": ["ml3-home"]}}, expect=503)
    assert "cluster gone" in refused["message"] and "nothing was changed" in refused["message"]
    admin.get("slices/ml3", expect=404)
    assert namespace_labels(world, "ml3-home") is None
    admin.call("DELETE", "clusters/gone", expect=204)


async def _list_pods(text: str, namespace: str) -> list[str]:
    configuration = client.Configuration()
    await config.load_kube_config_from_dict(yaml.safe_load(text), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        return [p.metadata.name for p in (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items]


def test_members_download_a_kubeconfig_that_works_in_the_slice_namespaces(world):
    member, kube, run = world["member"], world["kube"], world["run"]
    run(kube.add_pod("ml-home", pod("trainer")))
    answer = member.get("slices/ml/kubeconfig?cluster=kc&expiration=600", expect=200)
    assert (answer["slice"], answer["cluster"], answer["namespace"]) == ("ml", "kc", "ml-home")
    assert answer["expires_at"].endswith("Z")
    assert run(_list_pods(answer["kubeconfig"], "ml-home")) == ["trainer"]
    with pytest.raises(client.ApiException) as refused:
        run(_list_pods(answer["kubeconfig"], "owned"))
    assert refused.value.status == 403
    # the default lifetime is a day; the Python client asks the same
    hub = world["hub"]
    with EGSClient(hub.api, hub.user_token("ml-member")) as egs:
        made = egs.slice_kubeconfig("ml", "kc")
        assert timedelta(hours=23) < made.expires_at - datetime.now(UTC) <= timedelta(days=1)
        assert (made.namespace, yaml.safe_load(made.kubeconfig)["current-context"]) == ("ml-home", "ml@kc")
        short = egs.slice_kubeconfig("ml", "kc", expiration=timedelta(minutes=10))
        assert short.expires_at - datetime.now(UTC) <= timedelta(minutes=10)


@pytest.mark.parametrize(
    ("path", "who", "status", "field"),
    [
        ("slices/ml/kubeconfig", "member", 400, "cluster"),
        ("slices/ml/kubeconfig?cluster=nowhere", "member", 400, "cluster"),
        ("slices/ml/kubeconfig?cluster=local", "member", 400, "cluster"),
        ("slices/ml/kubeconfig?cluster=kc&expiration=599", "member", 400, "expiration"),
        ("slices/ml/kubeconfig?cluster=kc&expiration=1d", "member", 400, "expiration"),
        ("slices/ml/kubeconfig?cluster=kc", "stranger", 404, None),
        ("slices/nope/kubeconfig?cluster=kc", "admin", 404, None),
        ("slices/bare/kubeconfig?cluster=kc", "admin", 409, None),
    ],
)
def test_kubeconfig_errors(world, path, who, status, field):
    caller = world["hub"].client(world["hub"].user_token("stranger")) if who == "stranger" else world[who]
    answer = caller.get(path, expect=status)
    assert answer.get("field") == field


def test_a_gpr_moves_the_quota_and_records_events(world):
    admin = world["admin"]
    gpr = admin.post("gprs", {"slice": "ml", "gpus": 2, "duration": 4, "cluster": "kc"}, expect=201)
    gpr = until_status(admin, gpr["id"], "provisioned")
    assert quota(world, "ml-home") == "2" and quota(world, "shared-tools") == "2"
    wait_for(lambda: ("Normal", "Provisioned", "Namespace") in events(world, "ml-home"), 10, "a Provisioned Event")
    until_status(admin, gpr["id"], "complete", timeout=20)
    wait_for(lambda: quota(world, "ml-home") is None, 10, "the quota to go once the node left")
    for namespace in ("ml-home", "shared-tools"):
        wait_for(lambda ns=namespace: len(events(world, ns)) == 3, 10, f"three Events in {namespace}")
        assert events(world, namespace) == [
            ("Normal", "Provisioned", "Namespace"),
            ("Normal", "WindowEnded", "Namespace"),
            ("Normal", "Released", "Namespace"),
        ]


def review(name: str, namespace: str) -> dict:
    document = json.loads((ADMISSION / name).read_text())
    document["request"]["namespace"] = namespace
    document["request"]["object"]["metadata"]["namespace"] = namespace
    return document


def test_the_webhook_route_answers_from_the_store(world):
    url = f"{world['hub'].url}/services/egs/webhooks/pods/"
    answer = requests.post(url + "kc", json=review("gpu-deployment-pod.json", "shared-tools"), timeout=10)
    assert answer.status_code == 200, answer.text
    sent = review("gpu-deployment-pod.json", "shared-tools")
    spec = patched(sent, answer.json())["spec"]
    assert spec["nodeSelector"][SLICE_LABEL] == "ml"
    assert {"key": SLICE_LABEL, "operator": "Equal", "value": "ml", "effect": "NoSchedule"} in spec["tolerations"]
    # The same namespace name on another cluster is not the slice's; nor is a namespace of no slice.
    untouched = requests.post(url + "local", json=review("gpu-deployment-pod.json", "shared-tools"), timeout=10)
    assert "patch" not in untouched.json()["response"]
    missing = requests.post(url + "nowhere", json=review("gpu-deployment-pod.json", "shared-tools"), timeout=10)
    assert missing.status_code == 404 and "no cluster named 'nowhere'" in missing.json()["message"]
    bad = requests.post(url + "kc", data=b"not json", timeout=10)
    assert bad.status_code == 400 and bad.json()["status"] == 400
    wrong = requests.post(url + "kc", json={"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, timeout=10)
    assert wrong.status_code == 400 and "no request.uid" in wrong.json()["message"]


def test_a_gpu_pod_the_slice_has_no_gpus_for_files_a_gpr_when_its_policy_says_so(world):
    """The slice's auto_gpr: the webhook files the GPR (over auto-approval here, so it waits), with an Event
    on the pod's namespace; the same pod made again waits for it instead of filing another."""
    admin, url = world["admin"], f"{world['hub'].url}/services/egs/webhooks/pods/kc"
    admin.post("templates", {"name": "kc-one", "gpus": 1, "duration": "10m", "cluster": "kc"}, expect=201)
    admin.call("PATCH", "slices/ml", {"policy": {"auto_gpr": "kc-one", "auto_approve_max_gpus": 1}}, expect=200)
    answer = requests.post(url, json=review("gpu-deployment-pod.json", "ml-home"), timeout=10)
    assert "patch" in answer.json()["response"]  # admitted onto the slice's nodes at once, as before

    def filed():
        return admin.get("gprs?slice=ml&status=pending-approval")["gprs"]

    (gpr,) = wait_for(filed, 10, "the GPR the pod's start files")
    assert (gpr["requested_by"], gpr["template"], gpr["gpus"], gpr["cluster"]) == (
        "kubernetes:kc/ml-home",
        "kc-one",
        2,
        "kc",
    )
    assert gpr["name"] == "auto: pod ml-home/trainer-7d9f8c6b5-*"
    wait_for(lambda: ("Normal", "GPRFiled", "Namespace") in events(world, "ml-home"), 10, "a GPRFiled Event")

    requests.post(url, json=review("gpu-deployment-pod.json", "ml-home"), timeout=10)
    wait_for(lambda: ("Normal", "GPRWaiting", "Namespace") in events(world, "ml-home"), 10, "a GPRWaiting Event")
    assert [g["id"] for g in filed()] == [gpr["id"]]
    # A CPU pod files nothing.
    requests.post(url, json=review("cpu-pod.json", "ml-home"), timeout=10)
    admin.call("DELETE", f"gprs/{gpr['id']}", expect=200)
    admin.call("PATCH", "slices/ml", {"policy": {"auto_gpr": None}}, expect=200)
    admin.call("DELETE", "templates/kc-one", expect=204)
    assert [g["id"] for g in admin.get("gprs?slice=ml")["gprs"] if g["status"] not in ("cancelled", "complete")] == []


def test_members_see_the_home_volumes_their_servers_keep_in_the_slice(world):
    claim = {
        "metadata": {
            "name": "claim-ml-member",
            "labels": {"component": "singleuser-storage", SLICE_LABEL: "ml"},
            "annotations": {"hub.jupyter.org/username": "ml-member"},
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    }
    world["run"](world["kube"].core.create_namespaced_persistent_volume_claim("ml-home", claim))
    listed = world["member"].get("slices/ml/volumes", expect=200)
    assert listed == {
        "volumes": [
            {
                "user": "ml-member",
                "server": "",
                "cluster": "kc",
                "namespace": "ml-home",
                "name": "claim-ml-member",
                "size": "10Gi",
                "storage_class": None,
                "phase": None,
            }
        ],
        "unavailable": {},
    }
    outsider = world["hub"].client(world["hub"].user_token("not-in-ml"))
    outsider.get("slices/ml/volumes", expect=404)  # another workspace is as if it did not exist


def test_deleting_the_slice_removes_what_egs_hub_created_and_releases_what_it_adopted(world):
    admin, kube, run = world["admin"], world["kube"], world["run"]
    admin.call("DELETE", "slices/ml", expect=204)
    assert namespace_labels(world, "ml-home") is None
    assert SLICE_LABEL not in namespace_labels(world, "shared-tools")
    assert run(kube.names("Role", "shared-tools")) == []
    assert run(kube.names("RoleBinding", "shared-tools")) == []


def test_what_slices_left_on_an_unregistered_cluster_goes_once_it_is_registered_again(world):
    admin, kube, run = world["admin"], world["kube"], world["run"]
    run(kube.core.create_namespace({"metadata": {"name": "team-tools"}}))
    admin.post("slices", {"name": "gone", "namespaces": {"kc": ["gone-home", "team-tools"]}}, expect=201)
    admin.post("slices", {"name": "kept", "namespaces": {"kc": ["kept-home"]}}, expect=201)
    admin.call("DELETE", "clusters/kc", expect=204)
    admin.call("DELETE", "slices/gone", expect=204)
    assert admin.call("PATCH", "slices/kept", {"namespaces": {}}, expect=200)["namespaces"] == {}
    # Nothing could be changed on a cluster egs-hub no longer knows ...
    assert namespace_labels(world, "gone-home")[SLICE_LABEL] == "gone"
    assert namespace_labels(world, "team-tools")[SLICE_LABEL] == "gone"
    assert namespace_labels(world, "kept-home")[SLICE_LABEL] == "kept"
    # ... and once it is registered again, what they left there goes: created namespaces deleted, adopted released.
    admin.post("clusters", {"name": "kc", "kubeconfig": world["kubeconfig"], "context": CONTEXT}, expect=201)
    wait_for(
        lambda: namespace_labels(world, "gone-home") is None and namespace_labels(world, "kept-home") is None,
        30,
        "the leftover namespaces to be deleted",
    )
    assert SLICE_LABEL not in namespace_labels(world, "team-tools")
    assert run(kube.names("Role", "team-tools")) == []
    assert run(kube.names("RoleBinding", "team-tools")) == []
    assert admin.get("slices/kept")["namespaces"] == {}  # the slice itself stays as it was


# In-process: the setup loop sets slices up at start and again when their cluster comes back.


async def test_slices_are_set_up_at_start_and_again_after_an_outage(tmp_path):
    sessions = store_with_slice(tmp_path, "team", {"emu": ("team-home",), "local": ("team-pods",)})
    async with ClusterEmulator() as emulator, Server(emulator):
        path = write_kubeconfig(tmp_path / "kc", str(emulator.url).rstrip("/"), emulator.token, CONTEXT)
        async with KubeCluster(str(path), CONTEXT, emulator=emulator) as kube:
            registry = Clusters(sessions, lambda: datetime.now(UTC), retry_interval=0.2, request_timeout=2)
            setup = SliceSetup(sessions, registry.backends, retry_interval=0.2)
            registry.on_available = setup.forget
            spec = ClusterCreate(name="emu", kubeconfig=str(path), context=CONTEXT)
            await registry.add_kubernetes([(spec, "config")])
            registry.start()
            setup.start()
            try:
                await eventually(lambda: ("team", "emu") in setup.applied)
                assert await kube.names("ServiceAccount", "team-home") == ["egs-team"]
                assert list(setup.applied) == [("team", "emu")]  # "local" is no slice host: its namespaces are data
                # Lost behind egs-hub's back: the loop sets up only what it has not applied (nothing changed) ...
                await kube.core.delete_namespace("team-home")
                await asyncio.sleep(0.5)
                assert await kube.namespace("team-home") is None
                # ... but a cluster back from an outage gets every slice set up again.
                await emulator.set_outage(True)
                await eventually(lambda: registry.states["emu"].health == "unavailable")
                await emulator.set_outage(False)
                await eventually(lambda: registry.states["emu"].health == "ok")
                await eventually(lambda: ("team", "emu") in setup.applied)
                assert (await kube.namespace("team-home"))["metadata"]["labels"][SLICE_LABEL] == "team"
            finally:
                await setup.stop()
                await registry.close()
    sessions.kw["bind"].dispose()
