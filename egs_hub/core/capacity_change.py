"""Nodes added to and removed from an inventory, for a what-if capacity plan: ``egs-hub simulate
--from-db --add-nodes/--remove-nodes`` (sim/history.py) and the checks of POST /capacity-plans
(service/capacity.py). Pure: node groups in, node groups out.

Vocabulary: a *node group* is ``count`` nodes of one GPU shape in one cluster (sim/cluster.py's
inventory is made of them); a change names a shape as ``Shape.matches`` reads it (``H100``,
``H100-80GB x8``) and a number of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from .model import Shape

WHAT_IF_CLUSTER = "what-if"  # where added nodes of a shape no cluster has go


class ChangeError(Exception):
    """A change that cannot be made: ``side`` is the list at fault ("add", "remove"; None when it is
    the two together), ``detail`` why. The CLI and the API each name the list their own way."""

    def __init__(self, side: str | None, detail: str):
        super().__init__(detail)
        self.side, self.detail = side, detail


@dataclass(frozen=True)
class NodeGroup:
    """``mig``: the MIG layout each of its GPUs is split into, (profile, instances per GPU)."""

    cluster: str
    shape: Shape
    count: int
    mig: tuple[tuple[str, int], ...] = ()


def planned_groups(node_shapes: Iterable[tuple[str, Shape]]) -> tuple[NodeGroup, ...]:
    """The nodes planned on, given as (cluster, shape) of each, one group per cluster and shape,
    by cluster and shape name."""
    groups: dict[tuple[str, Shape], int] = {}
    for cluster, shape in node_shapes:
        groups[(cluster, shape)] = groups.get((cluster, shape), 0) + 1
    ordered = sorted(groups.items(), key=lambda item: (item[0][0], item[0][1].name))
    return tuple(NodeGroup(cluster, shape, n) for (cluster, shape), n in ordered)


def changed_groups(
    groups: Iterable[NodeGroup], add: list[tuple[str, int]], remove: list[tuple[str, int]]
) -> tuple[NodeGroup, ...]:
    """``groups`` with nodes added to (or removed from) the first group whose shape matches; a shape
    no group has is added, when named in full (``MODEL-MEMGB xG``), on the ``what-if`` cluster.
    ChangeError when a change cannot be made or no node would be left."""
    out = list(groups)
    for wanted, n in add:
        k = _matching(out, wanted)
        if k is None:
            out.append(NodeGroup(WHAT_IF_CLUSTER, _full_shape(wanted), n))
        else:
            out[k] = replace(out[k], count=out[k].count + n)
    for wanted, n in remove:
        k = _matching(out, wanted)
        if k is None:
            raise ChangeError("remove", f"{wanted}:{n}: no node of that shape")
        if out[k].count < n:
            raise ChangeError("remove", f"{wanted}:{n}: {out[k].cluster} has {out[k].count}")
        out[k] = replace(out[k], count=out[k].count - n)
    if not any(g.count for g in out):
        raise ChangeError(None, "no node would be left to plan on")
    return tuple(out)


def _matching(groups: list[NodeGroup], wanted: str) -> int | None:
    return next((k for k, g in enumerate(groups) if g.shape.matches(wanted)), None)


def _full_shape(wanted: str) -> Shape:
    """``MODEL-MEMGB xG`` as a shape."""
    try:
        kind, per_node = wanted.replace(" ", "").rsplit("x", 1)
        model, memory = kind.rsplit("-", 1)
        shape = Shape(model, int(memory.upper().removesuffix("GB")), int(per_node))
    except ValueError:
        shape = None
    if shape is None or not model or shape.memory_gb < 1 or shape.gpus_per_node < 1:
        raise ChangeError(
            "add",
            f"{wanted!r}: no node has that shape; name a new one in full, as MODEL-MEMGB xG (e.g. 'H100-80GB x8')",
        )
    return shape
