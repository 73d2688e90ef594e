"""An inventory declared in config, for hosts where NVML finds no GPUs.

The file is YAML::

    nodes:
      - name: gpu-a          # node name, unique
        model: H100          # GPU model
        memory_gb: 80        # memory per GPU
        gpus: 8              # GPUs on the node
        uuids: [GPU-...]     # optional: real UUIDs, one per GPU
        mig: {1g.10gb: 7}    # optional: each GPU is split into these MIG instances
        time_slicing: 4      # optional (not with mig): each GPU is shared by up to 4 GPRs

Declared GPUs are marked ``declared`` wherever they show; their UUIDs are
stable (derived from node and index) unless given. A node with ``mig`` offers
only its instances (``MIG-`` UUIDs, stable too), one planning node per profile
(core/sharing.py); several profiles on one GPU (a mixed layout) are several
entries of ``mig``. A node with ``time_slicing`` offers only the shares of its GPUs, one planning
node ``<node>:shared`` whose units are ``<GPU UUID>::<k>`` (sharing.replica_uuid). An admin may
change a node's MIG layout through the API (core/layouts.py): ``with_layouts`` puts the changes over
the file.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Mapping

import yaml

from ...core.model import GPU, Node, Shape
from ...core.sharing import (
    LayoutError,
    check_layout,
    check_replicas,
    profile_memory_gb,
    replica_uuid,
    unit_node_name,
)

DEFAULT_INVENTORY = {"nodes": [{"name": "declared-node", "model": "H100", "memory_gb": 80, "gpus": 4}]}
_NAMESPACE = uuid.UUID("5a1d3c0e-6f0b-4c7e-9a54-2f7b8f1d6e21")
_NODE_NAME = re.compile(r"[a-z0-9]([-.a-z0-9]*[a-z0-9])?")
_MODEL = re.compile(r"[A-Za-z0-9][-A-Za-z0-9]{0,63}")


class InventoryError(Exception):
    """The declared inventory is wrong; the message names the file and field."""


def load_inventory_file(path: str) -> dict:
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise InventoryError(f"cannot read inventory file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise InventoryError(f"inventory file {path} is not valid YAML: {e}") from None
    return data


def with_layouts(data: object, layouts: Mapping[str, Mapping[str, int] | None]) -> object:
    """``data`` with the MIG layout of each node named in ``layouts`` changed to it (None: whole GPUs):
    a node re-partitioned through the API (core/layouts.py) after its declaration."""
    if not layouts or not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return data
    nodes = []
    for entry in data["nodes"]:
        if isinstance(entry, dict) and entry.get("name") in layouts:
            entry = {k: v for k, v in entry.items() if k != "mig"}
            layout = layouts[entry["name"]]
            if layout:
                entry["mig"] = dict(layout)
        nodes.append(entry)
    return {**data, "nodes": nodes}


def declared_inventory(data: object, cluster: str, where: str) -> tuple[list[Node], list[GPU]]:
    """Nodes and GPUs from a parsed inventory; ``where`` names its source in errors."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise InventoryError(f"{where}: expected a mapping with a non-empty list 'nodes'")
    unknown = set(data) - {"nodes"}
    if unknown:
        raise InventoryError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; only 'nodes'")
    nodes, gpus, seen = [], [], set()
    for i, entry in enumerate(data["nodes"]):
        at = f"{where}: nodes[{i}]"
        if not isinstance(entry, dict):
            raise InventoryError(f"{at} must be a mapping with name, model, memory_gb, gpus")
        unknown = set(entry) - {"name", "model", "memory_gb", "gpus", "uuids", "mig", "time_slicing"}
        if unknown:
            raise InventoryError(f"{at}: unknown key(s) {', '.join(sorted(unknown))}")
        name, model = entry.get("name"), entry.get("model")
        if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
            raise InventoryError(f"{at}.name must be a lower-case host name, not {name!r}")
        if name in seen:
            raise InventoryError(f"{at}.name {name!r} is declared twice")
        seen.add(name)
        if not isinstance(model, str) or not _MODEL.fullmatch(model):
            raise InventoryError(f"{at}.model must be a GPU model like H100, not {model!r}")
        count, memory = entry.get("gpus"), entry.get("memory_gb")
        for field, value in (("gpus", count), ("memory_gb", memory)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
                raise InventoryError(f"{at}.{field} must be a whole number from 1 to 4096, not {value!r}")
        uuids = entry.get("uuids")
        if uuids is None:
            uuids = [f"GPU-{uuid.uuid5(_NAMESPACE, f'{cluster}/{name}/{index}')}" for index in range(count)]
        elif not (isinstance(uuids, list) and len(uuids) == count and all(isinstance(u, str) for u in uuids)):
            raise InventoryError(f"{at}.uuids must list exactly {count} UUID strings")
        mig, replicas = entry.get("mig"), entry.get("time_slicing")
        if mig is not None and replicas is not None:
            raise InventoryError(f"{at}: give mig or time_slicing, not both")
        if replicas is not None:
            try:
                replicas = check_replicas(replicas)
            except LayoutError as e:
                raise InventoryError(f"{at}.{e}") from None
            unit_node, unit_gpus = _shares(cluster, name, model, memory, uuids, replicas)
            nodes.append(unit_node)
            gpus.extend(unit_gpus)
            continue
        if mig is None:
            nodes.append(Node(name, cluster, Shape(model, memory, count), tuple(uuids), declared=True))
            gpus.extend(
                GPU(u, index, name, cluster, f"{model} (declared)", memory * 1024, declared=True)
                for index, u in enumerate(uuids)
            )
            continue
        if not isinstance(mig, dict):
            raise InventoryError(f'{at}.mig must map MIG profiles to instances per GPU, like {{"1g.10gb": 7}}')
        try:
            check_layout(model, memory, mig)
        except LayoutError as e:
            raise InventoryError(f"{at}.mig: {e}") from None
        for profile, per_gpu in mig.items():
            unit_node, unit_gpus = _instances(cluster, name, model, memory, uuids, profile, per_gpu)
            nodes.append(unit_node)
            gpus.extend(unit_gpus)
    duplicates = {u for u, n in Counter(g.uuid for g in gpus).items() if n > 1}
    if duplicates:
        raise InventoryError(f"{where}: GPU UUID(s) declared twice: {', '.join(sorted(duplicates))}")
    return nodes, gpus


def _instances(
    cluster: str, name: str, model: str, memory: int, parents: list[str], profile: str, per_gpu: int
) -> tuple[Node, list[GPU]]:
    """The planning node of a node's ``profile`` instances, and the instances: ``per_gpu`` on
    each of the GPUs ``parents``."""
    unit_node = unit_node_name(name, profile)
    gpus = [
        GPU(
            uuid=f"MIG-{uuid.uuid5(_NAMESPACE, f'{cluster}/{parent}/{profile}/{k}')}",
            index=index,
            node=unit_node,
            cluster=cluster,
            model=f"{model} MIG {profile} (declared)",
            memory_mib=profile_memory_gb(profile) * 1024,
            declared=True,
            parent=parent,
            profile=profile,
        )
        for index, (parent, k) in enumerate((p, k) for p in parents for k in range(per_gpu))
    ]
    shape = Shape(model, memory, len(gpus), profile)
    return Node(unit_node, cluster, shape, tuple(g.uuid for g in gpus), declared=True), gpus


def _shares(
    cluster: str, name: str, model: str, memory: int, parents: list[str], replicas: int
) -> tuple[Node, list[GPU]]:
    """The planning node of a time-sliced node's shares, and the shares: ``replicas`` of each GPU."""
    unit_node = unit_node_name(name, "shared")
    gpus = [
        GPU(
            uuid=replica_uuid(parent, k),
            index=index,
            node=unit_node,
            cluster=cluster,
            model=f"{model} (declared, time-sliced)",
            memory_mib=memory * 1024,
            declared=True,
            parent=parent,
        )
        for index, (parent, k) in enumerate((p, k) for p in parents for k in range(replicas))
    ]
    shape = Shape(model, memory, len(gpus), replicas=replicas)
    return Node(unit_node, cluster, shape, tuple(g.uuid for g in gpus), declared=True), gpus
