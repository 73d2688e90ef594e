"""Re-partitioning a node's GPUs: changing its MIG layout (issue 23).

A *layout change* splits every GPU of a node into the MIG instances of a new layout
(``{"1g.10gb": 7}``, core/sharing.py), or makes them whole again (no layout). It is made
only while the node is free: no GPR holds any of its units, and no change is under way.
The node is out of service while it runs: the service puts a maintenance window on each of
its planning nodes, the old and the new ones, from the change until ``ready_by`` (the
configured time a re-partition takes), so the planner plans nothing there until then and
the new instances from then on. The backend does the change (a declared inventory at once,
Kubernetes through the GPU Operator's mig-manager) and says when it is done or failed.

Pure: the rules, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .errors import Conflict, PolicyViolation
from .model import GPU, Node
from .sharing import LayoutError, check_layout, gpu_slices, profile_memory_gb, profile_slices, unit_node_name

Layout = Mapping[str, int] | None  # MIG profile -> instances per GPU; None: whole GPUs


class Unknown:  # one instance, UNKNOWN: isinstance narrows where "is UNKNOWN" does not
    """A machine split into instances whose GPUs are not known (Kubernetes does not say)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()


def planning_nodes(host: str, layout: Layout) -> list[str]:
    """The planning nodes ``host`` has in ``layout``."""
    return [unit_node_name(host, profile) for profile in layout] if layout else [host]


def instances(nodes: Iterable[Node]) -> dict[str, int]:
    """The MIG instances of a machine's planning ``nodes``, by profile."""
    return {n.shape.profile: n.shape.gpus_per_node for n in nodes if n.shape.profile is not None}


def current_layout(nodes: list[Node], gpus: Iterable[GPU], last_done: Layout = None) -> Layout | Unknown:
    """The layout of a machine's planning ``nodes`` (with their ``gpus``): instances per GPU by profile,
    None when its GPUs are whole. Where no instance says which GPU it is on (Kubernetes), the layout of
    the machine's ``last_done`` change when it has these profiles, else ``UNKNOWN``."""
    if any(n.shape.profile is None for n in nodes):
        return None
    names = {n.name for n in nodes}
    units = [g for g in gpus if g.node in names and g.profile is not None]
    placed = [(g.profile, g.parent) for g in units if g.profile is not None and g.parent is not None]
    if units and len(placed) == len(units):
        per_gpu: dict[str, dict[str, int]] = {}
        for profile, parent in placed:
            counts = per_gpu.setdefault(profile, {})
            counts[parent] = counts.get(parent, 0) + 1
        return {profile: max(counts.values()) for profile, counts in sorted(per_gpu.items())}
    if last_done and set(last_done) == set(instances(nodes)):
        return dict(last_done)
    return UNKNOWN


def describe(layout: Layout | Unknown) -> str:
    """``7 x 1g.10gb per GPU``, ``whole GPUs``, or that the layout per GPU is not known."""
    if isinstance(layout, Unknown):
        return "MIG instances (how many per GPU is not known)"
    if not layout:
        return "whole GPUs"
    return ", ".join(f"{count} x {profile}" for profile, count in layout.items()) + " per GPU"


def all_of(model: str, memory_gb: int, profile: str) -> int:
    """How many instances of ``profile`` one GPU holds at most."""
    return min(gpu_slices(model) // profile_slices(profile), memory_gb // profile_memory_gb(profile))


def default_mig_config(model: str, memory_gb: int, layout: Layout) -> str | None:
    """The GPU Operator's default mig-parted config that gives ``layout`` on a ``model`` GPU:
    ``all-disabled`` for whole GPUs, ``all-<profile>`` for each GPU split into as many instances of
    one profile as it holds; None when no default config gives it (the admin names one)."""
    if not layout:
        return "all-disabled"
    if len(layout) == 1:
        ((profile, count),) = layout.items()
        if count == all_of(model, memory_gb, profile):
            return f"all-{profile}"
    return None


def check_change(
    host: str, nodes: list[Node], current: Layout | Unknown, layout: Layout, holders: Iterable[int]
) -> None:
    """Raise unless ``host`` (its planning ``nodes``, in ``current`` layout) may be re-partitioned into
    ``layout`` now: it offers whole GPUs or MIG instances (not time-sliced shares), ``layout`` fits
    its GPUs, it is a change, and no GPR (``holders``) holds any of its units."""
    if any(n.shape.replicas > 1 for n in nodes):
        raise Conflict(
            f"node {host}'s GPUs are time-sliced (shared by {nodes[0].shape.replicas}): its sharing is set where "
            "it is declared (time_slicing in the inventory, the device plugin's config on Kubernetes), not by a "
            "MIG layout"
        )
    model, memory = nodes[0].shape.model, nodes[0].shape.memory_gb
    if layout:
        try:
            check_layout(model, memory, layout)
        except LayoutError as e:
            raise PolicyViolation("mig", f"node {host}: {e}") from None
    if not isinstance(current, Unknown) and dict(current or {}) == dict(layout or {}):
        raise Conflict(f"node {host} is in that layout already ({describe(layout)})")
    held = sorted(set(holders))
    if held:
        raise Conflict(
            f"node {host} is held by GPR(s) {', '.join(map(str, held))}: its layout changes only while it is "
            "free; release them, or ask again when their windows end"
        )


def ready_by(now: datetime, seconds: float) -> datetime:
    """When a change started at ``now`` is expected done: the planner plans the new layout from then."""
    return now + timedelta(seconds=seconds)


# Layout targets: "keep N machines of a GPU type in a layout"


@dataclass(frozen=True)
class Target:
    """Keep ``nodes`` machines of ``gpu_type`` (``H100-80GB``; on ``cluster``, else on any) in ``layout``,
    re-partitioned with ``mig_config`` (Kubernetes; left out: the default config, default_mig_config)."""

    gpu_type: str
    layout: Layout
    nodes: int
    cluster: str | None = None
    mig_config: str | None = None

    def covers(self, machine: Machine) -> bool:
        return machine.gpu_type == self.gpu_type and self.cluster in (None, machine.cluster)

    def holds(self, machine: Machine) -> bool:
        """Whether ``machine`` is one of this target's kind, in its layout (or being changed to it)."""
        return (
            self.covers(machine)
            and not isinstance(machine.layout, Unknown)
            and same_layout(machine.layout, self.layout)
        )


@dataclass(frozen=True)
class Machine:
    """A machine as the layout targets see it: its GPU type, its ``layout`` (the one a change under way
    gives it), and whether it may be re-partitioned now (``free``: no GPR holds it, none is planned on
    it, no change is under way, its GPUs are not time-sliced)."""

    cluster: str
    host: str
    gpu_type: str
    layout: Layout | Unknown
    free: bool


def same_layout(a: Layout, b: Layout) -> bool:
    return dict(a or {}) == dict(b or {})


def target_moves(targets: Sequence[Target], machines: Sequence[Machine]) -> list[tuple[Machine, Target]]:
    """The machines to re-partition now, each with the target it goes to, so that every target has its
    ``nodes``. A machine that counts toward a target (up to its ``nodes``, by cluster and name) stays as it
    is; a target short of machines takes free ones of its kind, those that no target wants as they are
    first, then by cluster and name. Where targets want the same machines in different layouts, the one
    listed first is served first. A target with machines beyond its ``nodes`` gives the extra ones up to
    the others, never on its own."""
    ordered = sorted(machines, key=lambda m: (m.cluster, m.host))
    kept: set[tuple[str, str]] = set()
    for target in targets:
        kept |= {(m.cluster, m.host) for m in [m for m in ordered if target.holds(m)][: target.nodes]}
    moves: list[tuple[Machine, Target]] = []
    moved: set[tuple[str, str]] = set()
    for target in targets:
        short = target.nodes - sum(1 for m in ordered if target.holds(m))
        if short <= 0:
            continue
        candidates = [
            m
            for m in ordered
            if target.covers(m) and m.free and not target.holds(m) and (m.cluster, m.host) not in kept | moved
        ]
        candidates.sort(key=lambda m: any(t.holds(m) for t in targets))  # stable: then by cluster and name
        for machine in candidates[:short]:
            moves.append((machine, target))
            moved.add((machine.cluster, machine.host))
    return moves
