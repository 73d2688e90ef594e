"""GPU metrics of a Kubernetes cluster end to end: a real egs-hub reads the DCGM exporter through a real
Prometheus scraping two expositions (the recorded one: node gpu-node-1, two whole H100s, GPU 0 used by
pod egs-ml-team/jupyter-alice; dcgm_mig_exposition.txt: node gpu-node-2, a 3g.40gb instance used by
pod egs-ml-team/jupyter-bob and an idle 1g.10gb), and its inventory is an emulated cluster "kc" with
those nodes (gpu-node-2: two H100s split into two 3g.40gb and a 1g.10gb under the mixed strategy; the
emulator runs in a thread, as in test_clusters.py).

Kubernetes names no GPU UUIDs, so the inventory's ids are ``kc/<node>/gpu<i>`` and
``kc/<node>/mig-<profile>-<k>`` (core/gpu_names.py says how series are matched to them): each GPU and
instance shows its own readings, the instance a workspace's pod uses is one the workspace holds, and a
GPR on an idle instance is released while its workspace's busy one is kept.
"""

from __future__ import annotations

import pytest

from ..k8s.builders import gpu_node, mig_mixed_node
from ..metrics.prometheus_server import ExpositionServer, free_port, read_recorded_exposition, start_prometheus
from ..metrics.test_prometheus_source import MIG_EXPOSITION
from .hub import start_hub, stop_hub, until_status, wait_for
from .test_clusters import CONTEXT, EmulatorThread

SPLIT = "kc/gpu-node-2"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpu-metrics-kube")
    with open(MIG_EXPOSITION, encoding="utf-8") as f:
        expositions = [ExpositionServer(read_recorded_exposition()).start(), ExpositionServer(f.read()).start()]
    prometheus = start_prometheus(str(directory), [e.address for e in expositions])
    nodes = [gpu_node("gpu-node-1", gpus=2), mig_mixed_node("gpu-node-2", {"3g.40gb": 2, "1g.10gb": 1}, gpus=2)]
    try:
        with EmulatorThread() as emulators:
            emulator, _, path = emulators.cluster(directory, "kc", *nodes)
            db_url = f"sqlite:///{directory}/egs.sqlite"
            hub = start_hub(str(directory), db_url, free_port(), env={"EGS_PROMETHEUS_URL": prometheus.url})
            try:
                admin = hub.admin()
                admin.post("clusters", {"name": "kc", "kubeconfig": path, "context": CONTEXT}, expect=201)
                policy = {"idle_timeout": "6s", "max_idle_timeout": "1h", "max_active_gprs": 2}
                ml = {"name": "ml", "members": ["alice"], "namespaces": {"kc": ["egs-ml-team"]}, "policy": policy}
                admin.post("slices", ml, expect=201)
                admin.post("slices", {"name": "cv", "members": ["carol"], "namespaces": {"kc": ["egs-cv"]}}, expect=201)
                yield {"admin": admin, "alice": hub.client(hub.user_token("alice")),
                       "carol": hub.client(hub.user_token("carol"))}  # fmt: skip
            finally:
                stop_hub(hub)
            # The stopped service's watches are still open on the emulator (aiohttp does not cancel a
            # handler whose client left) until a write wakes them: an outage ends them all.
            emulators.run(emulator.set_outage(True))
            emulators.run(emulator.set_outage(False))
    finally:
        prometheus.stop()
        for exposition in expositions:
            exposition.stop()


def instance(client, slice_name: str, profile: str) -> dict:
    """A provisioned GPR of one instance of ``profile`` on cluster kc."""
    body = {"slice": slice_name, "cluster": "kc", "shape": f"H100-80GB {profile}", "gpus": 1, "duration": "1h"}
    return until_status(client, client.post("gprs", body, expect=201)["id"], "provisioned", timeout=30)


def samples(admin) -> dict[str, dict | None]:
    return {g["uuid"]: g["sample"] for g in admin.get("gpus", expect=200)["gpus"] if g["cluster"] == "kc"}


def test_each_gpu_and_instance_shows_its_own_readings_and_an_idle_instance_is_released(world):
    admin, alice, carol = world["admin"], world["alice"], world["carol"]
    # Both workspaces hold a 3g.40gb instance. The exporter's one 3g.40gb series is alice's pod's, so it
    # is the reading of the instance her workspace holds, whichever of the two that is.
    (alices,) = instance(alice, "ml", "3g.40gb")["bound_gpus"]
    (carols,) = instance(carol, "cv", "3g.40gb")["bound_gpus"]
    assert {carols, alices} == {f"{SPLIT}/mig-3g.40gb-0", f"{SPLIT}/mig-3g.40gb-1"}
    found = wait_for(lambda: (s := samples(admin)) and s.get(alices) and s, 40, "the instances' readings")
    assert (found[alices]["utilization"], found[alices]["pod"]) == (pytest.approx(78.4913), "jupyter-bob")
    assert found[carols] is None  # no series is left for it: no reading, never counted idle
    assert (found["kc/gpu-node-1/gpu0"]["utilization"], found["kc/gpu-node-1/gpu0"]["pod"]) == (97, "jupyter-alice")
    assert found["kc/gpu-node-1/gpu1"]["temperature_c"] == 29
    assert found[f"{SPLIT}/mig-1g.10gb-0"]["utilization"] == 0

    # Her GPR on the idle 1g.10gb instance is released after the workspace's 6 s idle timeout; her busy
    # 3g.40gb one, under the same policy, is kept.
    idle = instance(alice, "ml", "1g.10gb")
    assert idle["bound_gpus"] == [f"{SPLIT}/mig-1g.10gb-0"]
    assert until_status(alice, idle["id"], "complete", timeout=40)["end_reason"] == "idle-released"
    busy = alice.get("gprs?slice=ml&status=provisioned", expect=200)["gprs"]
    assert [g["bound_gpus"] for g in busy] == [[alices]]
