"""Which inventory GPU a series of the DCGM exporter is about: the exporter names a GPU by its
NVML UUID, the inventory by an id of its own where it cannot see that UUID.

Vocabulary: a *series* is what the exporter says one sample is of: the GPU's ``UUID``, the node
(``Hostname``, the node's name under the GPU Operator), the GPU's ``gpu`` index and, for a MIG
instance, its GPU instance id ``GPU_I_ID`` and profile ``GPU_I_PROFILE``, with the ``namespace``
of the pod using it (Kubernetes). Its *name* is the id of the inventory GPU it is about, None
when no inventory GPU is known to be it (its readings are then left out).

- This host's GPUs (NVML) are named by their UUIDs: a whole GPU's series by its ``UUID``, a MIG
  instance's by the instance NVML found with that GPU instance id (``instances``).
- A Kubernetes node (backends/kubernetes/nodes.py) shows no UUIDs: its whole GPUs are
  ``<cluster>/<node>/gpu<i>`` and its MIG instances ``<cluster>/<node>/mig-<profile>-<k>``.
  Its whole GPUs are the GPUs of the node not in MIG mode (no instance series of the same
  ``UUID``), taken in index order. Kubernetes does not say which instance a pod got, so the
  instance series of a profile on a node are matched to its instances this way: a series whose
  pod runs in a namespace of a workspace is the next instance that workspace holds there (the
  quota keeps its pods to what it holds); the others, those of no pod first, go to the instances
  left, held ones first. So a GPR's instances show its pods' readings, and an instance it holds
  that none of its pods uses shows one that no pod uses (idle). A node name found in two
  Kubernetes clusters is not named (the exporter does not say the cluster: pick one cluster's
  exporters with the Prometheus selector). Time-sliced shares are not named: DCGM reads the
  GPU, not a share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .sharing import host_of


@dataclass(frozen=True)
class Series:
    """What the exporter names one sample by (module docstring)."""

    uuid: str
    node: str | None = None
    index: int | None = None
    gpu_instance: int | None = None
    profile: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class KubeGPU:
    """A GPU of a Kubernetes cluster's inventory: its id, planning node, index, MIG profile, the
    workspace holding it (None: free), and whether it is a time-sliced share (``parent`` set and no
    profile, backends/kubernetes/nodes.py)."""

    id: str
    cluster: str
    node: str
    index: int
    profile: str | None = None
    holder: str | None = None
    share: bool = False


@dataclass(frozen=True)
class Naming:
    """What names series: this host's MIG instances ((GPU UUID, GPU instance id) -> the instance's
    UUID), the Kubernetes clusters' GPUs, and which workspace each (cluster, namespace) is of."""

    instances: Mapping[tuple[str, int], str] = field(default_factory=dict)
    kube_gpus: Sequence[KubeGPU] = ()
    namespaces: Mapping[tuple[str, str], str] = field(default_factory=dict)


@dataclass
class _Machine:
    cluster: str
    whole: list[str] = field(default_factory=list)  # ids in index order
    instances: dict[str, list[KubeGPU]] = field(default_factory=dict)  # profile -> in index order


def names(series: Sequence[Series], naming: Naming) -> list[str | None]:
    """The name of each series (module docstring), in their order."""
    machines, twice = _machines(naming.kube_gpus)
    found: list[str | None] = [None] * len(series)
    in_mig = {s.uuid for s in series if s.gpu_instance is not None}
    whole: dict[str, list[int]] = defaultdict(list)  # machine -> positions of its whole GPUs' series
    units: dict[tuple[str, str], list[int]] = defaultdict(list)  # (machine, profile) -> instance series
    for at, one in enumerate(series):
        node = one.node or ""
        machine = machines.get(node)
        if one.gpu_instance is not None:
            local = naming.instances.get((one.uuid, one.gpu_instance))
            if local is not None:
                found[at] = local
            elif machine is not None and one.profile:
                units[(node, one.profile)].append(at)
        elif machine is not None:
            if one.uuid not in in_mig:
                whole[node].append(at)
        elif one.node not in twice:
            found[at] = one.uuid
    for node, positions in whole.items():
        positions.sort(key=lambda at: (series[at].index is None, series[at].index or 0, series[at].uuid))
        for at, gpu in zip(positions, machines[node].whole, strict=False):
            found[at] = gpu
    for (node, profile), positions in units.items():
        machine = machines[node]
        for at, gpu in _match_instances(series, positions, machine.instances.get(profile, []), machine.cluster, naming):
            found[at] = gpu
    return found


def _match_instances(
    series: Sequence[Series], positions: list[int], held: list[KubeGPU], cluster: str, naming: Naming
) -> Iterable[tuple[int, str]]:
    """(series position, instance id) pairs for one profile's instance series on one node."""
    positions = sorted(positions, key=lambda at: (series[at].index or 0, series[at].gpu_instance or 0))
    free = list(held)
    left = []
    for at in positions:
        workspace = naming.namespaces.get((cluster, series[at].namespace or ""))
        mine = next((gpu for gpu in free if workspace is not None and gpu.holder == workspace), None)
        if mine is None:
            left.append(at)
        else:
            free.remove(mine)
            yield at, mine.id
    left.sort(key=lambda at: series[at].namespace is not None)  # no pod first: a holder's idle instance
    free.sort(key=lambda gpu: gpu.holder is None)  # held ones first
    yield from ((at, gpu.id) for at, gpu in zip(left, free, strict=False))


def _machines(gpus: Iterable[KubeGPU]) -> tuple[dict[str, _Machine], set[str]]:
    """The Kubernetes machines by name, their whole GPUs and MIG instances in index order, and the
    names two clusters have (left out of the machines)."""
    machines: dict[str, _Machine] = {}
    twice: set[str] = set()
    for gpu in sorted(gpus, key=lambda g: (g.cluster, g.node, g.index)):
        name = host_of(gpu.node)
        machine = machines.setdefault(name, _Machine(gpu.cluster))
        if machine.cluster != gpu.cluster:
            twice.add(name)
        elif gpu.profile is not None:
            machine.instances.setdefault(gpu.profile, []).append(gpu)
        elif not gpu.share:
            machine.whole.append(gpu.id)
    return {name: machine for name, machine in machines.items() if name not in twice}, twice
