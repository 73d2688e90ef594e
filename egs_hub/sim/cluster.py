"""The simulated inventory: node groups, built from flags or a YAML file, scaled to a load.

Vocabulary: a *node group* is ``count`` nodes of one GPU shape in one cluster;
*capacity* is the inventory's GPUs; the *offered load* of a trace on an
inventory is the GPU-seconds its jobs really use over capacity x span.

YAML (``--cluster FILE``)::

    shapes:                 # name -> shape
      a100:
        model: A100
        memory_gb: 80
        gpus_per_node: 8
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..core.model import DEFAULT_PROJECT, Node, Project, Shape
from .trace import Job, SimInputError, Trace

DEFAULT_SHAPE = ("GPU", 80)  # model and memory of the shape that --gpus-per-node makes


@dataclass(frozen=True)
class NodeGroup:
    cluster: str
    shape: Shape
    count: int


@dataclass(frozen=True)
class Inventory:
    groups: tuple[NodeGroup, ...]
    shares: dict[str, float] = field(default_factory=dict)
    projects: dict[str, str] = field(default_factory=dict)  # slice -> project (missing: the default project)
    project_policies: dict[str, Project] = field(default_factory=dict)

    def project_of(self, slice_name: str) -> str:
        return self.projects.get(slice_name, DEFAULT_PROJECT)

    @property
    def capacity(self) -> int:
        return sum(g.count * g.shape.gpus_per_node for g in self.groups)

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def gpus_per_node(self) -> int:
        """The largest node's GPUs: what a ``nodes`` job is counted with."""
        return max((g.shape.gpus_per_node for g in self.groups), default=0)

    def nodes(self) -> tuple[Node, ...]:
        """Nodes named ``<cluster>-n<i>`` with GPUs ``<node>-g<i>``."""
        made = []
        for group in self.groups:
            for _ in range(group.count):
                name = f"{group.cluster}-n{len(made):04d}"
                gpus = tuple(f"{name}-g{i}" for i in range(group.shape.gpus_per_node))
                made.append(Node(name=name, cluster=group.cluster, shape=group.shape, gpus=gpus))
        return tuple(made)

    def describe(self) -> str:
        parts = [f"{g.count} x {g.shape.name} in {g.cluster}" for g in self.groups if g.count]
        return f"{', '.join(parts)} ({self.capacity} GPUs)"


def one_shape(nodes: int, gpus_per_node: int, cluster: str = "sim") -> Inventory:
    if nodes < 1 or gpus_per_node < 1:
        raise SimInputError("--nodes and --gpus-per-node must be at least 1")
    return Inventory((NodeGroup(cluster, Shape(*DEFAULT_SHAPE, gpus_per_node), nodes),))


def read_inventory(path: str | Path) -> Inventory:
    """Node groups from a YAML file in the format of this module's docstring."""
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
            groups.append(NodeGroup(str(cluster), shapes[str(shape_name)], count))
    if not any(g.count for g in groups):
        raise SimInputError(f"{path}: the clusters have no nodes")
    slices = doc.get("slices") or {}
    if not isinstance(slices, dict):
        raise SimInputError(f"{path}: 'slices' must map slice names to fair-share weights")
    shares = {}
    for name, weight in slices.items():
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
            raise SimInputError(f"{path}: slices.{name} must be a non-negative number, got {weight!r}")
        shares[str(name)] = float(weight)
    projects, project_policies = _projects(path, doc.get("projects") or {})
    return Inventory(tuple(groups), shares, projects, project_policies)


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


def offered_load(trace: Trace, inventory: Inventory) -> float:
    """GPU-seconds the trace's jobs really use / (capacity x span)."""
    return trace.asked_gpu_seconds(inventory.gpus_per_node) / (inventory.capacity * trace.span_s)


def scale_to_load(inventory: Inventory, trace: Trace, load: float) -> Inventory:
    """The inventory with every group's node count scaled by one factor so that the trace's
    offered load is ``load`` (to whole nodes), keeping enough nodes in the largest group
    for the trace's largest job."""
    if not (math.isfinite(load) and load > 0):
        raise SimInputError(f"--load must be a positive number, got {load}")
    asked = trace.asked_gpu_seconds(inventory.gpus_per_node)
    factor = asked / (load * trace.span_s) / inventory.capacity
    groups = [replace(g, count=round(g.count * factor)) for g in inventory.groups]
    largest = max(range(len(groups)), key=lambda i: (inventory.groups[i].count, -i))
    needed = max(nodes_needed(job, groups[largest].shape.gpus_per_node) for job in trace.jobs)
    groups[largest] = replace(groups[largest], count=max(groups[largest].count, needed))
    return replace(inventory, groups=tuple(groups))


def nodes_needed(job: Job, gpus_per_node: int) -> int:
    """Nodes of ``gpus_per_node`` GPUs that the job needs at the least."""
    if job.nodes is not None:
        return job.nodes
    return math.ceil(job.gpus / gpus_per_node)
