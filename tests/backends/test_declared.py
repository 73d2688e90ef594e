"""The declared inventory: YAML files that declare nodes and GPUs where NVML finds none.

Every error names the file and the field at fault, so one table of (file text,
wanted message part) covers them; valid files go through another table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from egs_hub.backends.local.declared import (
    DEFAULT_INVENTORY,
    InventoryError,
    declared_inventory,
    load_inventory_file,
)
from egs_hub.core.model import Shape

UUIDS_A = ["GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-aaaaaaaa-0000-0000-0000-000000000001"]


def node_yaml(name: str = "gpu-a", model: str = "H100", memory_gb: object = 80, gpus: object = 2, **extra) -> str:
    """One entry of ``nodes:`` as YAML flow mapping text; ``extra`` adds keys verbatim."""
    fields = {"name": name, "model": model, "memory_gb": memory_gb, "gpus": gpus, **extra}
    return "  - {" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}\n"


def inventory_yaml(*nodes: str, top: str = "") -> str:
    return "nodes:\n" + "".join(nodes) + top


def load(tmp_path, text: str, cluster: str = "local"):
    """Write ``text`` to a file and read it the way LocalBackend does (the path names the source)."""
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return str(path), declared_inventory(load_inventory_file(str(path)), cluster, str(path))


# --- valid files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidCase:
    text: str
    want_nodes: list[tuple[str, Shape]]  # (name, shape) per node, in file order
    want_uuids: dict[str, list[str]] | None = None  # node -> UUIDs, where the file gives them


VALID_CASES = {
    "one node": ValidCase(inventory_yaml(node_yaml()), want_nodes=[("gpu-a", Shape("H100", 80, 2))]),
    "two nodes of different shapes": ValidCase(
        inventory_yaml(node_yaml(), node_yaml("gpu-b.lab", "A100-SXM4", 40, 8)),
        want_nodes=[("gpu-a", Shape("H100", 80, 2)), ("gpu-b.lab", Shape("A100-SXM4", 40, 8))],
    ),
    "block style with given UUIDs": ValidCase(
        "nodes:\n  - name: gpu-a\n    model: L4\n    memory_gb: 24\n    gpus: 2\n"
        f"    uuids:\n      - {UUIDS_A[0]}\n      - {UUIDS_A[1]}\n",
        want_nodes=[("gpu-a", Shape("L4", 24, 2))],
        want_uuids={"gpu-a": UUIDS_A},
    ),
    "largest allowed node": ValidCase(
        inventory_yaml(node_yaml(gpus=4096, memory_gb=4096)),
        want_nodes=[("gpu-a", Shape("H100", 4096, 4096))],
    ),
}


@pytest.mark.parametrize("case", VALID_CASES.values(), ids=VALID_CASES.keys())
def test_valid_inventory(tmp_path, case: ValidCase):
    _, (nodes, gpus) = load(tmp_path, case.text)

    assert [(n.name, n.shape) for n in nodes] == case.want_nodes
    for node in nodes:
        mine = [g for g in gpus if g.node == node.name]
        assert node.gpus == tuple(g.uuid for g in mine)
        assert [g.index for g in mine] == list(range(node.shape.gpus_per_node))
        assert {(g.model, g.memory_mib) for g in mine} == {
            (f"{node.shape.model} (declared)", node.shape.memory_gb * 1024)
        }
        if case.want_uuids and node.name in case.want_uuids:
            assert list(node.gpus) == case.want_uuids[node.name]
    # Declared everywhere it shows, and in the cluster it was read for.
    assert all(n.declared and n.cluster == "local" for n in nodes)
    assert all(g.declared and g.cluster == "local" for g in gpus)
    assert len({g.uuid for g in gpus}) == len(gpus)


def test_derived_uuids_are_stable_and_distinct_per_cluster_node_and_index(tmp_path):
    text = inventory_yaml(node_yaml("gpu-a", gpus=4), node_yaml("gpu-b", gpus=4))
    _, (_, first) = load(tmp_path, text)
    _, (_, again) = load(tmp_path, text)
    _, (_, other_cluster) = load(tmp_path, text, cluster="lab")
    _, (_, renamed) = load(tmp_path, inventory_yaml(node_yaml("gpu-c", gpus=4), node_yaml("gpu-b", gpus=4)))

    uuids = [g.uuid for g in first]
    assert uuids == [g.uuid for g in again]
    assert len(set(uuids)) == 8
    assert all(re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", u) for u in uuids)
    assert not set(uuids) & {g.uuid for g in other_cluster}
    # Renaming gpu-a changes only its own UUIDs.
    assert [g.uuid for g in renamed if g.node == "gpu-b"] == [g.uuid for g in first if g.node == "gpu-b"]
    assert not {g.uuid for g in renamed if g.node == "gpu-c"} & set(uuids)


def test_a_mig_layout_makes_one_node_of_instances_per_profile(tmp_path):
    text = inventory_yaml(
        node_yaml("gpu-a", gpus=2, mig="{1g.10gb: 7}"),
        node_yaml("gpu-b", gpus=2, mig="{3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}", uuids=f"[{UUIDS_A[0]}, {UUIDS_A[1]}]"),
        node_yaml("gpu-c", gpus=1),
    )
    _, (nodes, gpus) = load(tmp_path, text)

    assert [(n.name, n.shape) for n in nodes] == [
        ("gpu-a:1g.10gb", Shape("H100", 80, 14, "1g.10gb")),
        ("gpu-b:3g.40gb", Shape("H100", 80, 2, "3g.40gb")),
        ("gpu-b:2g.20gb", Shape("H100", 80, 2, "2g.20gb")),
        ("gpu-b:1g.10gb", Shape("H100", 80, 4, "1g.10gb")),
        ("gpu-c", Shape("H100", 80, 1)),
    ]
    by_node = {n.name: [g for g in gpus if g.node == n.name] for n in nodes}
    assert all(n.gpus == tuple(g.uuid for g in by_node[n.name]) for n in nodes)
    mig = [g for g in gpus if g.profile is not None]
    assert len(mig) == 14 + 2 + 2 + 4 and all(re.fullmatch(r"MIG-[0-9a-f-]{36}", g.uuid) for g in mig)
    assert len({g.uuid for g in gpus}) == len(gpus)
    # Each instance names the GPU it is part of (the given UUIDs on gpu-b) and has its profile's memory.
    assert [g.parent for g in by_node["gpu-b:1g.10gb"]] == [UUIDS_A[0], UUIDS_A[0], UUIDS_A[1], UUIDS_A[1]]
    assert {(g.profile, g.memory_mib, g.model) for g in by_node["gpu-b:3g.40gb"]} == {
        ("3g.40gb", 40 * 1024, "H100 MIG 3g.40gb (declared)")
    }
    assert [g.index for g in by_node["gpu-a:1g.10gb"]] == list(range(14))
    # Stable from one read to the next.
    _, (_, again) = load(tmp_path, text)
    assert [g.uuid for g in again] == [g.uuid for g in gpus]


def test_time_slicing_makes_one_node_of_the_gpus_shares(tmp_path):
    _, (nodes, gpus) = load(tmp_path, inventory_yaml(node_yaml("gpu-a", gpus=2, time_slicing=4, uuids=UUIDS_A)))

    assert [(n.name, n.shape) for n in nodes] == [("gpu-a:shared", Shape("H100", 80, 8, replicas=4))]
    assert nodes[0].shape.name == "H100-80GB shared/4 x8"
    assert [g.uuid for g in gpus] == [f"{parent}::{k}" for parent in UUIDS_A for k in range(4)]
    assert [g.parent for g in gpus] == [UUIDS_A[0]] * 4 + [UUIDS_A[1]] * 4
    assert {(g.profile, g.memory_mib, g.node) for g in gpus} == {(None, 80 * 1024, "gpu-a:shared")}


def test_built_in_inventory_is_one_node_of_four_declared_h100s():
    nodes, gpus = declared_inventory(DEFAULT_INVENTORY, "local", "the built-in declared inventory")

    assert [(n.name, n.shape, n.declared) for n in nodes] == [("declared-node", Shape("H100", 80, 4), True)]
    assert len(gpus) == 4 and all(g.declared for g in gpus)


# --- errors --------------------------------------------------------------------------------

DUPLICATE = "GPU-dddddddd-0000-0000-0000-000000000000"

ERROR_CASES = {
    # name: (file text, wanted part of the message after the file name)
    "a list, not a mapping": ("- gpu-a\n- gpu-b\n", "expected a mapping with a non-empty list 'nodes'"),
    "empty file": ("", "expected a mapping with a non-empty list 'nodes'"),
    "no nodes key": ("gpus: 4\n", "expected a mapping with a non-empty list 'nodes'"),
    "empty nodes": ("nodes: []\n", "expected a mapping with a non-empty list 'nodes'"),
    "nodes is a mapping": ("nodes: {gpu-a: 4}\n", "expected a mapping with a non-empty list 'nodes'"),
    "unknown top-level key": (inventory_yaml(node_yaml(), top="cluster: lab\n"), "unknown key(s) cluster"),
    "node is not a mapping": (inventory_yaml(node_yaml(), "  - gpu-b\n"), "nodes[1] must be a mapping"),
    "unknown node key": (inventory_yaml(node_yaml(colour="green")), "nodes[0]: unknown key(s) colour"),
    "missing name": ("nodes:\n  - {model: H100, memory_gb: 80, gpus: 2}\n", "nodes[0].name must be"),
    "upper-case name": (inventory_yaml(node_yaml("GPU_A")), "nodes[0].name must be a lower-case host name"),
    "name ends with a dash": (inventory_yaml(node_yaml("gpu-")), "nodes[0].name"),
    "numeric name": (inventory_yaml(node_yaml(name="123")), "nodes[0].name"),
    "duplicate name": (inventory_yaml(node_yaml(), node_yaml()), "nodes[1].name 'gpu-a' is declared twice"),
    "model with a space": (inventory_yaml(node_yaml(model="'H100 SXM'")), "nodes[0].model must be"),
    "missing model": ("nodes:\n  - {name: gpu-a, memory_gb: 80, gpus: 2}\n", "nodes[0].model"),
    "gpus 0": (
        inventory_yaml(node_yaml(), node_yaml("gpu-b", gpus=0)),
        "nodes[1].gpus must be a whole number",
    ),
    "gpus a bool": (inventory_yaml(node_yaml(), node_yaml("gpu-b", gpus="true")), "nodes[1].gpus"),
    "gpus a string": (inventory_yaml(node_yaml(), node_yaml("gpu-b", gpus="'8'")), "nodes[1].gpus"),
    "gpus a float": (inventory_yaml(node_yaml(gpus=2.5)), "nodes[0].gpus"),
    "gpus 5000": (
        inventory_yaml(node_yaml(gpus=5000)),
        "nodes[0].gpus must be a whole number from 1 to 4096",
    ),
    "missing gpus": ("nodes:\n  - {name: gpu-a, model: H100, memory_gb: 80}\n", "nodes[0].gpus"),
    "memory_gb negative": (inventory_yaml(node_yaml(memory_gb=-80)), "nodes[0].memory_gb"),
    "memory_gb with unit": (inventory_yaml(node_yaml(memory_gb="80G")), "nodes[0].memory_gb"),
    "uuids too few": (
        inventory_yaml(node_yaml(gpus=3, uuids=f"[{DUPLICATE}]")),
        "nodes[0].uuids must list exactly 3",
    ),
    "uuids not a list": (inventory_yaml(node_yaml(gpus=1, uuids=DUPLICATE)), "nodes[0].uuids"),
    "uuids not strings": (inventory_yaml(node_yaml(gpus=2, uuids="[1, 2]")), "nodes[0].uuids"),
    "duplicate UUID across nodes": (
        inventory_yaml(node_yaml(gpus=1, uuids=f"[{DUPLICATE}]"), node_yaml("gpu-b", gpus=1, uuids=f"[{DUPLICATE}]")),
        f"GPU UUID(s) declared twice: {DUPLICATE}",
    ),
    "duplicate UUID in a node": (
        inventory_yaml(node_yaml(gpus=2, uuids=f"[{DUPLICATE}, {DUPLICATE}]")),
        "declared twice",
    ),
    "invalid YAML": ("nodes: [\n  {name: gpu-a\n", "is not valid YAML"),
    "mig not a mapping": (inventory_yaml(node_yaml(mig="[1g.10gb]")), "nodes[0].mig must map MIG profiles"),
    "mig with no profile": (inventory_yaml(node_yaml(mig="{}")), "nodes[0].mig: a MIG layout names at least one"),
    "mig profile misspelt": (inventory_yaml(node_yaml(mig="{1g10gb: 7}")), "nodes[0].mig: '1g10gb' is not a MIG"),
    "mig over the compute slices": (
        inventory_yaml(node_yaml(mig="{1g.10gb: 8}")),
        "nodes[0].mig: the instances take 8 compute slices; a H100 GPU has 7",
    ),
    "mig over the memory": (
        inventory_yaml(node_yaml(memory_gb=40, mig="{3g.40gb: 1, 1g.10gb: 1}")),
        "nodes[0].mig: the instances take 50 GB; a H100 GPU has 40 GB",
    ),
    "time_slicing not a divisor": (
        inventory_yaml(node_yaml(time_slicing=11)),
        "nodes[0].time_slicing must be a number of shares, one of 2, 3, 4",
    ),
    "time_slicing 1": (inventory_yaml(node_yaml(time_slicing=1)), "nodes[0].time_slicing must be a number"),
    "mig and time_slicing": (
        inventory_yaml(node_yaml(mig="{1g.10gb: 7}", time_slicing=4)),
        "nodes[0]: give mig or time_slicing, not both",
    ),
    "mig count not a number": (inventory_yaml(node_yaml(mig="{1g.10gb: all}")), "whole number from 1, not 'all'"),
}


@pytest.mark.parametrize(("text", "want"), ERROR_CASES.values(), ids=ERROR_CASES.keys())
def test_inventory_error_names_file_and_field(tmp_path, text: str, want: str):
    with pytest.raises(InventoryError) as raised:
        load(tmp_path, text)

    message = str(raised.value)
    assert str(tmp_path / "inventory.yaml") in message
    assert want in message


def test_missing_file_is_an_inventory_error_naming_it(tmp_path):
    missing = str(tmp_path / "nowhere.yaml")

    with pytest.raises(InventoryError, match=re.escape(f"cannot read inventory file {missing}: No such file")):
        load_inventory_file(missing)


def test_directory_is_an_inventory_error(tmp_path):
    with pytest.raises(InventoryError, match=re.escape(f"cannot read inventory file {tmp_path}")):
        load_inventory_file(str(tmp_path))
