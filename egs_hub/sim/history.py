"""What-if capacity planning from a service's own history (issue 21): the GPRs it recorded as a
trace, its nodes as an inventory, and that inventory changed (``--add-nodes``, ``--remove-nodes``).

Vocabulary: the *history* is every GPR submitted in the ``since`` before ``now`` that queued and was
not cancelled, rejected or failed before it started. Each becomes a job submitted when it asked to
start (its submit, or its ``start_after``), for its window's length, with its shape and cluster, that
really ran as long as it held its GPUs (released early: until it was; still running or queued: its
whole window). The *recorded* waits are the real ones (start minus asked start) of those that started.
The inventory is the nodes the service plans on now (present and not quarantined), by cluster and shape.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session

from ..core.capacity_change import ChangeError, changed_groups, planned_groups
from ..store import db, queries
from .cluster import Inventory
from .metrics import waits_summary
from .trace import Job, SimInputError, Trace


@dataclass(frozen=True)
class History:
    trace: Trace
    inventory: Inventory
    recorded: dict  # waits_summary of the real waits (JSON keys as a replay's)
    slices: dict[str, dict]  # the same per slice
    held: tuple[tuple[float, float, int], ...]  # (start, end, GPUs) of each window really held, from t0
    prices: dict[tuple[str, str], float]  # (cluster, shape name) -> price per GPU-hour, as the service has them


def read_history(session: Session, since: timedelta, now: datetime) -> History:
    """The service's history over ``since`` before ``now``; SimInputError when it holds no GPR or node."""
    t0 = now - since
    jobs, waits, held = [], {}, []
    for row in queries.history_rows(session, t0):
        asked = max(row.created_at, row.start_after or row.created_at)
        duration = float(row.duration_s)
        if row.window_start is None:
            actual = duration
        else:
            waits.setdefault(row.slice, []).append((row.window_start - asked).total_seconds())
            ran = (row.ended_at - row.window_start).total_seconds() if row.ended_at else duration
            actual = min(max(ran, 1.0), duration)
            end = row.ended_at or min(now, row.window_end or now)
            held.append(((row.window_start - t0).total_seconds(), (end - t0).total_seconds(), len(row.allocations)))
        job = Job(
            submit_s=max((asked - t0).total_seconds(), 0.0),
            slice=row.slice,
            duration_s=duration,
            actual_s=actual,
            gpus=row.gpus,
            nodes=row.nodes,
            priority=row.priority,
            shape=row.shape,
            cluster=row.cluster,
        )
        jobs.append(job)
    if not jobs:
        raise SimInputError(f"the database holds no GPR submitted since {t0.isoformat()} that queued")
    inventory = planned_inventory(session)
    if not inventory.groups:
        raise SimInputError("the database holds no node to plan on")
    jobs.sort(key=lambda j: j.submit_s)
    trace = Trace("history", tuple(jobs), since.total_seconds(), {}, windowed=True)
    everyone = [wait for slice_waits in waits.values() for wait in slice_waits]
    slices = {name: waits_summary(waits.get(name, [])) for name in trace.slices}
    prices = queries.prices(session)
    return History(trace, inventory, waits_summary(everyone), slices, tuple(held), prices)


def planned_inventory(session: Session) -> Inventory:
    """The nodes the service plans on now (present, not quarantined), one group per cluster and shape."""
    return Inventory(planned_groups(queries.planned_node_shapes(session)))


def parse_change(value: str, option: str) -> tuple[str, int]:
    """``SHAPE:N`` (``H100-80GB x8:2``, ``H100:2``) as (shape, N); SimInputError naming ``option``."""
    shape, sep, count = value.rpartition(":")
    if not sep or not shape.strip():
        raise SimInputError(f"{option} must be SHAPE:N (e.g. 'H100-80GB x8:2'), got {value!r}")
    try:
        n = int(count)
    except ValueError:
        raise SimInputError(f"{option} {value!r}: N must be a whole number, got {count!r}") from None
    if n < 1:
        raise SimInputError(f"{option} {value!r}: N must be at least 1")
    return shape.strip(), n


def changed(inventory: Inventory, add: list[tuple[str, int]], remove: list[tuple[str, int]]) -> Inventory:
    """``inventory`` with nodes added to (or removed from) the first group whose shape matches; a shape
    no group has is added, when named in full (``MODEL-MEMGB xG``), on the ``what-if`` cluster
    (core/capacity_change.py); SimInputError when a change cannot be made."""
    try:
        return replace(inventory, groups=changed_groups(inventory.groups, add, remove))
    except ChangeError as e:
        raise SimInputError(f"--{e.side}-nodes {e.detail}" if e.side else e.detail) from None


def priced(
    prices: dict[tuple[str, str], float], inventory: Inventory, given: list[tuple[str, float]]
) -> dict[tuple[str, str], float]:
    """``prices`` with the ``given`` (shape, price per GPU-hour) set for every group of a matching shape."""
    out = dict(prices)
    for wanted, price in given:
        out.update({(g.cluster, g.shape.name): price for g in inventory.groups if g.shape.matches(wanted)})
    return out


def capacity_cost(inventory: Inventory, prices: dict[tuple[str, str], float], span_s: float) -> float | None:
    """What the nodes' GPU-hours over ``span_s`` cost at their prices; None when a shape has no price."""
    cost = 0.0
    for g in inventory.groups:
        price = prices.get((g.cluster, g.shape.name))
        if g.count and price is None:
            return None
        cost += g.count * g.shape.gpus_per_node * span_s / 3600 * (price or 0.0)
    return cost


def parse_price(value: str) -> tuple[str, float]:
    """``SHAPE=USD`` (``B200-192GB x8=6.5``) as (shape, price per GPU-hour)."""
    shape, sep, amount = value.rpartition("=")
    try:
        price = float(amount)
    except ValueError:
        price = -1.0
    if not sep or not shape.strip() or not 0 <= price < float("inf"):
        raise SimInputError(f"--price must be SHAPE=PRICE per GPU-hour (e.g. 'B200-192GB x8=6.5'), got {value!r}")
    return shape.strip(), price


def load_history(db_url: str, since: timedelta, now: datetime) -> History:
    """``read_history`` from the database at ``db_url`` (read only); SimInputError when it cannot be read."""
    try:
        engine = db.make_engine(db_url)
    except (ArgumentError, ValueError, db.DatabaseError) as e:
        raise SimInputError(f"--from-db {db_url!r}: {e}") from None
    try:
        db.check_schema(engine)
        with db.make_sessions(engine)() as session:
            return read_history(session, since, now)
    except (db.DatabaseError, SQLAlchemyError) as e:
        raise SimInputError(f"--from-db: cannot read the database: {e}") from None
    finally:
        engine.dispose()
