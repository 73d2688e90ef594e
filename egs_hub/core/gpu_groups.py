"""A split machine's units grouped under their physical GPUs, for the inventory schedule.

Vocabulary: a *unit* is what a planning node hands out (core/sharing.py): a whole GPU, a MIG instance
or a share of a time-sliced GPU; a unit's *physical GPU* is the GPU itself for a whole GPU, else its
parent (None where not known: Kubernetes does not name a MIG instance's GPU). A *split* planning node,
``<machine>:<profile>`` or ``<machine>:shared``, lists its physical GPUs with its units on each
(GPUInstances).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .resources import GPUInstances
from .sharing import host_of, unit_kind


class Unit(Protocol):
    """A unit as the inventory records it (store.models.GPU)."""

    uuid: str
    parent_uuid: str | None
    index: int


def gpu_indexes(units: Iterable[tuple[str | None, int]]) -> dict[str, int]:
    """The index of each physical GPU of one machine, from ``units``: (physical GPU, index) of the units
    of all its planning nodes (None: not known, left out). A GPU's index is its position, from 0, in
    the order of the first index among its units; discovery numbers a machine's units GPU by GPU (NVML
    across the machine, a declared inventory and Kubernetes per planning node), so this is the order of
    the GPUs. Ties (each planning node numbers from 0) by UUID."""
    first: dict[str, int] = {}
    for gpu, index in units:
        if gpu is not None:
            first[gpu] = min(index, first.get(gpu, index))
    return {gpu: i for i, gpu in enumerate(sorted(first, key=lambda gpu: (first[gpu], gpu)))}


def gpus_with_units(units: Iterable[tuple[str, str | None]], indexes: Mapping[str, int]) -> list[GPUInstances]:
    """A split planning node's physical GPUs by index, each with its ``units`` (unit id, physical GPU)
    on it; the units whose GPU is not known together last, under GPU None."""
    on: dict[str | None, list[str]] = {}
    for unit, gpu in units:
        on.setdefault(gpu, []).append(unit)
    known = sorted((gpu for gpu in on if gpu is not None), key=lambda gpu: (indexes[gpu], gpu))
    groups = [GPUInstances(gpu=gpu, index=indexes[gpu], instances=tuple(on[gpu])) for gpu in known]
    if None in on:
        groups.append(GPUInstances(gpu=None, index=None, instances=tuple(on[None])))
    return groups


def physical_gpus(units: Iterable[str], parent_of: Mapping[str, str]) -> list[str]:
    """The physical GPUs that ``units`` are parts of, each once, in order; a whole GPU, or a unit whose
    GPU is not known, adds none."""
    return list(dict.fromkeys(parent_of[unit] for unit in units if unit in parent_of))


def split_gpus(units_of: Mapping[tuple[str, str], Sequence[Unit]]) -> dict[str, list[GPUInstances]]:
    """The physical GPUs with their units of each split planning node among ``units_of`` (present
    units by (cluster, node)); indexes count the GPUs of the node's whole machine."""
    machines: dict[tuple[str, str], list[tuple[str | None, int]]] = {}
    for (cluster, node), units in units_of.items():
        whole = unit_kind(node) is None
        machines.setdefault((cluster, host_of(node)), []).extend(
            (gpu.uuid if whole else gpu.parent_uuid, gpu.index) for gpu in units
        )
    indexes = {machine: gpu_indexes(units) for machine, units in machines.items()}
    return {
        node: gpus_with_units(((gpu.uuid, gpu.parent_uuid) for gpu in units), indexes[cluster, host_of(node)])
        for (cluster, node), units in units_of.items()
        if unit_kind(node) is not None
    }
