"""GPR resources applied with kubectl become GPRs: the sync in-process against an emulated cluster, then a
real egs-hub end to end.

In-process, passes are run by hand (``sync.sync()``) on the store, the cluster registry and the planner, so
each step is deterministic: a resource becomes a GPR checked as POST /gprs checks it, an invalid one gets a
condition, an edit of its spec reaches the GPR as PATCH /gprs/{id} would (or a condition says why not),
deleting one cancels its GPR and lets it go, and a restarted sync makes nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest
from kmock import Server
from kubernetes_asyncio import client
from sqlalchemy import select

from egs_hub.backends.kubernetes import gpr_resources as gr
from egs_hub.core import lifecycle
from egs_hub.core.model import SlicePolicy
from egs_hub.core.requests import ClusterCreate
from egs_hub.core.templates import GPRTemplate
from egs_hub.core.units import format_time
from egs_hub.service.clusters import Clusters
from egs_hub.service.commands import Commands
from egs_hub.service.gpr_sync import GPRSync
from egs_hub.service.planning import Planning
from egs_hub.store import queries
from egs_hub.store.db import transaction
from egs_hub.store.models import GPU, EventRow, GPRTemplateRow, Node

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
    policy = SlicePolicy(max_priority=200, max_idle_timeout=timedelta(hours=1), max_duration=timedelta(hours=4))
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
    clock = lambda: datetime.now(UTC)  # noqa: E731
    commands = Commands(world["sessions"], Planning(), clock, max_start_after=timedelta(days=365))
    sync = GPRSync(world["sessions"], world["registry"].backends, clock, commands)
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

    async def edit(self, name: str, spec: dict, namespace: str = NAMESPACE) -> None:
        """As ``kubectl edit``: a merge patch of the spec (the API server bumps the generation)."""
        await self.custom.patch_namespaced_custom_object(
            gr.GROUP, gr.VERSION, namespace, gr.PLURAL, name, {"spec": spec}, _content_type=MERGE
        )


def gprs(world) -> list:
    with world["sessions"]() as session:
        return [queries.to_gpr(r) for r in queries.gpr_rows(session)]


def edits(world) -> list[tuple[int, str, str]]:
    """The ``edited`` events: GPR, actor, reason."""
    with world["sessions"]() as session:
        rows = session.scalars(select(EventRow).where(EventRow.kind == "edited").order_by(EventRow.id))
        return [(e.gpr_id, e.actor, e.reason) for e in rows]


def spec_applied(obj: dict) -> dict | None:
    return next((c for c in obj["status"]["conditions"] if c["type"] == gr.SPEC_APPLIED), None)


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
    "a start past the horizon": (
        {"gpus": 1, "duration": 60, "startAfter": "9999-12-31T23:59:59Z"},
        NAMESPACE,
        "spec.startAfter: startAfter must be within 365 days from now (before ",
    ),
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


# Edits of a linked resource's spec


async def test_an_edit_of_a_queued_gpr_is_applied(world):
    resources = Resources(world["kube"])
    sync = await started(world)
    try:
        await resources.apply("train", {"gpus": 1, "duration": 600, "priority": 120})

        async def queued():
            return ((await resources.get("train")).get("status") or {}).get("phase") == "queued"

        await settle(sync, queued)
        stale = (await resources.get("train"))["status"]
        assert spec_applied({"status": stale}) is None  # not edited yet
        await resources.edit("train", {"gpus": 2, "duration": "2h", "priority": 180})

        async def applied():
            return (await resources.get("train"))["status"]["observedGeneration"] == 2

        await settle(sync, applied)
        (gpr,) = gprs(world)
        assert (gpr.status.value, gpr.spec.gpus, gpr.spec.duration, gpr.spec.priority) == (
            "queued",
            2,
            timedelta(hours=2),
            180,
        )
        assert edits(world) == [(gpr.id, "kubernetes:emu/team-home", "changed duration, gpus, priority")]
        obj = await resources.get("train")
        condition = spec_applied(obj)
        assert (condition["status"], condition["reason"], condition["observedGeneration"]) == ("True", "Applied", 2)
        assert obj["status"]["queuePosition"] == 1
        # A pass that still sees the status from before the edit (the watch is behind) writes the same condition.
        kept = spec_applied({"status": gr.gpr_status(gpr, None, 2, stale, datetime.now(UTC))})
        assert {**kept, "lastTransitionTime": None} == {**condition, "lastTransitionTime": None}
    finally:
        await sync.stop()


REFUSED = {
    # spec edit -> (want SpecApplied reason, want message start)
    "a bad duration": ({"duration": "soon"}, "Invalid", "spec.duration: "),
    "another cluster": ({"cluster": "other"}, "Invalid", "spec.cluster: cluster cannot change from emu to other"),
    "a field the API does not know": ({"colour": "red"}, "Invalid", "spec.colour: "),
    "a change that needs approval": ({"duration": "8h"}, "OverLimits", "spec: this change needs an admin's approval"),
}


async def test_a_refused_edit_leaves_the_gpr_and_a_later_valid_one_clears_the_condition(world, caplog):
    resources = Resources(world["kube"])
    sync = await started(world)
    names = [f"edit-{i}" for i in range(len(REFUSED))]
    try:
        # Asked to start in a day, so that their estimated start does not move with every pass.
        after = format_time((datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0))
        for name in names:
            await resources.apply(name, {"gpus": 1, "duration": 600, "startAfter": after})

        async def all_queued():
            found = [await resources.get(n) for n in names]
            return all((o.get("status") or {}).get("phase") == "queued" for o in found)

        await settle(sync, all_queued)
        before = {g.spec.name: g.spec for g in gprs(world)}
        for name, (spec, _, _) in zip(names, REFUSED.values(), strict=True):
            await resources.edit(name, spec)

        async def all_refused():
            found = [await resources.get(n) for n in names]
            return all(spec_applied(o) is not None for o in found)

        await settle(sync, all_refused)
        assert {g.spec.name: g.spec for g in gprs(world)} == before and edits(world) == []
        for name, (case, (_, reason, want)) in zip(names, REFUSED.items(), strict=True):
            obj = await resources.get(name)
            condition = spec_applied(obj)
            assert (condition["status"], condition["reason"], condition["observedGeneration"]) == (
                "False",
                reason,
                2,
            ), case
            assert condition["message"].startswith(want), (case, condition["message"])
            # The rest of the status still follows the GPR, at the generation it was made from.
            assert (obj["status"]["phase"], obj["status"]["observedGeneration"]) == ("queued", 1), case
        # A refused generation is not read again: a pass refuses nothing and writes nothing.
        rv = (await resources.get(names[0]))["metadata"]["resourceVersion"]
        reflector = sync.watched["emu"].reflector
        for name in names:
            refused = (await resources.get(name))["metadata"]["resourceVersion"]
            await eventually(
                lambda n=name, v=refused: reflector.objects[(NAMESPACE, n)]["metadata"]["resourceVersion"] == v
            )
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="egs_hub.service.gpr_sync"):
            await sync.sync()
        assert [r.message for r in caplog.records if "refused" in r.message] == []
        assert (await resources.get(names[0]))["metadata"]["resourceVersion"] == rv and edits(world) == []
        # Fixed with a valid edit, it is applied and the condition is cleared.
        await resources.edit(names[0], {"duration": "20m"})

        async def fixed():
            return spec_applied(await resources.get(names[0]))["status"] == "True"

        await settle(sync, fixed)
        obj = await resources.get(names[0])
        assert (obj["status"]["observedGeneration"], spec_applied(obj)["observedGeneration"]) == (3, 3)
        fixed_gpr = next(g for g in gprs(world) if g.spec.name == names[0])
        assert fixed_gpr.spec.duration == timedelta(minutes=20)
        assert edits(world) == [(fixed_gpr.id, "kubernetes:emu/team-home", "changed duration")]
    finally:
        await sync.stop()


def provision(world, gpr_id: int) -> None:
    """What the reconciler does once the planner admits the GPR: its GPUs on gpu-1, then bound."""
    now = datetime.now(UTC)
    with transaction(world["sessions"]) as session:
        row = queries.get_gpr_row(session, gpr_id, lock=True)
        uuids = session.scalars(select(GPU.uuid).join(Node).where(Node.name == "gpu-1").order_by(GPU.uuid))
        gpus = tuple(uuids)[: row.gpus]
        queries.apply(session, row, lifecycle.admit(queries.to_gpr(row), gpus, ("gpu-1",), now))
        queries.apply(session, row, lifecycle.mark_provisioned(queries.to_gpr(row), "reconciler", now))


async def test_an_edit_of_a_provisioned_gpr_is_refused(world):
    resources = Resources(world["kube"])
    sync = await started(world)
    try:
        await resources.apply("running", {"gpus": 1, "duration": 600})

        async def queued():
            return ((await resources.get("running")).get("status") or {}).get("phase") == "queued"

        await settle(sync, queued)
        (gpr,) = gprs(world)
        provision(world, gpr.id)
        await resources.edit("running", {"duration": "20m"})

        async def refused():
            obj = await resources.get("running")
            return obj["status"]["phase"] == "provisioned" and spec_applied(obj) is not None

        await settle(sync, refused)
        condition = spec_applied(await resources.get("running"))
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "NotEditable",
            f"spec: GPR {gpr.id} is provisioned; only pending or queued GPRs can be edited",
        )
        (after,) = gprs(world)
        assert after.spec == gpr.spec and after.status.value == "provisioned" and edits(world) == []
    finally:
        await sync.stop()


async def test_a_resource_may_name_a_template_its_slice_may_use(world):
    with transaction(world["sessions"]) as session:
        now = datetime.now(UTC)
        for name, scope in (("pair", {"slice": "team"}), ("theirs", {"slice": "other"})):
            row = GPRTemplateRow(name=name, created_by="admin", created_at=now)
            queries.write_template(row, GPRTemplate(name, timedelta(hours=2), gpus=2, priority=150, **scope), now)
            session.add(row)
    resources = Resources(world["kube"])
    sync = await started(world)
    try:
        await resources.apply("from-template", {"template": "pair", "duration": "30m"})
        await resources.apply("not-ours", {"template": "theirs"})

        async def read():
            found = [await resources.get(name) for name in ("from-template", "not-ours")]
            return all((o.get("status") or {}).get("phase") in ("queued", "provisioned", "invalid") for o in found)

        await settle(sync, read)
        (gpr,) = gprs(world)
        assert (gpr.spec.template, gpr.spec.gpus, gpr.spec.priority, gpr.spec.duration) == (
            "pair",
            2,
            150,
            timedelta(minutes=30),
        )
        (condition,) = (await resources.get("not-ours"))["status"]["conditions"]
        refused = "no template named 'theirs' that slice 'team' may use"  # as a missing one: whose it is is hidden
        assert condition["status"] == "False" and refused in condition["message"]
    finally:
        await sync.stop()
