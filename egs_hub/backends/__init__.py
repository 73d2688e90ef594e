"""Where GPUs live and how they are bound to a slice; one backend per cluster.

The service talks to every backend through ``Backend`` and never asks which
kind it is. A backend gets decisions with the data it needs and returns the
events to record; it does not read the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..core.checks import CheckTarget, Verdict
from ..core.model import GPR, GPU, Event, Node, SlicePolicy
from ..core.requests import CheckSpec


class BindError(Exception):
    """Binding failed its pre-checks before anything was bound; the message says which and why.
    ``nodes``: the nodes (of the backend's cluster) that failed, when the fault is theirs."""

    def __init__(self, message: str, nodes: Sequence[str] = ()):
        super().__init__(message)
        self.nodes = tuple(nodes)


class UnbindError(Exception):
    """Taking GPUs back did not finish; the reconcile loop tries again.

    ``events`` are what the failed try did all the same (nodes returned, pods evicted):
    the loop records them, since the next try finds that work done and does not repeat it.
    """

    def __init__(self, message: str, events: Sequence[Event] = ()):
        super().__init__(message)
        self.events = tuple(events)


class LayoutChangeError(Exception):
    """The backend cannot change this node's MIG layout; the message says why, and what was changed
    where a step failed after others were done (re-partitioning this host's GPUs through NVML)."""


@dataclass(frozen=True)
class Inventory:
    """What a backend found: nodes, their GPUs, and where that came from."""

    nodes: list[Node]
    gpus: list[GPU]
    source: str


@dataclass(frozen=True)
class ServerRef:
    """A user's server running in a slice, with the GPUs it was started with."""

    user: str
    name: str
    gpus: tuple[str, ...]


class Backend(Protocol):
    cluster: str
    kind: str
    # The kinds of check (core/checks.py) it runs on its nodes; the service judges gpu-health itself.
    check_kinds: frozenset[str]
    # Whether its cluster's autoscaler grows dynamic node pools (core/node_pools.py): then it has grow_pool,
    # pool_requests, end_pool_request, keep_pool_node and give_back_pool_node (backends/kubernetes/pools.py).
    scales_pools: bool

    async def discover(self) -> Inventory: ...

    async def bind(self, gpr: GPR, policy: SlicePolicy, servers: list[ServerRef], now: datetime) -> list[Event]:
        """Give the GPR's GPUs to its slice; ``servers`` are the slice's running servers."""

    async def unbind(self, gpr: GPR, servers: list[ServerRef], now: datetime) -> list[Event]:
        """Take the GPR's GPUs back; ``servers`` are those started with any of them."""

    async def run_check(self, spec: CheckSpec, target: CheckTarget) -> Verdict:
        """Run one check of a kind in ``check_kinds`` on the target's node."""

    async def quarantine(self, node: str, reason: str) -> None:
        """Keep the cluster's own scheduler off a quarantined node (the planner already plans nothing on it)."""

    async def clear(self, node: str) -> None:
        """Undo ``quarantine``."""

    async def change_layout(
        self, node: str, mig: Mapping[str, int] | None, mig_config: str | None
    ) -> tuple[str | None, str]:
        """Start splitting each GPU of the machine ``node`` into the MIG instances ``mig`` (None: whole GPUs),
        on Kubernetes with the mig-parted config ``mig_config`` (None: derived); returns the config used (None
        where there is none) and what was done. LayoutChangeError when it cannot (core/layouts.py)."""

    async def layout_state(self, node: str, mig_config: str | None) -> tuple[str, str]:
        """How the last change of ``node``'s layout (with ``mig_config``) went: "pending", "done" or "failed",
        and what the backend says of it."""
