"""An inventory declared in config, for hosts where NVML finds no GPUs.

The file is YAML::

    nodes:
      - name: gpu-a          # node name, unique
        model: H100          # GPU model
        memory_gb: 80        # memory per GPU
        gpus: 8              # GPUs on the node
        uuids: [GPU-...]     # optional: real UUIDs, one per GPU

Declared GPUs are marked ``declared`` wherever they show; their UUIDs are
stable (derived from node and index) unless given.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter

import yaml

from ...core.model import GPU, Node, Shape

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
        unknown = set(entry) - {"name", "model", "memory_gb", "gpus", "uuids"}
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
        shape = Shape(model, memory, count)
        nodes.append(Node(name=name, cluster=cluster, shape=shape, gpus=tuple(uuids), declared=True))
        gpus.extend(
            GPU(
                uuid=u,
                index=index,
                node=name,
                cluster=cluster,
                model=f"{model} (declared)",
                memory_mib=memory * 1024,
                declared=True,
            )
            for index, u in enumerate(uuids)
        )
    duplicates = {u for u, n in Counter(g.uuid for g in gpus).items() if n > 1}
    if duplicates:
        raise InventoryError(f"{where}: GPU UUID(s) declared twice: {', '.join(sorted(duplicates))}")
    return nodes, gpus
