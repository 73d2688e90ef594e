"""GPR resources applied with kubectl become GPRs: the sync in-process against an emulated cluster, then a
real egs-hub end to end.

In-process, passes are run by hand (``sync.sync()``) on the store, the cluster registry and the planner, so
each step is deterministic: a resource becomes a GPR checked as POST /gprs checks it, an invalid one gets a
condition, deleting one cancels its GPR and lets it go, and a restarted sync makes nothing twice.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from kmock import Server
from kubernetes_asyncio import client

from egs_hub.backends.kubernetes import gpr_resources as gr
from egs_hub.core.model import SlicePolicy
from egs_hub.core.requests import ClusterCreate
from egs_hub.core.units import format_time
from egs_hub.service.clusters import Clusters
from egs_hub.service.gpr_sync import GPRSync
from egs_hub.service.planning import Planning
from egs_hub.store import queries

from ..k8s.builders import gpu_node
from ..k8s.cluster import KubeCluster
from ..k8s.emulator import ClusterEmulator
from ..k8s.kubeconfig import write_kubeconfig
from .hub import sqlite_hub, until_status, wait_for
from .stores import store_with_slice
from .test_clusters import CONTEXT, EmulatorThread, eventually

NAMESPACE = "team-home"
MERGE = "application/merge-patch+json"


def gpr_resource(name: str, spec: dict) -> dict:
    return {"apiVersion": gr.API_VERSION, "kind": gr.KIND, "metadata": {"name": name}, "spec": spec}


@pytest.fixture
async def world(tmp_path):
    policy = SlicePolicy(max_priority=200, max_idle_timeout=timedelta(hours=1))
    sessions = store_with_slice(tmp_path, "team", {"emu": (NAMESPACE,)}, policy)
    async with ClusterEmulator() as emulator, Server(emulator):
        path = write_kubeconfig(tmp_path / "kc", str(emulator.url).rstrip("/"), emulator.token, CONTEXT)
        async with KubeCluster(str(path), CONTEXT, emulator=emulator) as kube:
            await kube.add_node(gpu_node("gpu-1"))
            for name in (NAMESPACE, "elsewhere"):
                await kube.core.create_namespace({"metadata": {"name": name}})
            registry = Clusters(sessions, lambda: datetime.now(UTC), retry_interval=60, request_timeout=2)
            await registry.add_kubernetes(
                [(ClusterCreate(name="emu", kubeconfig=str(path), context=CONTEXT), "config")]
            )
            yield {"sessions": sessions, "registry": registry, "kube": kube, "emulator": emulator}
            await registry.close()
    sessions.kw["bind"].dispose()


async def started(world) -> GPRSync:
    sync = GPRSync(world["sessions"], world["registry"].backends, lambda: datetime.now(UTC), Planning())
    await sync.follow_clusters()
    await eventually(lambda: sync.watched["emu"].reflector.listed)
    return sync


class Resources:
    def __init__(self, kube: KubeCluster):
        self.custom = client.CustomObjectsApi(kube.api)

    async def apply(self, name: str, spec: dict, namespace: str = NAMESPACE) -> None:
        await self.custom.create_namespaced_custom_object(
            gr.GROUP, gr.VERSION, namespace, gr.PLURAL, gpr_resource(name, spec)
        )

    async def get(self, name: str, namespace: str = NAMESPACE) -> dict | None:
        try:
            return await self.custom.get_namespaced_custom_object(gr.GROUP, gr.VERSION, namespace, gr.PLURAL, name)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    async def delete(self, name: str, namespace: str = NAMESPACE) -> None:
        await self.custom.delete_namespaced_custom_object(gr.GROUP, gr.VERSION, namespace, gr.PLURAL, name)


def gprs(world) -> list:
    with world["sessions"]() as session:
        return [queries.to_gpr(r) for r in queries.gpr_rows(session)]


async def settle(sync: GPRSync, check) -> None:
    """Passes until ``check()`` (async) holds: a pass's own writes come back through the watch."""
    for _ in range(50):
        await sync.sync()
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("did not settle")


async def test_a_resource_becomes_a_gpr_and_its_status_follows(world):
    resources = Resources(world["kube"])
    sync = await started(world)
    try:
        # Asked to start in a day: its estimated start is that time, not a "now" that moves with every pass.
        after = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
        await resources.apply("train", {"gpus": 2, "duration": "1h", "priority": 150, "startAfter": format_time(after)})

        async def accepted():
            obj = await resources.get("train")
            return (obj.get("status") or {}).get("phase") == "queued" and "queuePosition" in obj["status"]

        await settle(sync, accepted)
        (gpr,) = gprs(world)
        assert (gpr.spec.slice, gpr.spec.name, gpr.spec.gpus, gpr.spec.priority, gpr.spec.cluster) == (
            "team",
            "train",
            2,
            150,
            "emu",
        )
        assert gpr.requested_by == "kubernetes:emu/team-home"
        obj = await resources.get("train")
        assert obj["metadata"]["finalizers"] == [gr.FINALIZER]
        assert obj["status"]["gprId"] == gpr.id and obj["status"]["estimatedStart"] == format_time(after)
        assert obj["status"]["conditions"][0]["type"] == "Accepted"
        rv = obj["metadata"]["resourceVersion"]
        reflector = sync.watched["emu"].reflector
        await eventually(lambda: reflector.objects[(NAMESPACE, "train")]["metadata"]["resourceVersion"] == rv)
        await sync.sync()  # nothing changed: nothing is written
        assert (await resources.get("train"))["metadata"]["resourceVersion"] == rv
    finally:
        await sync.stop()


INVALID = {
    "over the API's range": ({"gpus": 0, "duration": 60}, NAMESPACE, "spec.gpus: "),
    "a field the API does not know": ({"gpus": 1, "duration": 60, "colour": "red"}, NAMESPACE, "spec.colour: "),
    "over the slice's max_priority": ({"gpus": 1, "duration": 60, "priority": 250}, NAMESPACE, "spec.priority: "),
    "an idle timeout over the slice's": (
        {"gpus": 1, "duration": 60, "idleTimeout": "2h"},
        NAMESPACE,
        "spec.idleTimeout: ",
    ),
    "a shape no node has": ({"gpus": 1, "duration": 60, "shape": "B200"}, NAMESPACE, "spec.shape: "),
    "a namespace of no slice": ({"gpus": 1, "duration": 60}, "elsewhere", "metadata.namespace: "),
}


async def test_invalid_resources_get_a_condition_naming_the_field_and_no_gpr(world):
    resources = Resources(world["kube"])
    sync = await started(world)
    try:
        for i, (spec, namespace, _) in enumerate(INVALID.values()):
            await resources.apply(f"bad-{i}", spec, namespace)

        async def all_marked():
            found = [await resources.get(f"bad-{i}", ns) for i, (_, ns, _) in enumerate(INVALID.values())]
            return all((o.get("status") or {}).get("phase") == "invalid" for o in found)

        await settle(sync, all_marked)
        for i, (case, (_, namespace, want)) in enumerate(INVALID.items()):
            obj = await resources.get(f"bad-{i}", namespace)
            (condition,) = obj["status"]["conditions"]
            assert (condition["type"], condition["status"]) == ("Accepted", "False"), case
            assert condition["message"].startswith(want), (case, condition["message"])
            assert "finalizers" not in obj["metadata"]
        assert gprs(world) == []
        # Fixed with an edit (a new generation), it is read again and accepted.
        await resources.custom.patch_namespaced_custom_object(
            gr.GROUP,
            gr.VERSION,
            NAMESPACE,
            gr.PLURAL,
            "bad-0",
            {"spec": {"gpus": 1}},
            _content_type=MERGE,
        )

        async def fixed():
            return (await resources.get("bad-0"))["status"]["phase"] == "queued"

        await settle(sync, fixed)
        assert [g.spec.name for g in gprs(world)] == ["bad-0"]
    finally:
        await sync.stop()


async def test_deleting_cancels_and_a_restart_makes_nothing_twice(world):
    resources, emulator = Resources(world["kube"]), world["emulator"]
    sync = await started(world)
    try:
        await resources.apply("keep", {"gpus": 1, "duration": 600})
        await resources.apply("drop", {"gpus": 1, "duration": 600})
        await resources.apply("forced", {"gpus": 1, "duration": 600})

        async def both():
            found = [await resources.get(n) for n in ("keep", "drop", "forced")]
            return len(gprs(world)) == 3 and all(gr.has_finalizer(o) for o in found)

        await settle(sync, both)
        await resources.delete("drop")

        async def dropped():
            return await resources.get("drop") is None

        await settle(sync, dropped)
        by_name = {g.spec.name: g for g in gprs(world)}
        assert by_name["drop"].status.value == "cancelled" and by_name["keep"].status.value == "queued"
    finally:
        await sync.stop()
    # While the service is away: one resource is applied, one is deleted (its finalizer keeps it), one is
    # deleted with its finalizer taken off by hand (gone), and the watch history is compacted (410 Gone).
    await resources.apply("late", {"gpus": 1, "duration": 600})
    await resources.delete("keep")
    await resources.delete("forced")
    await resources.custom.patch_namespaced_custom_object(
        gr.GROUP, gr.VERSION, NAMESPACE, gr.PLURAL, "forced", {"metadata": {"finalizers": None}}, _content_type=MERGE
    )
    emulator.compact()
    again = await started(world)
    try:

        async def caught_up():
            return await resources.get("keep") is None and (await resources.get("late")).get("status")

        await settle(again, caught_up)
        names = sorted(g.spec.name for g in gprs(world))
        assert names == ["drop", "forced", "keep", "late"]  # one GPR per resource, none twice
        status = {g.spec.name: g.status.value for g in gprs(world)}
        assert (status["keep"], status["forced"], status["late"]) == ("cancelled", "cancelled", "queued")
        with world["sessions"]() as session:
            live = [link.name for link in queries.gpr_resource_links(session, "emu") if link.deleted_at is None]
        assert live == ["late"]
    finally:
        await again.stop()


# End to end: a real egs-hub with an emulated cluster, the resource applied through the real client.


@pytest.fixture(scope="module")
def hub_world(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpr-resources")
    with EmulatorThread() as emulators:
        _, kube, path = emulators.cluster(directory, "kc", gpu_node("gpu-1"))
        with sqlite_hub(directory) as hub:
            admin = hub.admin()
            admin.post("clusters", {"name": "kc", "kubeconfig": path, "context": CONTEXT}, expect=201)
            admin.post("slices", {"name": "ml", "namespaces": {"kc": ["ml-home"]}}, expect=201)
            yield {"admin": admin, "run": emulators.run, "resources": Resources(kube), "kube": kube}


def test_applied_with_kubectl_provisioned_then_deleted_releases(hub_world):
    admin, run, resources = hub_world["admin"], hub_world["run"], hub_world["resources"]
    run(resources.apply("train", {"gpus": 2, "duration": "10m"}, "ml-home"))
    (gpr,) = wait_for(lambda: admin.get("gprs?slice=ml")["gprs"], 20, "a GPR made from the resource")
    assert (gpr["name"], gpr["gpus"], gpr["cluster"], gpr["requested_by"]) == (
        "train",
        2,
        "kc",
        "kubernetes:kc/ml-home",
    )
    until_status(admin, gpr["id"], "provisioned", timeout=20)

    def status() -> dict:
        return run(resources.get("train", "ml-home")).get("status") or {}

    wait_for(lambda: status().get("phase") == "provisioned", 20, "the resource's status to follow")
    assert (status()["gprId"], status()["boundNodes"]) == (gpr["id"], ["gpu-1"])
    assert status()["windowEnd"] and [c["status"] for c in status()["conditions"]] == ["True", "True"]

    def resource_events() -> list[tuple[str, str]]:
        items = run(hub_world["kube"].core.list_namespaced_event("ml-home")).items
        return [(e.reason, e.involved_object.name) for e in items if e.involved_object.kind == gr.KIND]

    wait_for(lambda: ("Provisioned", "train") in resource_events(), 10, "a Provisioned Event on the resource")
    run(resources.delete("train", "ml-home"))
    ended = until_status(admin, gpr["id"], "complete", timeout=30)
    assert ended["end_reason"] == "released-early"
    wait_for(lambda: run(resources.get("train", "ml-home")) is None, 20, "the finalizer to go with the resource")
    assert ("Released", "train") in resource_events()
    assert len(admin.get("gprs?slice=ml")["gprs"]) == 1  # nothing made twice
