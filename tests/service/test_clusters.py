"""Clusters end to end: a real egs-hub drives two emulated Kubernetes clusters through the real client.

The API emulators (tests/k8s) run on an event loop of their own in a thread, so
that the hub (a subprocess) and these blocking tests can both reach them. The
tests share one hub and run in order: register, provision a GPR on a cluster's
node (labelled and tainted to the slice, the node booked whole) and return it at
window end, a second cluster beside an unreachable one, bad input, removal, and
the CLI. The last test drives the cluster registry in-process through an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kmock import Server
from traitlets import TraitError

from egs_hub import cli
from egs_hub.backends import UnbindError
from egs_hub.core import lifecycle
from egs_hub.core import model as core
from egs_hub.core.requests import ClusterCreate
from egs_hub.service.app import EGSService
from egs_hub.service.clusters import Clusters
from egs_hub.service.reconcile import Reconciler
from egs_hub.store import db, queries
from egs_hub.store.db import transaction
from egs_hub.store.models import Node, Slice

from ..k8s.builders import gpu_node
from ..k8s.cluster import KubeCluster
from ..k8s.emulator import ClusterEmulator
from ..k8s.kubeconfig import write_kubeconfig
from .hub import Client, Hub, sqlite_hub, until_status
from .test_reconcile import Clock as StepClock
from .test_reconcile import RecordingBackend, kinds, settle, status

CONTEXT = "emulated"


class EmulatorThread:
    """API emulators served from an event loop in a thread; ``run`` waits for a coroutine there."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.stack = contextlib.AsyncExitStack()

    def __enter__(self) -> EmulatorThread:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.run(self.stack.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def run(self, work, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def cluster(self, directory, name: str, *nodes: dict) -> tuple[ClusterEmulator, KubeCluster, str]:
        """A new emulated cluster with these nodes: (emulator, client on it, kubeconfig path)."""

        async def open_cluster():
            emulator = await self.stack.enter_async_context(ClusterEmulator())
            await self.stack.enter_async_context(Server(emulator))
            path = write_kubeconfig(
                directory / f"{name}.kubeconfig", str(emulator.url).rstrip("/"), emulator.token, CONTEXT
            )
            kube = await self.stack.enter_async_context(KubeCluster(str(path), CONTEXT, emulator=emulator))
            for node in nodes:
                await kube.add_node(node)
            return emulator, kube, str(path)

        return self.run(open_cluster())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def emulators() -> Iterator[EmulatorThread]:
    with EmulatorThread() as running:
        yield running


@pytest.fixture(scope="module")
def world(tmp_path_factory, emulators):
    """The hub, and two clusters: east (two 8-GPU nodes) and west (one)."""
    directory = tmp_path_factory.mktemp("clusters")
    east = emulators.cluster(directory, "east", gpu_node("gpu-e1"), gpu_node("gpu-e2"))
    west = emulators.cluster(directory, "west", gpu_node("gpu-w1"))
    with sqlite_hub(directory) as hub:
        admin = hub.admin()
        admin.post("slices", {"name": "team", "members": [], "policy": {"max_active_gprs": 5}}, expect=201)
        yield {"hub": hub, "admin": admin, "east": east, "west": west, "dir": directory}


def labels_and_taints(emulators: EmulatorThread, kube: KubeCluster, node: str) -> tuple[dict, list, bool]:
    obj = emulators.run(kube.node(node))
    spec = obj.get("spec") or {}
    return obj["metadata"].get("labels") or {}, spec.get("taints") or [], bool(spec.get("unschedulable"))


def clusters_by_name(client: Client) -> dict[str, dict]:
    return {c["name"]: c for c in client.get("clusters", expect=200)["clusters"]}


def test_a_registered_cluster_shows_its_nodes(world):
    admin = world["admin"]
    _, _, path = world["east"]
    added = admin.post("clusters", {"name": "east", "kubeconfig": path, "context": CONTEXT}, expect=201)
    assert (added["health"], added["origin"], added["kind"], added["nodes"], added["gpus"]) == (
        "ok",
        "api",
        "kubernetes",
        2,
        16,
    )
    user = world["hub"].client(world["hub"].user_token("viewer"))
    listed = clusters_by_name(user)
    assert set(listed) == {"local", "east"} and listed["local"]["origin"] == "local"
    settings = {name: (c["node_selector"], c["exit_grace"]) for name, c in listed.items()}
    assert settings == {"local": (None, None), "east": ("egs.io/slice", 300)}
    inventory = user.get("inventory", expect=200)
    east = next(c for c in inventory["clusters"] if c["name"] == "east")
    assert east["health"] == "ok" and east["message"] is None
    assert [(n["name"], n["shape"], n["whole"]) for n in east["nodes"]] == [
        ("gpu-e1", "H100-80GB x8", True),
        ("gpu-e2", "H100-80GB x8", True),
    ]
    local = next(c for c in inventory["clusters"] if c["name"] == "local")
    assert not any(n["whole"] for n in local["nodes"])


def test_a_gpr_on_the_cluster_enters_its_node_whole_and_leaves_at_window_end(world, emulators):
    admin, (_, kube, _) = world["admin"], world["east"]
    first = admin.post("gprs", {"slice": "team", "gpus": 2, "duration": 6, "cluster": "east"}, expect=201)
    first = until_status(admin, first["id"], "provisioned")
    (node,) = first["bound_nodes"]
    assert len(first["bound_gpus"]) == 2 and all(g.startswith(f"east/{node}/") for g in first["bound_gpus"])
    labels, taints, cordoned = labels_and_taints(emulators, kube, node)
    assert (labels["egs.io/slice"], labels["egs.io/gpr"], cordoned) == ("team", str(first["id"]), False)
    assert {"key": "egs.io/slice", "value": "team", "effect": "NoSchedule"} in taints
    # The node is the GPR's: its other six GPUs are not free, and the next GPR takes the other node.
    east = next(c for c in admin.get("inventory")["clusters"] if c["name"] == "east")
    held = next(n for n in east["nodes"] if n["name"] == node)
    assert sum(g["slice"] is None for g in held["gpus"]) == 6
    shape = next(s for s in admin.get("inventory")["shapes"] if s["cluster"] == "east")
    assert shape["free"] == 8
    second = admin.post("gprs", {"slice": "team", "gpus": 1, "duration": 3, "cluster": "east"}, expect=201)
    second = until_status(admin, second["id"], "provisioned")
    assert second["bound_nodes"] != [node]
    third = admin.post("gprs", {"slice": "team", "gpus": 1, "duration": 3, "cluster": "east"}, expect=201)
    assert admin.get(f"gprs/{third['id']}")["status"] == "queued"
    # At window end both go back to the free pool, uncordoned; the queued one then gets a node.
    until_status(admin, first["id"], "complete", timeout=20)
    labels, taints, cordoned = labels_and_taints(emulators, kube, node)
    assert (labels["egs.io/slice"], "egs.io/gpr" in labels, cordoned) == ("free", False, False)
    assert taints == [{"key": "egs.io/slice", "value": "free", "effect": "NoSchedule"}]
    kinds = [e["kind"] for e in admin.get(f"events?gpr={first['id']}")["events"]]
    assert {"node-entered", "node-cordoned", "node-returned"} <= set(kinds)
    until_status(admin, third["id"], "provisioned", timeout=20)
    until_status(admin, third["id"], "complete", timeout=20)


def test_a_second_cluster_works_beside_an_unreachable_one(world, emulators):
    admin, (_, west_kube, west_path) = world["admin"], world["west"]
    admin.post("clusters", {"name": "west", "kubeconfig": west_path}, expect=201)  # its current context
    gone = write_kubeconfig(world["dir"] / "gone.kubeconfig", f"http://127.0.0.1:{closed_port()}", "t", CONTEXT)
    north = admin.post("clusters", {"name": "north", "kubeconfig": str(gone), "context": CONTEXT}, expect=201)
    assert north["health"] == "unavailable" and "cannot list nodes" in north["message"] and north["nodes"] == 0
    listed = clusters_by_name(admin)
    assert {name: c["health"] for name, c in listed.items()} == {
        "local": "ok",
        "east": "ok",
        "west": "ok",
        "north": "unavailable",
    }
    inventory = {c["name"]: c for c in admin.get("inventory")["clusters"]}
    assert inventory["north"]["health"] == "unavailable" and inventory["north"]["nodes"] == []
    gpr = admin.post("gprs", {"slice": "team", "gpus": 4, "duration": 3, "cluster": "west"}, expect=201)
    gpr = until_status(admin, gpr["id"], "provisioned")
    assert gpr["bound_nodes"] == ["gpu-w1"]
    assert labels_and_taints(emulators, west_kube, "gpu-w1")[0]["egs.io/slice"] == "team"
    # A GPR for an unavailable cluster cannot be placed: it says so rather than wait forever.
    refused = admin.post("gprs", {"slice": "team", "gpus": 1, "duration": 3, "cluster": "north"})
    assert refused["status"] == 422 and "north" in refused["message"]
    until_status(admin, gpr["id"], "complete", timeout=20)


def test_a_gpr_for_any_cluster_goes_where_it_starts_earliest(world, emulators):
    """Every 8-GPU H100 node but west's is held: a GPR naming no cluster is told west starts now,
    and is provisioned there (the local host and east would start later)."""
    admin, (_, west_kube, _) = world["admin"], world["west"]
    holders = [
        admin.post("gprs", {"slice": "team", "gpus": 8, "duration": 60, "cluster": cluster}, expect=201)
        for cluster in ("east", "east", "local", "local")
    ]
    for holder in holders:
        until_status(admin, holder["id"], "provisioned")
    ask = {"slice": "team", "gpus": 8, "duration": 3, "shape": "H100"}
    options = admin.post("wait-times", ask, expect=200)["options"]
    starts = {o["cluster"]: o["wait_seconds"] for o in options}
    assert set(starts) == {"local", "east", "west"} and starts["west"] == 0
    assert min(starts["local"], starts["east"]) > 50
    gpr = until_status(admin, admin.post("gprs", ask, expect=201)["id"], "provisioned")
    assert gpr["bound_nodes"] == ["gpu-w1"] and all(g.startswith("west/gpu-w1/") for g in gpr["bound_gpus"])
    assert labels_and_taints(emulators, west_kube, "gpu-w1")[0]["egs.io/gpr"] == str(gpr["id"])
    for holder in holders:
        admin.post(f"gprs/{holder['id']}/release", expect=200)
    for done in (*holders, gpr):
        until_status(admin, done["id"], "complete", timeout=30)


def test_bad_registrations_and_removals_are_refused_naming_the_field(world):
    admin, hub = world["admin"], world["hub"]
    _, _, path = world["east"]
    not_a_kubeconfig = world["dir"] / "empty.yaml"
    not_a_kubeconfig.write_text("just: text\n")
    cases = [
        ({"name": "Bad_Name", "kubeconfig": path}, 400, "name"),
        ({"name": "x"}, 400, "kubeconfig"),
        ({"name": "x", "kubeconfig": "relative/kc"}, 400, "kubeconfig"),
        ({"name": "x", "kubeconfig": "/nowhere/kc"}, 400, "kubeconfig"),
        ({"name": "x", "kubeconfig": str(not_a_kubeconfig)}, 400, "kubeconfig"),
        ({"name": "x", "kubeconfig": path, "context": "nope"}, 400, "context"),
        ({"name": "x", "in_cluster": True, "kubeconfig": path}, 400, "in_cluster"),
        ({"name": "x", "in_cluster": True}, 400, "in_cluster"),  # the service runs in no pod here
        ({"name": "x", "kubeconfig": path, "exit_grace": "2d"}, 400, "exit_grace"),
        ({"name": "x", "kubeconfig": path, "node_selector": "pool in training"}, 400, "node_selector"),
        ({"name": "x", "kubeconfig": path, "grace": 5}, 400, "grace"),
        ({"name": "east", "kubeconfig": path}, 409, None),
        ({"name": "local", "kubeconfig": path}, 409, None),
    ]
    for body, code, field in cases:
        answer = admin.post("clusters", body, expect=code)
        assert answer.get("field") == field, (body, answer)
    assert "context 'nope' is not in" in admin.post("clusters", cases[5][0])["message"]
    user = hub.client(hub.user_token("not-admin"))
    user.post("clusters", {"name": "y", "kubeconfig": path}, expect=403)
    user.call("DELETE", "clusters/north", expect=403)
    admin.call("DELETE", "clusters/nowhere", expect=404)
    assert "this host" in admin.call("DELETE", "clusters/local", expect=409)["message"]
    assert set(clusters_by_name(admin)) == {"local", "east", "west", "north"}


def test_a_cluster_in_use_is_not_removed_until_its_gprs_are_done(world):
    admin = world["admin"]
    waiting = admin.post("gprs", {"slice": "team", "gpus": 1, "duration": 3, "cluster": "west"}, expect=201)
    refused = admin.call("DELETE", "clusters/west", expect=409)
    assert f"GPR(s) {waiting['id']}" in refused["message"]
    until_status(admin, waiting["id"], "complete", timeout=20)
    admin.call("DELETE", "clusters/west", expect=204)
    admin.call("DELETE", "clusters/north", expect=204)
    assert set(clusters_by_name(admin)) == {"local", "east"}
    assert {c["name"] for c in admin.get("inventory")["clusters"]} == {"local", "east"}
    refused = admin.post("gprs", {"slice": "team", "gpus": 1, "duration": 3, "cluster": "west"})
    assert refused["status"] == 422


def test_the_cli_registers_lists_and_removes_clusters(world, capsys):
    hub: Hub = world["hub"]
    _, _, west_path = world["west"]
    api = ["--api-url", hub.api, "--api-token", hub.admin_token]
    assert cli.main(["cluster", "add", "west", "--kubeconfig", west_path, "--context", "nope", *api]) == 1
    assert "context 'nope' is not in" in capsys.readouterr().err
    add = ["cluster", "add", "west", "--kubeconfig", west_path, "--context", CONTEXT, "--exit-grace", "2m", *api]
    assert cli.main(add) == 0
    assert "cluster west registered" in capsys.readouterr().out
    assert clusters_by_name(hub.client(hub.admin_token))["west"]["exit_grace"] == 120
    assert cli.main(["cluster", "list", *api]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split()[:6] == ["NAME", "KIND", "ORIGIN", "HEALTH", "NODES", "GPUS"]
    assert ["west", "kubernetes", "api", "ok", "1", "8"] in [line.split()[:6] for line in listed]
    assert cli.main(["cluster", "remove", "west", *api]) == 0
    assert cli.main(["cluster", "remove", "west", *api]) == 1
    assert "no cluster named 'west'" in capsys.readouterr().err
    assert cli.main(["cluster", "list", "--api-token", "wrong", "--api-url", hub.api]) == 1


# The registry in-process: an outage marks the cluster's nodes gone, recovery brings them back.


class Clock:
    def __call__(self) -> datetime:
        return datetime.now(UTC)


def present_nodes(sessions, cluster: str) -> list[str]:
    with sessions() as session:
        rows = session.query(Node).filter(Node.present.is_(True)).all()
        return sorted(n.name for n in rows if n.cluster.name == cluster)


async def eventually(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_an_outage_marks_the_cluster_unavailable_and_recovery_brings_its_nodes_back(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path}/egs.sqlite")
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    woken = []
    async with ClusterEmulator() as emulator, Server(emulator):
        path = write_kubeconfig(tmp_path / "kc", str(emulator.url).rstrip("/"), emulator.token, CONTEXT)
        async with KubeCluster(str(path), CONTEXT, emulator=emulator) as kube:
            await kube.add_node(gpu_node("gpu-1"))
            registry = Clusters(
                sessions, Clock(), retry_interval=0.2, request_timeout=2, on_inventory=lambda: woken.append(1)
            )
            await registry.add_kubernetes(
                [(ClusterCreate(name="emu", kubeconfig=str(path), context=CONTEXT), "config")]
            )
            registry.start()
            try:
                state = registry.states["emu"]
                assert (state.health, present_nodes(sessions, "emu")) == ("ok", ["gpu-1"])
                await kube.add_node(gpu_node("gpu-2"))  # the watch reports it
                await eventually(lambda: present_nodes(sessions, "emu") == ["gpu-1", "gpu-2"])
                await emulator.set_outage(True)
                await eventually(lambda: state.health == "unavailable")
                assert "HTTP 503" in state.error and present_nodes(sessions, "emu") == []
                await emulator.set_outage(False)
                await eventually(lambda: state.health == "ok" and present_nodes(sessions, "emu") == ["gpu-1", "gpu-2"])
                assert len(woken) >= 4  # each change woke the reconcile loop
            finally:
                await registry.close()
    engine.dispose()


async def test_clusters_registered_through_the_api_come_back_after_a_restart(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path}/egs.sqlite")
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    async with ClusterEmulator() as emulator, Server(emulator):
        path = str(write_kubeconfig(tmp_path / "kc", str(emulator.url).rstrip("/"), emulator.token, CONTEXT))
        async with KubeCluster(path, CONTEXT, emulator=emulator) as kube:
            await kube.add_node(gpu_node("gpu-1", labels={"pool": "training"}))
            await kube.add_node(gpu_node("gpu-2", labels={"pool": "inference"}))
            spec = ClusterCreate(
                name="emu",
                kubeconfig=path,
                context=CONTEXT,
                node_selector="egs.io/slice,pool=training",
                exit_grace=timedelta(seconds=45),
            )
            first = Clusters(sessions, Clock())
            await first.register(spec)
            await first.close()
            again = Clusters(sessions, Clock())
            await again.restore([])
            assert [(s.name, s.origin, s.health) for s in again.states.values()] == [("emu", "api", "ok")]
            restored = again.states["emu"]
            assert restored.spec == spec and restored.backend.exit_grace == timedelta(seconds=45)
            assert [n.name for n in restored.inventory.nodes] == ["gpu-1"]  # the selector leaves gpu-2 out
            await again.close()
            # The same name in the config: the config's wins.
            configured = Clusters(sessions, Clock())
            await configured.restore([ClusterCreate(name="emu", in_cluster=True)])
            assert [(s.origin, s.where, s.health) for s in configured.states.values()] == [
                ("config", "in-cluster config", "unavailable")
            ]
            await configured.close()
    engine.dispose()


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        ([{"name": "x"}], "EGSService.clusters[0]: kubeconfig is required"),
        ([{"name": "x", "in_cluster": True}, {"name": "x", "in_cluster": True}], "cluster 'x' is named twice"),
        ([{"name": "local", "in_cluster": True}], "'local' is this host's; choose another name"),
        ([{"name": "x", "kubeconfig": "/kc", "grace": 1}], "EGSService.clusters[0]: unknown field 'grace'"),
    ],
)
def test_cluster_config_is_checked_when_loaded(clusters, message):
    with pytest.raises(TraitError, match=re.escape(message)):
        EGSService(clusters=clusters)


# The reconcile loop routes each GPR to its cluster's backend (backend doubles of test_reconcile).


def submit_to(sessions, cluster: str, gpus: int, now: datetime) -> int:
    spec = core.GPRSpec(slice="a", duration=timedelta(minutes=10), gpus=gpus, cluster=cluster)
    with transaction(sessions) as session:
        row = queries.new_gpr_row(session, spec, "alice", now)
        return queries.apply(session, row, lifecycle.submit(row.id, spec, "alice", [], now)).id


def one_gpu_node(cluster: str, whole: bool) -> tuple[core.Node, core.GPU]:
    uuid = f"{cluster}/n1/gpu0"
    node = core.Node(name="n1", cluster=cluster, shape=core.Shape("H100", 80, 1), gpus=(uuid,), whole=whole)
    return node, core.GPU(uuid=uuid, index=0, node="n1", cluster=cluster, model="H100", memory_mib=81920)


@pytest.fixture
def two_clusters(tmp_path):
    """A store with a one-GPU node on "local" and on "edge" (whole), and slice "a"."""
    engine = db.make_engine(f"sqlite:///{tmp_path}/egs.sqlite")
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    clock = StepClock()
    with transaction(sessions) as session:
        for cluster, whole in (("local", False), ("edge", True)):
            node, gpu = one_gpu_node(cluster, whole)
            queries.sync_inventory(session, cluster, "double", [node], [gpu], clock.now)
        row = Slice(name="a", group_name="a", project_id=queries.project_id(session, clock.now))
        row.created_at = row.updated_at = clock.now
        queries.write_slice_policy(row, core.SlicePolicy(max_active_gprs=5))
        session.add(row)
    yield sessions, clock
    engine.dispose()


async def test_the_reconcile_loop_binds_on_the_gprs_cluster_and_records_an_unfinished_unbind(two_clusters):
    sessions, clock = two_clusters
    local, edge = RecordingBackend(cluster="local"), RecordingBackend(cluster="edge")
    reconciler = Reconciler(sessions, {"local": local, "edge": edge}, clock, retry_interval=5)
    on_edge, on_local = submit_to(sessions, "edge", 1, clock.now), submit_to(sessions, "local", 1, clock.now)
    await settle(reconciler)
    assert (edge.binds, local.binds) == ([on_edge], [on_local])
    returned = core.Event(kind="node-returned", actor="double", reason="node e1: back", time=clock.now, gpr_id=on_edge)
    edge.fail_unbinds.append(UnbindError("pods remain", [returned]))
    clock.advance(minutes=10)
    await settle(reconciler)
    assert status(sessions, on_edge).status is core.Status.RELEASING
    assert "node-returned" in kinds(sessions, on_edge)  # recorded although the unbind did not finish
    # The cluster left the config while its GPR was releasing: the GPR ends, saying so.
    gone = Reconciler(sessions, {"local": local}, clock, retry_interval=5)
    clock.advance(seconds=5)
    await settle(gone)
    assert status(sessions, on_edge).status is core.Status.COMPLETE
    assert set(kinds(sessions, on_edge)[-2:]) == {"cluster-gone", "complete"}
    assert edge.unbinds == [on_edge]
