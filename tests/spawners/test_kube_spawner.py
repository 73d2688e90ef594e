"""SliceKubeSpawner: KubeSpawner's own code against the Kubernetes API emulator, placed by the EGS service.

The cluster is tests/k8s's emulator served over HTTP; KubeSpawner reaches it
through its usual global client configuration (``$KUBECONFIG``) and runs its
real pod and event reflectors (list + watch with label and field selectors).
No kubelet exists, so the test plays one: it sets the pod's status to Running
with an IP through the status subresource, and posts the Events a scheduler would.

The EGS service is ``FakeEGS``, an HTTP test double of the REST API v1
endpoints the spawner calls (``GET slices``, ``GET slices/{name}``, ``PUT`` and
``DELETE servers/{user}[/{server}]``, ``GET gprs?slice=&status=queued``), served
by a real tornado server on loopback, so the spawner's HTTP client, URLs and
error handling are what is tested.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from kmock import Server
from kubernetes_asyncio.config import kube_config
from kubespawner import KubeSpawner
from kubespawner.clients import load_config
from traitlets import TraitError

from egs_hub.spawners import SliceKubeSpawner
from egs_hub.spawners.kube import Placement, next_gpr_notice, requested_gpus

from ..k8s.cluster import KubeCluster
from ..k8s.emulator import PODS, PVCS, ClusterEmulator
from ..k8s.kubeconfig import write_kubeconfig
from .fake_egs import TOKEN, FakeEGS, Slice, serve_fake_egs

CLUSTER = "east"
POD_IP = "10.1.2.3"
TOLERATION = {"key": "egs.io/slice", "operator": "Equal", "value": "a", "effect": "NoSchedule"}


@pytest.fixture
async def egs() -> AsyncIterator[FakeEGS]:
    async with serve_fake_egs() as fake:
        yield fake


@pytest.fixture
async def emulator() -> AsyncIterator[ClusterEmulator]:
    async with ClusterEmulator() as emulator, Server(emulator):
        yield emulator


@pytest.fixture
async def cluster(emulator: ClusterEmulator, tmp_path, monkeypatch) -> AsyncIterator[KubeCluster]:
    """The emulator as KubeSpawner finds it ($KUBECONFIG), and a client for the test; reflectors stopped after."""
    path = write_kubeconfig(tmp_path / "kubeconfig", str(emulator.url).rstrip("/"), emulator.token, "emulated")
    # $KUBECONFIG as kubernetes_asyncio read it at import (the hub's environment when it started).
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    load_config.cache_clear()  # KubeSpawner loads its global client configuration once per process
    async with KubeCluster(str(path), "emulated", emulator=emulator) as cluster:
        yield cluster
        await KubeSpawner._stop_all_reflectors()
    # KubeSpawner's shared clients close when their keeper task is cancelled (JupyterHub does so at shutdown).
    keepers = [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "close_client_task"]
    for task in keepers:
        task.cancel()
    await asyncio.gather(*keepers)


def make_spawner(
    egs: FakeEGS,
    emulator: ClusterEmulator,
    groups: tuple[str, ...] = ("group-a",),
    name: str = "",
    **traits,
) -> SliceKubeSpawner:
    """alice's spawner (in hub ``groups``), with just enough hub around it to build a pod."""
    user = SimpleNamespace(
        name="alice", id=7, escaped_name="alice", url="/user/alice/", groups=[SimpleNamespace(name=g) for g in groups]
    )
    hub = SimpleNamespace(
        public_host="", api_url="http://hub:8081/hub/api", base_url="/hub/", url="http://hub:8081/hub/"
    )
    orm_spawner = SimpleNamespace(name=name, display_name=name, server=None)
    traits = {
        "k8s_api_host": str(emulator.url).rstrip("/"),
        "egs_api_url": egs.url,
        "egs_api_token": TOKEN,
        "egs_cluster": CLUSTER,
        "namespace": "hub",
        "image": "quay.io/jupyter/base-notebook:latest",
        "start_timeout": 20,
        **traits,
    }
    return SliceKubeSpawner(user=user, hub=hub, orm_spawner=orm_spawner, **traits)


async def created_pod(emulator: ClusterEmulator, namespace: str, name: str) -> dict:
    for _ in range(400):
        pod = emulator.get(PODS, namespace, name)
        if pod is not None:
            return pod
        await asyncio.sleep(0.025)
    raise AssertionError(f"pod {namespace}/{name} was not created")


async def run_pod(cluster: KubeCluster, namespace: str, name: str) -> None:
    """What the kubelet would write once the notebook container is up."""
    status = {
        "phase": "Running",
        "podIP": POD_IP,
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "notebook",
                "ready": True,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
                "state": {"running": {}},
            }
        ],
    }
    await cluster.core.patch_namespaced_pod_status(name, namespace, {"status": status})


async def messages(spawner: SliceKubeSpawner) -> list[str]:
    return [event["message"] async for event in spawner.progress()]


def container(pod: dict) -> dict:
    (notebook,) = pod["spec"]["containers"]
    return notebook


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container(pod)["env"]}


# --- start and stop against the emulator ------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "want_limit", "want_note"),
    [("1", "1", ""), ("4", "2", " (asked 4; the slice holds 2 there)")],
    ids=["as asked", "capped at what the slice holds"],
)
async def test_with_a_provisioned_gpr_the_pod_gets_the_slice_gpus_and_stop_forgets_it(
    egs, emulator, cluster, asked, want_limit, want_note
):
    namespace = await cluster.add_namespace("team-a", slice="a")
    egs.slices = [
        Slice(
            "a",
            {"alice"},
            namespaces={CLUSTER: [namespace, "team-a-extra"], "west": ["team-a"]},
            gpus=["east/gpu-1/gpu0", "east/gpu-1/gpu1", "west/gpu-9/gpu0", "GPU-1c0a-local"],
            gprs=[3, 5],
        )
    ]
    spawner = make_spawner(egs, emulator, name="gpu", user_options={"slice": "a", "gpus": asked})

    started = spawner.start()
    progress = asyncio.create_task(messages(spawner))
    pod = await created_pod(emulator, namespace, "jupyter-alice--gpu")
    assert pod["metadata"]["labels"]["egs.io/slice"] == "a"
    assert pod["metadata"]["labels"]["component"] == "singleuser-server"
    assert container(pod)["resources"]["limits"] == {"nvidia.com/gpu": want_limit}
    assert pod["spec"]["nodeSelector"] == {"egs.io/slice": "a"}
    assert pod["spec"]["tolerations"] == [TOLERATION]
    env = env_of(pod)
    assert (env["EGS_SLICE"], env["EGS_GPRS"], env["EGS_API_URL"]) == ("a", "3,5", egs.url)
    assert "CUDA_VISIBLE_DEVICES" not in env  # the device plugin chooses the GPUs

    await run_pod(cluster, namespace, "jupyter-alice--gpu")
    assert await asyncio.wait_for(started, 15) == f"http://{POD_IP}:8888"
    notices = await asyncio.wait_for(progress, 5)
    assert (
        notices[0]
        == f"Starting in slice a (namespace {namespace} on cluster east) with {want_limit} GPU(s){want_note}."
    )
    assert ("PUT", "servers/alice/gpu", {"slice": "a", "gpus": int(asked), "cluster": CLUSTER}) in egs.requests
    assert spawner.get_state()["namespace"] == namespace  # a restarted hub finds the pod there

    await asyncio.wait_for(spawner.stop(), 15)
    assert emulator.get(PODS, namespace, "jupyter-alice--gpu") is None
    assert egs.requests[-1] == ("DELETE", "servers/alice/gpu", None)


async def test_with_mig_instances_held_the_pod_asks_for_them_on_the_share_nodes(egs, emulator, cluster):
    """A slice holding two 1g.10gb instances and a share there (no whole GPU): the pod asks for the
    instances, which it holds most of, on the share nodes where the slice holds units."""
    namespace = await cluster.add_namespace("team-a", slice="a")
    held = ["east/mig-a/mig-1g.10gb-0", "east/mig-a/mig-1g.10gb-4", "east/ts-a/gpu0::1"]
    egs.slices = [Slice("a", {"alice"}, namespaces={CLUSTER: [namespace]}, gpus=held, gprs=[4])]
    configured = {"nvidia.com/gpu": "8", "nvidia.com/mig-3g.40gb": "1", "example.com/fpga": "1"}
    spawner = make_spawner(egs, emulator, user_options={"slice": "a", "gpus": "4"}, extra_resource_limits=configured)

    started = spawner.start()
    progress = asyncio.create_task(messages(spawner))
    pod = await created_pod(emulator, namespace, "jupyter-alice")
    assert container(pod)["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "2", "example.com/fpga": "1"}
    assert pod["spec"]["nodeSelector"] == {"share.egs.io/a": "true"}
    assert pod["spec"]["tolerations"] == [{**TOLERATION, "value": "free"}]
    await run_pod(cluster, namespace, "jupyter-alice")
    await asyncio.wait_for(started, 15)
    notices = await asyncio.wait_for(progress, 5)
    assert notices[0] == (
        f"Starting in slice a (namespace {namespace} on cluster east) with 2 nvidia.com/mig-1g.10gb"
        " (asked 4; the slice holds 2 there)."
    )
    await asyncio.wait_for(spawner.stop(), 15)


async def test_without_a_provisioned_gpr_the_pod_is_cpu_only_and_progress_says_when_gpus_come(egs, emulator, cluster):
    namespace = await cluster.add_namespace("team-a", slice="a")
    queued = [
        {"id": 9, "slice": "a", "cluster": "east", "status": "queued", "estimated_start": "2030-01-01T10:00:00Z"},
        {"id": 8, "slice": "a", "cluster": None, "status": "queued", "estimated_start": "2030-01-01T09:30:00Z"},
        {"id": 7, "slice": "a", "cluster": "west", "status": "queued", "estimated_start": "2030-01-01T08:00:00Z"},
    ]
    egs.slices = [Slice("a", {"alice"}, namespaces={CLUSTER: [namespace]}, gpus=["west/gpu-9/gpu0"], gprs=[4])]
    egs.slices[0].queued = queued
    spawner = make_spawner(egs, emulator, user_options={"gpus": 2})  # the only slice: no choice needed

    started = spawner.start()
    progress = asyncio.create_task(messages(spawner))
    pod = await created_pod(emulator, namespace, "jupyter-alice")
    assert pod["metadata"]["labels"]["egs.io/slice"] == "a"
    assert "nvidia.com/gpu" not in (container(pod)["resources"].get("limits") or {})
    assert "egs.io/slice" not in (pod["spec"].get("nodeSelector") or {})
    assert TOLERATION not in (pod["spec"].get("tolerations") or [])

    # The scheduler's Event on the pod reaches the spawn progress through KubeSpawner's event reflector.
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    scheduled = {
        "metadata": {"name": "jupyter-alice.1"},
        "involvedObject": {"kind": "Pod", "name": "jupyter-alice", "namespace": namespace},
        "type": "Normal",
        "reason": "Scheduled",
        "message": f"Successfully assigned {namespace}/jupyter-alice to cpu-1",
        "lastTimestamp": when,
        "eventTime": None,
    }
    await cluster.core.create_namespaced_event(namespace, scheduled)
    for _ in range(200):  # until KubeSpawner's event reflector has seen it
        if spawner.events:
            break
        await asyncio.sleep(0.025)
    await run_pod(cluster, namespace, "jupyter-alice")
    assert await asyncio.wait_for(started, 15) == f"http://{POD_IP}:8888"

    notices = await asyncio.wait_for(progress, 5)
    assert notices[0] == (
        "No GPUs of slice a are provisioned on cluster east: starting without GPUs. The slice's next GPR (8) "
        "is estimated to start at 2030-01-01T09:30:00Z; restart the server then to get its GPUs."
    )
    assert f"{when} [Normal] Successfully assigned {namespace}/jupyter-alice to cpu-1" in notices
    assert ("GET", "gprs?slice=a&status=queued", None) in egs.requests
    await asyncio.wait_for(spawner.stop(), 15)
    assert egs.requests[-1] == ("DELETE", "servers/alice", None)


AUTO = {"id": 12, "status": "queued", "filed": True, "template": "one", "position": 2}


def _soon(seconds: float) -> str:
    return (datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_start_waits_for_an_auto_gpr_that_starts_soon_and_gets_its_gpus(egs, emulator, cluster):
    namespace = await cluster.add_namespace("team-a", slice="a")
    egs.slices = [
        Slice(
            "a",
            {"alice"},
            namespaces={CLUSTER: [namespace]},
            gprs=[12],
            auto_gpr={**AUTO, "estimated_start": _soon(2)},
            polls=[
                {"id": 12, "status": "queued", "queue_position": 1, "estimated_start": _soon(1)},
                {"id": 12, "status": "queued", "queue_position": 1, "estimated_start": _soon(0)},
                {"id": 12, "status": "provisioned"},
            ],
            gpus_once_provisioned=["east/gpu-1/gpu0"],
        )
    ]
    spawner = make_spawner(egs, emulator, user_options={"gpus": 1})

    started = spawner.start()
    progress = asyncio.create_task(messages(spawner))
    pod = await created_pod(emulator, namespace, "jupyter-alice")
    assert container(pod)["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    await run_pod(cluster, namespace, "jupyter-alice")
    assert await asyncio.wait_for(started, 15) == f"http://{POD_IP}:8888"
    notices = await asyncio.wait_for(progress, 5)
    assert notices[0].startswith("GPR 12 (template one) was filed for your GPUs: position 2 in the queue, estimated")
    assert any(n.startswith("GPR 12: position 1 in the queue, estimated to start at ") for n in notices)
    assert "GPR 12 holds GPUs now." in notices
    assert f"Starting in slice a (namespace {namespace} on cluster east) with 1 GPU(s)." in notices
    registered = ("PUT", "servers/alice", {"slice": "a", "gpus": 1, "cluster": CLUSTER})
    assert [r for r in egs.requests if r[0] == "PUT"] == [registered, registered]
    await asyncio.wait_for(spawner.stop(), 15)


async def test_a_start_does_not_wait_for_an_auto_gpr_that_starts_later(egs, emulator, cluster):
    namespace = await cluster.add_namespace("team-a", slice="a")
    later = {**AUTO, "estimated_start": _soon(3600)}
    egs.slices = [Slice("a", {"alice"}, namespaces={CLUSTER: [namespace]}, auto_gpr=later)]
    spawner = make_spawner(egs, emulator, user_options={"gpus": 2})

    started = spawner.start()
    progress = asyncio.create_task(messages(spawner))
    pod = await created_pod(emulator, namespace, "jupyter-alice")
    assert "nvidia.com/gpu" not in (container(pod)["resources"].get("limits") or {})
    await run_pod(cluster, namespace, "jupyter-alice")
    await asyncio.wait_for(started, 15)
    notices = await asyncio.wait_for(progress, 5)
    assert notices[:3] == [
        f"GPR 12 (template one) was filed for your GPUs: position 2 in the queue, estimated to start at "
        f"{later['estimated_start']}.",
        "The server starts without GPUs now and gets them when the GPR's window opens "
        "(restarted then if the workspace's policy says so; else restart it).",
        f"Starting in slice a (namespace {namespace} on cluster east) without GPUs for now.",
    ]
    assert ("GET", "gprs/12", None) not in egs.requests
    await asyncio.wait_for(spawner.stop(), 15)


async def test_a_member_keeps_a_home_volume_in_the_slice_namespace_as_its_policy_says(egs, emulator, cluster):
    team_a = await cluster.add_namespace("team-a", slice="a")
    team_b = await cluster.add_namespace("team-b", slice="b")
    egs.slices = [
        Slice(
            "a",
            {"alice"},
            namespaces={CLUSTER: [team_a]},
            policy={"home_volume_size": "5Gi", "home_volume_class": "fast-ssd"},
        ),
        Slice("b", {"alice"}, namespaces={CLUSTER: [team_b]}, policy={"home_volume_size": None}),
    ]
    spawner = make_spawner(egs, emulator, groups=("group-a", "group-b"), user_options={"slice": "a"})

    for attempt in range(2):  # the volume is made once and found at the next start
        started = spawner.start()
        progress = asyncio.create_task(messages(spawner))
        pod = await created_pod(emulator, team_a, "jupyter-alice")
        claim = emulator.get(PVCS, team_a, "claim-alice")
        assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
        assert claim["spec"]["storageClassName"] == "fast-ssd"
        assert claim["metadata"]["labels"]["egs.io/slice"] == "a"
        assert claim["metadata"]["annotations"]["hub.jupyter.org/username"] == "alice"
        assert {"name": "egs-home", "persistentVolumeClaim": {"claimName": "claim-alice"}} in pod["spec"]["volumes"]
        assert {"name": "egs-home", "mountPath": "/home/jovyan"} in container(pod)["volumeMounts"]
        await run_pod(cluster, team_a, "jupyter-alice")
        await asyncio.wait_for(started, 15)
        notices = await asyncio.wait_for(progress, 5)
        assert "Your home directory is volume claim-alice (5Gi) in namespace " + team_a + ", kept across servers." in (
            notices
        )
        await asyncio.wait_for(spawner.stop(), 15)
        assert emulator.get(PVCS, team_a, "claim-alice") is not None, attempt

    spawner.user_options = {"slice": "b"}  # no home volume there: none made, none mounted
    started = spawner.start()
    pod = await created_pod(emulator, team_b, "jupyter-alice")
    assert emulator.get(PVCS, team_b, "claim-alice") is None
    assert all(v["name"] != "egs-home" for v in pod["spec"].get("volumes") or [])
    await run_pod(cluster, team_b, "jupyter-alice")
    await asyncio.wait_for(started, 15)
    await asyncio.wait_for(spawner.stop(), 15)


# --- placement without a pod ------------------------------------------------------------------


async def test_each_start_places_from_the_configured_traits(egs, emulator, cluster):
    egs.slices = [
        Slice("a", {"alice"}, namespaces={CLUSTER: ["team-a"]}, gpus=["east/gpu-1/gpu0"], gprs=[3]),
        Slice("b", {"alice"}, namespaces={CLUSTER: ["team-b"]}),
    ]
    configured_toleration = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    spawner = make_spawner(
        egs,
        emulator,
        groups=("group-a", "group-b"),
        extra_labels={"team": "ml"},
        node_selector={"pool": "gpu"},
        tolerations=[configured_toleration],
        extra_resource_limits={"example.com/fpga": "1", "nvidia.com/gpu": "8"},
    )

    spawner.user_options = {"slice": "a", "gpus": "1"}
    await spawner.egs_place()
    assert (spawner.namespace, spawner.dns_name) == ("team-a", "jupyter-alice.team-a.svc.cluster.local")
    assert spawner.extra_labels == {"team": "ml", "egs.io/slice": "a"}
    assert spawner.node_selector == {"pool": "gpu", "egs.io/slice": "a"}
    assert spawner.tolerations == [configured_toleration, TOLERATION]
    assert spawner.extra_resource_limits == {"example.com/fpga": "1", "nvidia.com/gpu": "1"}

    spawner.user_options = {"slice": "b", "gpus": "1"}  # a slice holding no GPUs: nothing of "a" remains
    await spawner.egs_place()
    assert spawner.namespace == "team-b"
    assert spawner.extra_labels == {"team": "ml", "egs.io/slice": "b"}
    assert spawner.node_selector == {"pool": "gpu"}
    assert spawner.tolerations == [configured_toleration]
    assert spawner.extra_resource_limits == {"example.com/fpga": "1"}


async def test_a_user_in_no_slice_starts_cpu_only_in_the_configured_namespace(egs, emulator, cluster):
    egs.slices = [Slice("a", {"bob"}, namespaces={CLUSTER: ["team-a"]}, gpus=["east/gpu-1/gpu0"])]
    spawner = make_spawner(egs, emulator, groups=("other",), user_options={"gpus": "2"})

    assert await spawner.egs_place() == "alice is in no workspace: starting without GPUs."
    assert (spawner.namespace, spawner.extra_labels, spawner.extra_resource_limits) == ("hub", {}, {})
    assert [m for m, _, _ in egs.requests] == ["GET"]  # nothing registered


@dataclass(frozen=True)
class RefusedCase:
    user_options: dict
    traits: dict = field(default_factory=dict)
    want: str = ""
    want_put: bool = False  # whether the server was offered to the service (which refused it)


REFUSED = {
    "slice without a namespace on the cluster": RefusedCase(
        {"slice": "west-only"},
        want="slice 'west-only' has no namespace on cluster 'east'; "
        "an egs-hub admin adds one to the slice before servers can start there",
    ),
    "egs_cluster not set": RefusedCase(
        {"slice": "a"},
        {"egs_cluster": ""},
        want="SliceKubeSpawner.egs_cluster is not set: name the cluster (as registered in egs-hub) where servers start",
    ),
    "GPU count not a number": RefusedCase(
        {"slice": "a", "gpus": "two"}, want="gpus must be a whole number of GPUs (0 or more), not 'two'"
    ),
    "not a member": RefusedCase(
        {"slice": "b"}, want="egs-hub service answered 403: alice is not a member of slice 'b'", want_put=True
    ),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
async def test_a_start_that_cannot_be_placed_fails_before_any_pod(egs, emulator, cluster, case):
    egs.slices = [
        Slice("a", {"alice"}, namespaces={CLUSTER: ["team-a"]}),
        Slice("b", {"bob"}, namespaces={CLUSTER: ["team-b"]}),
        Slice("west-only", {"alice"}, namespaces={"west": ["team-w"]}),
    ]
    spawner = make_spawner(egs, emulator, user_options=case.user_options, **case.traits)

    started = spawner.start()
    progress = asyncio.create_task(messages(spawner))
    with pytest.raises((RuntimeError, ValueError)) as raised:
        await started
    assert str(raised.value) == case.want
    assert await asyncio.wait_for(progress, 5) == []
    assert any(method == "PUT" for method, _, _ in egs.requests) == case.want_put
    assert [key for key in emulator.objects if key[0] == PODS] == []


async def test_user_namespaces_are_refused(egs, emulator):
    with pytest.raises(TraitError, match="leave enable_user_namespaces off"):
        make_spawner(egs, emulator, enable_user_namespaces=True)


# --- the spawn form ---------------------------------------------------------------------------


async def test_the_form_lists_only_the_users_slices_and_a_gpu_count(egs, emulator, cluster):
    egs.slices = [Slice("a", set(), display_name="Team A"), Slice("b", set()), Slice("c<d", set())]
    spawner = make_spawner(egs, emulator, groups=("group-a", "group-c<d", "other"), egs_default_gpus=2, egs_max_gpus=4)

    form = await spawner.get_options_form()

    assert form == (
        '<label for="egs-slice">Workspace</label><select id="egs-slice" name="slice">'
        '<option value="a">Team A</option><option value="c&lt;d">c&lt;d</option></select>'
        '<label for="egs-gpus">GPUs</label>'
        '<input id="egs-gpus" name="gpus" type="number" min="0" max="4" step="1" value="2">'
    )
    assert spawner.run_options_from_form({"slice": ["c<d"], "gpus": ["3"]}) == {"slice": "c<d", "gpus": "3"}
    assert await make_spawner(egs, emulator, groups=("other",)).get_options_form() == ""
    # With GPUs held, the count starts at them (the most a workspace of the user holds), beyond the usual max.
    egs.slices[2].gpus = [f"east/gpu-1/gpu{i}" for i in range(6)]
    assert (await spawner.get_options_form()).endswith('max="6" step="1" value="6">')


# --- the pure parts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "want"),
    [(None, None), ("", 0), ("0", 0), (" 3 ", 3), (2, 2)],
    ids=["absent: not asked", "empty", "0", "text", "int"],
)
def test_requested_gpus(value, want):
    assert requested_gpus(value) == want


@pytest.mark.parametrize("value", ["-1", "1.5", "two", 1.0, True, [1]])
def test_requested_gpus_refuses(value):
    with pytest.raises(ValueError, match=r"^gpus must be a whole number of GPUs \(0 or more\), not "):
        requested_gpus(value)


NOTICES = {
    "none queued": (
        [],
        "No GPR of the slice is queued for it; request GPUs with a GPR, then restart the server.",
    ),
    "only for another cluster": (
        [{"id": 2, "cluster": "west", "estimated_start": "2030-01-01T08:00:00Z"}],
        "No GPR of the slice is queued for it; request GPUs with a GPR, then restart the server.",
    ),
    "earliest by time, not by text": (
        [
            {"id": 4, "cluster": "east", "estimated_start": "2030-01-02T00:00:00Z"},
            {"id": 5, "cluster": "east", "estimated_start": "2030-01-01T23:00:00+00:00"},
        ],
        "The slice's next GPR (5) is estimated to start at 2030-01-01T23:00:00+00:00; "
        "restart the server then to get its GPUs.",
    ),
}


@pytest.mark.parametrize(("queued", "want_tail"), NOTICES.values(), ids=NOTICES.keys())
def test_next_gpr_notice(queued, want_tail):
    head = "No GPUs of slice a are provisioned on cluster east: starting without GPUs. "
    assert next_gpr_notice("a", "east", queued) == head + want_tail


def test_configured_tolerations_as_a_dict_are_kept_in_key_order():
    configured = {
        "namespace": "hub",
        "extra_labels": {},
        "node_selector": {},
        "tolerations": {"z": {"key": "z", "operator": "Exists"}, "a": {"key": "a", "operator": "Exists"}},
        "extra_resource_limits": {},
        "storage_pvc_ensure": False,
        "storage_capacity": None,
        "storage_class": None,
        "storage_extra_labels": {},
        "volumes": [],
        "volume_mounts": [],
    }
    traits = Placement("a", "team-a", 1).traits(configured)
    assert traits["tolerations"] == [{"key": "a", "operator": "Exists"}, {"key": "z", "operator": "Exists"}, TOLERATION]


def test_without_kubespawner_the_import_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubespawner", None)  # what an import finds when it is not installed
    monkeypatch.delitem(sys.modules, "egs_hub.spawners.kube")
    want = "SliceKubeSpawner needs KubeSpawner (jupyterhub-kubespawner): pip install egs-hub[kubernetes]"

    with pytest.raises(ImportError, match=f"^{re.escape(want)}$"):
        from egs_hub.spawners import SliceKubeSpawner  # noqa: F401
    from egs_hub.spawners import SliceLocalSpawner  # noqa: F401
