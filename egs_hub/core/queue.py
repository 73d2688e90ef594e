"""The queue of GPRs waiting for GPUs, in the order the planner serves them.

Vocabulary: a *band* is a priority range (DESIGN.md: low 1-100, medium
101-200, high 201-300); a slice's *factor* is its fair-share factor in (0, 1]
(see fairshare.py); a request's *key* is its place in the order, and a
*position* counts from 1 at the head. An admin moving a GPR up or down the
queue changes its priority.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from sortedcontainers import SortedList

from .fairshare import UNUSED, TreeFactor
from .model import PRIORITY_MAX, PRIORITY_MIN
from .snapshot import Request

BAND_WIDTH = 100


def band(priority: int) -> int:
    """0 for low (1-100), 1 for medium (101-200), 2 for high (201-300)."""
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(f"priority {priority} is outside {PRIORITY_MIN}-{PRIORITY_MAX}")
    return (priority - 1) // BAND_WIDTH


def queue_key(request: Request, factor: TreeFactor = UNUSED) -> tuple:
    """The request's place in the queue; smaller keys are served first.

    Order: higher band, then higher fair-share factor of its project, then of its slice
    within the project (``factor``, fairshare.tree_factors: fair share reorders work only
    within a band), then higher priority value, then earlier submission, then lower GPR
    id (a deterministic tie-break).
    """
    priority = request.spec.priority
    project, own = factor
    return (-band(priority), -project, -own, -priority, request.submitted_at.timestamp(), request.gpr_id)


class PriorityQueue:
    """Queued requests kept in ``queue_key`` order; push, remove, re-prioritise and
    position are O(log n).

    ``factors`` maps a slice name to its tree factor; slices it does not name get (1.0, 1.0).
    """

    def __init__(self, requests: Iterable[Request] = (), factors: Mapping[str, TreeFactor] | None = None):
        self._factors = dict(factors or {})
        self._by_id: dict[int, tuple[tuple, Request]] = {}
        for request in requests:
            self._check_new(request)
            self._by_id[request.gpr_id] = (self.key(request), request)
        self._keys = SortedList(key for key, _ in self._by_id.values())  # one sort, not n inserts

    def key(self, request: Request) -> tuple:
        """``queue_key`` with this queue's factor for the request's slice."""
        return queue_key(request, self._factors.get(request.spec.slice, UNUSED))

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
