"""The inventory schedule groups a split node's units under their GPUs (issue 23).

The pure part first: the index of a machine's GPUs and the grouping of a planning node's units, as
NVML, a declared inventory and Kubernetes number them. Then end to end, on a real hub whose declared
inventory splits mig-a's two GPUs into seven 1g.10gb instances each, time-slices shared-a's GPU into
four shares and keeps h100-a's eight GPUs whole: GET /inventory/schedule names each planning node's
machine, profile and GPUs, and each window's GPUs (``on_gpus``): a provisioned instance's is its
parent, a planned window's whose instances are not chosen yet none, a whole GPU's none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from egs_hub.core.gpu_groups import gpu_indexes, gpus_with_units, physical_gpus
from egs_hub.core.resources import GPUInstances

from .hub import sqlite_hub, until_status, wait_for

MIG_SHAPE = "H100-80GB 1g.10gb"


@dataclass
class Case:
    units: list[tuple[str, str | None, int]]  # (unit, physical GPU, index) of one planning node
    others: list[tuple[str | None, int]] = field(default_factory=list)  # the machine's other planning nodes' units
    want_groups: list[tuple[str | None, int | None, list[str]]] = field(default_factory=list)  # (GPU, index, units)


CASES = {
    "declared: instances numbered GPU by GPU": Case(
        units=[("m0", "G-a", 0), ("m1", "G-a", 1), ("m2", "G-b", 2), ("m3", "G-b", 3)],
        want_groups=[("G-a", 0, ["m0", "m1"]), ("G-b", 1, ["m2", "m3"])],
    ),
    "declared mixed layout: each profile's node numbers from 0": Case(
        units=[("s0", "G-b", 0), ("s1", "G-z", 1)],  # 2g.20gb: one per GPU
        others=[("G-b", 0), ("G-b", 1), ("G-z", 2), ("G-z", 3)],  # 1g.10gb: two per GPU
        want_groups=[("G-b", 0, ["s0"]), ("G-z", 1, ["s1"])],
    ),
    "NVML: a whole GPU before the split one counts": Case(
        units=[("m1", "G-split", 1), ("m2", "G-split", 2)],
        others=[("G-whole", 0)],  # the whole GPU on the machine's whole-GPU node
        want_groups=[("G-split", 1, ["m1", "m2"])],
    ),
    "Kubernetes: instances whose GPU is not named": Case(
        units=[("k0", None, 0), ("k1", None, 1)],
        want_groups=[(None, None, ["k0", "k1"])],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_split_nodes_units_are_grouped_under_their_gpus(case: Case) -> None:
    indexes = gpu_indexes([*[(gpu, index) for _, gpu, index in case.units], *case.others])
    groups = gpus_with_units([(unit, gpu) for unit, gpu, _ in case.units], indexes)
    want = [GPUInstances(gpu=gpu, index=index, instances=units) for gpu, index, units in case.want_groups]
    assert groups == want


def test_a_windows_gpus_are_its_units_parents_each_once() -> None:
    parent_of = {"m0": "G-a", "m1": "G-a", "m2": "G-b"}
    assert physical_gpus(["m2", "m0", "m1"], parent_of) == ["G-b", "G-a"]
    assert physical_gpus(["GPU-whole"], parent_of) == []


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with sqlite_hub(tmp_path_factory.mktemp("hub-schedule-gpus"), inventory="inventory_sharing.yaml") as running:
        yield running


def test_the_schedule_names_each_windows_gpus_on_a_split_node(hub) -> None:
    admin = hub.admin()
    admin.post("slices", {"name": "sched-mig", "members": [], "policy": {"max_active_gprs": 4}}, expect=201)
    ask = {"slice": "sched-mig", "duration": "1h"}
    one = admin.post("gprs", {**ask, "gpus": 1, "shape": MIG_SHAPE}, expect=201)
    one = until_status(admin, one["id"], "provisioned", 30)
    rest = admin.post("gprs", {**ask, "gpus": 13, "shape": MIG_SHAPE}, expect=201)
    rest = until_status(admin, rest["id"], "provisioned", 30)
    whole = admin.post("gprs", {**ask, "gpus": 1}, expect=201)
    whole = until_status(admin, whole["id"], "provisioned", 30)
    later = admin.post("gprs", {**ask, "gpus": 1, "shape": MIG_SHAPE}, expect=201)

    inventory = admin.get("inventory")
    units = {n["name"]: n["gpus"] for c in inventory["clusters"] for n in c["nodes"]}
    parent_of = {g["uuid"]: g["parent_uuid"] for g in units["mig-a:1g.10gb"]}
    parents = list(dict.fromkeys(parent_of.values()))  # in index order
    assert len(parents) == 2

    def planned(schedule: dict) -> bool:
        return any(w["gpr"] == later["id"] for n in schedule["nodes"] for w in n["windows"])

    schedule = wait_for(lambda: planned(s := admin.get("inventory/schedule")) and s, 30, "the queued GPR planned")
    nodes = {n["node"]: n for n in schedule["nodes"]}
    mig = nodes["mig-a:1g.10gb"]
    assert (mig["machine"], mig["profile"]) == ("mig-a", "1g.10gb")
    assert mig["gpus"] == [
        {"gpu": parent, "index": i, "instances": [u for u, p in parent_of.items() if p == parent]}
        for i, parent in enumerate(parents)
    ]
    windows = {w["gpr"]: w for w in mig["windows"]}
    assert windows[one["id"]]["state"] == "current"
    assert windows[one["id"]]["on_gpus"] == [parent_of[one["bound_gpus"][0]]]
    assert sorted(windows[rest["id"]]["on_gpus"]) == sorted(parents)  # 13 instances: both GPUs
    assert (windows[later["id"]]["state"], windows[later["id"]]["gpus"], windows[later["id"]]["on_gpus"]) == (
        "planned",
        [],
        [],
    )

    shared = nodes["shared-a:shared"]
    (gpu,) = shared["gpus"]
    assert (shared["machine"], shared["profile"], gpu["index"]) == ("shared-a", "shared", 0)
    assert gpu["instances"] == [f"{gpu['gpu']}::{k}" for k in range(4)]

    h100 = nodes["h100-a"]
    assert (h100["machine"], h100["profile"], h100["gpus"]) == ("h100-a", None, [])
    assert [w["on_gpus"] for w in h100["windows"] if w["gpr"] == whole["id"]] == [[]]

    document = admin.get("openapi.json")["components"]["schemas"]
    assert {"gpu", "index", "instances"} <= set(document["GPUInstances"]["properties"])
    assert {"machine", "profile", "gpus"} <= set(document["NodeSchedule"]["properties"])
    assert "on_gpus" in document["Window"]["properties"]
    for gpr in (one, rest, whole):
        admin.post(f"gprs/{gpr['id']}/release", expect=200)
