"""The queue of GPRs waiting for GPUs, in the order the planner serves them.

Vocabulary: a *band* is a priority range (DESIGN.md: low 1-100, medium
101-200, high 201-300); a slice's *factor* is its fair-share factor in (0, 1]
(see fairshare.py); a request's *key* is its place in the order, and a
*position* counts from 1 at the head. An admin moving a GPR up or down the
queue changes its priority.

The *order* within a band is service config (``Order``): by default fair share first, then
submit time. A multifactor order (after Slurm's multifactor priority, its age term linear so
that an order made now holds later) gives each request a *virtual submit time*: its submit
time, later by ``size_s_per_gpu_hour`` for each GPU-hour it asks for (shortest first, with
aging: a request waits behind a bigger one submitted earlier only until its own size
outweighs the wait) and, with ``fair_share_s``, earlier by that many seconds times its tree
factor (fair share weighed against waiting instead of ahead of it). A request is then
overtaken only by requests submitted at most ``fair_share_s`` plus its own size penalty
after it: nothing starves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping

from sortedcontainers import SortedList

from .fairshare import UNUSED, TreeFactor
from .model import FAIR_SHARE_FIRST, PRIORITY_MAX, PRIORITY_MIN, GPRSpec, Order
from .snapshot import Request

BAND_WIDTH = 100


def _asked_gpus(spec: GPRSpec) -> float:
    return spec.gpus or 0


def band(priority: int) -> int:
    """0 for low (1-100), 1 for medium (101-200), 2 for high (201-300)."""
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(f"priority {priority} is outside {PRIORITY_MIN}-{PRIORITY_MAX}")
    return (priority - 1) // BAND_WIDTH


def queue_key(request: Request, factor: TreeFactor = UNUSED, order: Order = FAIR_SHARE_FIRST, gpus: float = 0) -> tuple:
    """The request's place in the queue; smaller keys are served first.

    Order (``FAIR_SHARE_FIRST``, the default): higher band, then higher fair-share factor of its project,
    then of its slice within the project (``factor``, fairshare.tree_factors: fair share
    reorders work only within a band), then higher priority value, then earlier (virtual)
    submission, then lower GPR id (a deterministic tie-break). With ``order.fair_share_s``:
    higher band, higher priority value, earlier virtual submit time (module doc), lower id.
    ``gpus``: the GPUs the request holds, for its size (a request for whole nodes asks for
    none by itself: planner.gpu_count).
    """
    spec = request.spec
    priority = spec.priority
    project, own = factor
    submitted = request.submitted_at.timestamp()
    if order.size_s_per_gpu_hour:
        submitted += order.size_s_per_gpu_hour * gpus * spec.duration.total_seconds() / 3600
    if order.fair_share_s is None:
        return (-band(priority), -project, -own, -priority, submitted, request.gpr_id)
    return (-band(priority), -priority, submitted - order.fair_share_s * (project + own) / 2, request.gpr_id)


def order_key(
    factors: Mapping[str, TreeFactor], order: Order = FAIR_SHARE_FIRST, gpus: Callable[[GPRSpec], float] = _asked_gpus
) -> Callable[[Request], tuple]:
    """``queue_key`` with the factor of the request's slice (``factors``; a slice they do not name
    gets ``UNUSED``), ``order``, and the GPUs the request holds (``gpus``)."""

    def key(request: Request) -> tuple:
        spec = request.spec
        held = gpus(spec) if order.size_s_per_gpu_hour else 0
        return queue_key(request, factors.get(spec.slice, UNUSED), order, held)

    return key


class PriorityQueue:
    """Queued requests kept in ``queue_key`` order; push, remove, re-prioritise and
    position are O(log n).

    ``factors`` maps a slice name to its tree factor; slices it does not name get (1.0, 1.0).
    ``gpus``: the GPUs a spec holds, for its size in ``order``.
    """

    def __init__(
        self,
        requests: Iterable[Request] = (),
        factors: Mapping[str, TreeFactor] | None = None,
        order: Order = FAIR_SHARE_FIRST,
        gpus: Callable[[GPRSpec], float] = _asked_gpus,
    ):
        self.key = order_key(dict(factors or {}), order, gpus)  # queue_key with its factor, order and GPUs
        self._by_id: dict[int, tuple[tuple, Request]] = {}
        for request in requests:
            self._check_new(request)
            self._by_id[request.gpr_id] = (self.key(request), request)
        self._keys = SortedList(key for key, _ in self._by_id.values())  # one sort, not n inserts

    def push(self, request: Request) -> None:
        self._check_new(request)
        key = self.key(request)
        self._keys.add(key)
        self._by_id[request.gpr_id] = (key, request)

    def remove(self, gpr_id: int) -> Request:
        """Take the request out of the queue and return it."""
        key, request = self._entry(gpr_id)
        self._keys.remove(key)
        del self._by_id[gpr_id]
        return request

    def change_priority(self, gpr_id: int, priority: int) -> Request:
        """Give the request a new priority (moving it in the queue) and return the new request."""
        old_key, request = self._entry(gpr_id)
        band(priority)  # raises before anything changes when the priority is out of range
        changed = dataclasses.replace(request, spec=dataclasses.replace(request.spec, priority=priority))
        key = self.key(changed)
        self._keys.remove(old_key)
        self._keys.add(key)
        self._by_id[gpr_id] = (key, changed)
        return changed

    def position(self, gpr_id: int) -> int:
        """The request's 1-based position in the queue."""
        key, _ = self._entry(gpr_id)
        return self._keys.index(key) + 1

    def position_of(self, key: tuple) -> int:
        """The 1-based position a request with ``key`` would take if pushed."""
        return self._keys.bisect_left(key) + 1

    def __iter__(self) -> Iterator[Request]:
        return (self._by_id[key[-1]][1] for key in self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, gpr_id: object) -> bool:
        return gpr_id in self._by_id

    def _check_new(self, request: Request) -> None:
        if request.gpr_id in self._by_id:
            raise ValueError(f"GPR {request.gpr_id} is already in the queue")

    def _entry(self, gpr_id: int) -> tuple[tuple, Request]:
        try:
            return self._by_id[gpr_id]
        except KeyError:
            raise KeyError(f"GPR {gpr_id} is not in the queue") from None
