"""The simulated inventory: node groups and node pools, built from flags or a YAML file, scaled to a load.

Vocabulary: a *node group* is ``count`` nodes of one GPU shape in one cluster, there
throughout; a *pool* is a dynamic node pool (core/node_pools.py) of one shape in one
cluster, from ``min`` to ``max`` nodes, which the replay grows and gives back
(sim/pools.py); *capacity* is the inventory's *standing* GPUs: its node groups' and
its pools' ``min`` nodes; the *offered load* of a trace on an inventory is the
GPU-seconds its jobs really use over capacity x span.

YAML (``--cluster FILE``)::

    shapes:                 # name -> shape
      a100:
        model: A100
        memory_gb: 80
        gpus_per_node: 8
      h100-mig:             # optional ``mig``: each GPU split into these MIG instances (core/sharing.py)
        model: H100
        memory_gb: 80
        gpus_per_node: 8
        mig: {1g.10gb: 7}
    clusters:               # cluster -> shape name -> nodes
      east:
        a100: 16
      west:
        a100: 4
    slices:                 # optional: fair-share weight per slice (default 1)
      team-a: 2
    projects:               # optional: projects, their weight among projects (default 1) and slices;
      research:             #   fair share is two-level, projects first (a slice in none: "default")
        share: 3
        slices: [team-a, team-b]
    pools:                  # optional: dynamic node pools, pool name -> pool
      burst:                #   a Kubernetes label value: letters, digits, "-", "_", "." (63 at most)
        cluster: east       #   a cluster under 'clusters' (``east: {}`` names one without fixed nodes)
        shape: a100         #   a shape under 'shapes'
        min: 0              #   nodes it never goes below; they are there from the start (default 0)
        max: 8              #   nodes it never goes above (at least 1 and min)
        scale_up_delay: 10m #   from an ask to its nodes joining: seconds or "1h30m", above 0 (default 10m)
        scale_down_idle: 30m  # a node idle this long is given back (the same, default 30m)

A pool's nodes are whole (one GPR at a time, as on Kubernetes, and as the planner
counts a pool's joining nodes); a node group's share their GPUs among GPRs. A node of a
shape with ``mig`` offers only its instances, one planning node per profile, as the
service plans them; capacity and utilization count GPUs (an instance is its part of one).
A pool's shape has no ``mig``. The
standing capacity must have a node. ``--load`` scales the node groups only: pools
keep their ``min`` and ``max`` as given, and the load is offered to the standing
capacity (a pool's ``min`` nodes count, what it may add does not).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import yaml

from ..core.capacity_change import NodeGroup
from ..core.errors import InvalidRequest
from ..core.model import DEFAULT_PROJECT, Node, Project, Shape
from ..core.node_pools import NodePool
from ..core.sharing import LayoutError, check_layout, unit_node_name
from ..core.units import parse_duration
from .trace import Job, SimInputError, Trace

DEFAULT_SHAPE = ("GPU", 80)  # model and memory of the shape that --gpus-per-node makes
DEFAULT_SCALE_UP_DELAY = timedelta(minutes=10)
DEFAULT_SCALE_DOWN_IDLE = timedelta(minutes=30)
POOL_FIELDS = ("cluster", "shape", "min", "max", "scale_up_delay", "scale_down_idle")
# A pool's name is the value of its nodes' egs.io/pool label; "+" would clash with joining nodes' names.
POOL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class Inventory:
    groups: tuple[NodeGroup, ...]
    shares: dict[str, float] = field(default_factory=dict)
    projects: dict[str, str] = field(default_factory=dict)  # slice -> project (missing: the default project)
    project_policies: dict[str, Project] = field(default_factory=dict)
    pools: tuple[NodePool, ...] = ()

    def project_of(self, slice_name: str) -> str:
        return self.projects.get(slice_name, DEFAULT_PROJECT)

    @property
    def fixed_capacity(self) -> int:
        """The node groups' GPUs."""
        return sum(g.count * g.shape.gpus_per_node for g in self.groups)

    @property
    def capacity(self) -> int:
        """The standing GPUs: the node groups' and the pools' ``min`` nodes'."""
        return self.fixed_capacity + sum(p.min_nodes * p.shape.gpus_per_node for p in self.pools)

    @property
    def max_capacity(self) -> int:
        """The GPUs with every pool at its ``max``."""
        return self.fixed_capacity + sum(p.max_nodes * p.shape.gpus_per_node for p in self.pools)

    @property
    def node_count(self) -> int:
        """The standing nodes: the node groups' and the pools' ``min``."""
        return sum(g.count for g in self.groups) + sum(p.min_nodes for p in self.pools)

    @property
    def gpus_per_node(self) -> int:
        """The largest node's GPUs (pools' included): what a ``nodes`` job is counted with."""
        shapes = [g.shape for g in self.groups] + [p.shape for p in self.pools]
        return max((s.gpus_per_node for s in shapes), default=0)

    def nodes(self) -> tuple[Node, ...]:
        """The node groups' nodes, named ``<cluster>-n<i>`` with GPUs ``<node>-g<i>``; a pool's
        are made as they join (sim/pools.py). A MIG node is one node per profile,
        ``<node>:<profile>``, with instances ``<node>-g<i>-<profile>-<k>``."""
        made: list[Node] = []
        for group in self.groups:
            per_node = group.shape.gpus_per_node
            for _ in range(group.count):
                name = f"{group.cluster}-n{len(made):04d}"
                if not group.mig:
                    gpus = tuple(f"{name}-g{i}" for i in range(per_node))
                    made.append(Node(name=name, cluster=group.cluster, shape=group.shape, gpus=gpus))
                    continue
                for profile, count in group.mig:
                    units = tuple(f"{name}-g{i}-{profile}-{k}" for i in range(per_node) for k in range(count))
                    shape = replace(group.shape, gpus_per_node=len(units), profile=profile)
                    made.append(Node(unit_node_name(name, profile), group.cluster, shape, units))
        return tuple(made)

    def instance_shapes(self) -> list[Shape]:
        """The MIG instances' shapes (one node's worth), fewest compute slices first."""
        shapes = {
            replace(g.shape, gpus_per_node=g.shape.gpus_per_node * count, profile=profile)
            for g in self.groups
            for profile, count in g.mig
        }
        return sorted(shapes, key=lambda s: (s.equivalents, s.name))

    def without_mig(self) -> Inventory:
        """The same nodes with their GPUs whole: what sharing is compared with."""
        return replace(self, groups=tuple(replace(g, mig=()) for g in self.groups))

    def describe(self) -> str:
        parts = [
            f"{g.count} x {g.shape.name}" + (f" (MIG {_layout(g.mig)})" if g.mig else "") + f" in {g.cluster}"
            for g in self.groups
            if g.count
        ]
        parts += [f"pool {p.name}: {p.min_nodes}-{p.max_nodes} x {p.shape.name} in {p.cluster}" for p in self.pools]
        if not self.pools:
            return f"{', '.join(parts)} ({self.capacity} GPUs)"
        return f"{', '.join(parts)} ({self.capacity} GPUs standing, up to {self.max_capacity})"


def _layout(mig: tuple[tuple[str, int], ...]) -> str:
    return " + ".join(f"{count} x {profile}" for profile, count in mig)


def one_shape(nodes: int, gpus_per_node: int, cluster: str = "sim") -> Inventory:
    if nodes < 1 or gpus_per_node < 1:
        raise SimInputError("--nodes and --gpus-per-node must be at least 1")
    return Inventory((NodeGroup(cluster, Shape(*DEFAULT_SHAPE, gpus_per_node), nodes),))


def read_inventory(path: str | Path) -> Inventory:
    """The inventory (node groups, fair-share weights, projects, pools) from a YAML file in the
    format of this module's docstring."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SimInputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise SimInputError(f"{path}: cannot read the cluster file: {str(e).splitlines()[0]}") from None
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("shapes"), dict)
        or not isinstance(doc.get("clusters"), dict)
    ):
        raise SimInputError(f"{path}: expected mappings 'shapes' and 'clusters' (see egs-hub simulate --help)")
    shapes = {str(name): _shape(path, str(name), spec) for name, spec in doc["shapes"].items()}
    layouts = {str(name): _mig(path, str(name), shapes[str(name)], spec) for name, spec in doc["shapes"].items()}
    groups = []
    for cluster, counts in doc["clusters"].items():
        if not isinstance(counts, dict):
            raise SimInputError(f"{path}: clusters.{cluster} must map shape names to node counts")
        for shape_name, count in counts.items():
            where = f"clusters.{cluster}.{shape_name}"
            if str(shape_name) not in shapes:
                raise SimInputError(f"{path}: {where}: no shape {shape_name!r} under 'shapes'")
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise SimInputError(f"{path}: {where} must be a whole number of nodes, got {count!r}")
            groups.append(NodeGroup(str(cluster), shapes[str(shape_name)], count, layouts[str(shape_name)]))
    pools = _pools(path, doc.get("pools") or {}, shapes, {str(c) for c in doc["clusters"]})
    for name, spec in (doc.get("pools") or {}).items():
        if layouts[str(spec["shape"])]:
            raise SimInputError(f"{path}: pools.{name}.shape has a MIG layout; a pool's nodes are whole GPUs")
    if not any(g.count for g in groups) and not any(p.min_nodes for p in pools):
        raise SimInputError(f"{path}: the clusters have no nodes: give a node group nodes, or a pool a min above 0")
    slices = doc.get("slices") or {}
    if not isinstance(slices, dict):
        raise SimInputError(f"{path}: 'slices' must map slice names to fair-share weights")
    shares = {}
    for name, weight in slices.items():
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
            raise SimInputError(f"{path}: slices.{name} must be a non-negative number, got {weight!r}")
        shares[str(name)] = float(weight)
    projects, project_policies = _projects(path, doc.get("projects") or {})
    return Inventory(tuple(groups), shares, projects, project_policies, pools)


def _pools(path: Path, doc: object, shapes: dict[str, Shape], clusters: set[str]) -> tuple[NodePool, ...]:
    """``pools:`` as core's NodePools, in the file's order."""
    if not isinstance(doc, dict):
        raise SimInputError(f"{path}: 'pools' must map pool names to pools (see egs_hub/sim/cluster.py)")
    pools = []
    for name, spec in doc.items():
        where = f"pools.{name}"
        if not POOL_NAME.fullmatch(str(name)):
            raise SimInputError(
                f"{path}: {where}: a pool's name is a label value: letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit, 63 at most"
            )
        if not isinstance(spec, dict):
            raise SimInputError(f"{path}: {where} must have cluster, shape, max and optional min and delays")
        unknown = [str(key) for key in spec if key not in POOL_FIELDS]
        if unknown:
            raise SimInputError(f"{path}: {where}.{unknown[0]}: unknown field; a pool has {', '.join(POOL_FIELDS)}")
        for key in ("cluster", "shape", "max"):
            if key not in spec:
                raise SimInputError(f"{path}: {where}.{key} is missing")
        if str(spec["cluster"]) not in clusters:
            raise SimInputError(f"{path}: {where}.cluster: no cluster {spec['cluster']!r} under 'clusters'")
        if str(spec["shape"]) not in shapes:
            raise SimInputError(f"{path}: {where}.shape: no shape {spec['shape']!r} under 'shapes'")
        low, high = spec.get("min", 0), spec["max"]
        for key, value in (("min", low), ("max", high)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SimInputError(f"{path}: {where}.{key} must be a whole number of nodes, got {value!r}")
        if high < 1:
            raise SimInputError(f"{path}: {where}.max must be at least 1, got {high}")
        if low > high:
            raise SimInputError(f"{path}: {where}.min ({low}) is above its max ({high}): lower min or raise max")
        pools.append(
            NodePool(
                cluster=str(spec["cluster"]),
                name=str(name),
                shape=shapes[str(spec["shape"])],
                min_nodes=low,
                max_nodes=high,
                scale_up_delay=_delay(path, f"{where}.scale_up_delay", spec, DEFAULT_SCALE_UP_DELAY),
                scale_down_idle=_delay(path, f"{where}.scale_down_idle", spec, DEFAULT_SCALE_DOWN_IDLE),
            )
        )
    return tuple(pools)


def _delay(path: Path, where: str, spec: dict, default: timedelta) -> timedelta:
    """A pool's delay: seconds or a duration such as "10m" or "1h30m" (core/units.py), above zero: a
    node joins at the earliest a pass after it was asked for, and one idle for no time would be given
    back in the pass that plans a window on it."""
    value = spec.get(where.rsplit(".", 1)[1], default)
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and value > 0:
            return timedelta(seconds=value)
    elif isinstance(value, str):
        try:
            return parse_duration(value.strip(), where)
        except InvalidRequest:
            pass
    raise SimInputError(
        f'{path}: {where} must be a number of seconds above 0 or a duration such as "10m" or "1h30m", got {value!r}'
    )


def _projects(path: Path, doc: object) -> tuple[dict[str, str], dict[str, Project]]:
    """``projects:`` as (slice -> project, project -> its record with its share)."""
    if not isinstance(doc, dict):
        raise SimInputError(f"{path}: 'projects' must map project names to their share and slices")
    of_slice: dict[str, str] = {}
    policies = {}
    for name, spec in doc.items():
        where = f"projects.{name}"
        if not isinstance(spec, dict) or not isinstance(spec.get("slices", []), list):
            raise SimInputError(f"{path}: {where} must have 'slices' (a list of slice names) and an optional 'share'")
        share = spec.get("share", 1)
        if not isinstance(share, int | float) or isinstance(share, bool) or share < 0:
            raise SimInputError(f"{path}: {where}.share must be a non-negative number, got {share!r}")
        for slice_name in spec.get("slices", []):
            if str(slice_name) in of_slice:
                raise SimInputError(
                    f"{path}: slice {slice_name!r} is in projects {of_slice[str(slice_name)]} and {name}"
                )
            of_slice[str(slice_name)] = str(name)
        policies[str(name)] = Project(str(name), share=float(share))
    return of_slice, policies


def _shape(path: Path, name: str, spec: object) -> Shape:
    if not isinstance(spec, dict):
        raise SimInputError(f"{path}: shapes.{name} must have model, memory_gb and gpus_per_node")
    for key in ("memory_gb", "gpus_per_node"):
        value = spec.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SimInputError(f"{path}: shapes.{name}.{key} must be a positive whole number, got {value!r}")
    return Shape(str(spec.get("model", name)), spec["memory_gb"], spec["gpus_per_node"])


def _mig(path: Path, name: str, shape: Shape, spec: dict) -> tuple[tuple[str, int], ...]:
    """A shape's ``mig`` layout, checked against its GPUs (core/sharing.py); () without one."""
    layout = spec.get("mig")
    if layout is None:
        return ()
    if not isinstance(layout, dict):
        raise SimInputError(f"{path}: shapes.{name}.mig must map MIG profiles to instances per GPU: {{1g.10gb: 7}}")
    try:
        check_layout(shape.model, shape.memory_gb, layout)
    except LayoutError as e:
        raise SimInputError(f"{path}: shapes.{name}.mig: {e}") from None
    return tuple((str(profile), count) for profile, count in layout.items())


def offered_load(trace: Trace, inventory: Inventory) -> float:
    """GPU-seconds the trace's jobs really use / (capacity x span): capacity is the standing one."""
    return trace.asked_gpu_seconds(inventory.gpus_per_node) / (inventory.capacity * trace.span_s)


def scale_to_load(inventory: Inventory, trace: Trace, load: float) -> Inventory:
    """The inventory with every node group's count scaled by one factor so that the trace's
    offered load is ``load`` (to whole nodes), keeping enough nodes in the largest group
    for the trace's largest job (less what the pools of its cluster and shape may add) and
    one node standing. Pools keep their ``min`` and ``max``: their ``min`` nodes count
    towards the load's capacity, and the node groups make up the rest."""
    if not (math.isfinite(load) and load > 0):
        raise SimInputError(f"--load must be a positive number, got {load}")
    fixed = inventory.fixed_capacity
    if not fixed:
        raise SimInputError("--load scales the node groups under 'clusters', and they have no nodes: leave --load out")
    asked = trace.asked_gpu_seconds(inventory.gpus_per_node)
    factor = max(asked / (load * trace.span_s) - (inventory.capacity - fixed), 0.0) / fixed
    groups = [replace(g, count=round(g.count * factor)) for g in inventory.groups]
    largest = max(range(len(groups)), key=lambda i: (inventory.groups[i].count, -i))
    group = groups[largest]
    pooled = sum(p.max_nodes for p in inventory.pools if (p.cluster, p.shape) == (group.cluster, group.shape))
    needed = max(nodes_needed(job, group.shape.gpus_per_node) for job in trace.jobs) - pooled
    standing = 1 if not any(g.count for g in groups) and not any(p.min_nodes for p in inventory.pools) else 0
    groups[largest] = replace(group, count=max(group.count, needed, standing))
    return replace(inventory, groups=tuple(groups))


def nodes_needed(job: Job, gpus_per_node: int) -> int:
    """Nodes of ``gpus_per_node`` GPUs that the job needs at the least."""
    if job.nodes is not None:
        return job.nodes
    return math.ceil(job.gpus / gpus_per_node)
