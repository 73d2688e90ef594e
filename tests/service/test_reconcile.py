"""The reconcile loop with a controllable clock and a backend double, on both databases.

The double records what the loop asks of the backend and fails on command; it
stands in for the local backend, whose own behaviour tests/backends covers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.backends import BindError, Inventory, UnbindError
from egs_hub.core import lifecycle
from egs_hub.core import model as core
from egs_hub.service.reconcile import Reconciler
from egs_hub.store import db, queries
from egs_hub.store.db import transaction
from egs_hub.store.models import EventRow, Slice

START = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

SHAPE = core.Shape("H100", 80, 4)
NODE = core.Node(name="n1", cluster="local", shape=SHAPE, gpus=tuple(f"GPU-{i}" for i in range(4)))


@dataclass
class Clock:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> None:
        self.now += timedelta(**delta)


@dataclass
class RecordingBackend:
    """A Backend double: records binds and unbinds; fails the next ones when told."""

    cluster: str = "local"
    kind: str = "double"
    binds: list[int] = field(default_factory=list)
    unbinds: list[int] = field(default_factory=list)
    fail_binds: list[Exception] = field(default_factory=list)
    fail_unbinds: list[Exception] = field(default_factory=list)

    async def discover(self) -> Inventory:
        raise AssertionError("the reconcile loop does not discover")

    async def bind(self, gpr, policy, servers, now):
        self.binds.append(gpr.id)
        if self.fail_binds:
            raise self.fail_binds.pop(0)
        return []

    async def unbind(self, gpr, servers, now):
        self.unbinds.append(gpr.id)
        if self.fail_unbinds:
            raise self.fail_unbinds.pop(0)
        return []


@pytest.fixture
def world(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    gpus = [
        core.GPU(uuid=u, index=i, node="n1", cluster="local", model="H100", memory_mib=81920)
        for i, u in enumerate(NODE.gpus)
    ]
    with transaction(sessions) as session:
        queries.sync_inventory(session, "local", "local", [NODE], gpus, START)
        for name in ("a", "b"):
            row = Slice(
                name=name,
                group_name=name,
                project_id=queries.project_id(session, START),
                created_at=START,
                updated_at=START,
            )
            queries.write_slice_policy(row, core.SlicePolicy())
            session.add(row)
    clock, backend = Clock(), RecordingBackend()
    yield sessions, clock, backend, Reconciler(sessions, {backend.cluster: backend}, clock, retry_interval=5)
    engine.dispose()


def submit(sessions, slice_name: str, gpus: int, minutes: int, now: datetime) -> int:
    spec = core.GPRSpec(slice=slice_name, duration=timedelta(minutes=minutes), gpus=gpus)
    with transaction(sessions) as session:
        row = queries.new_gpr_row(session, spec, "alice", now)
        return queries.apply(session, row, lifecycle.submit(row.id, spec, "alice", [], now)).id


def status(sessions, gpr_id: int) -> core.GPR:
    with sessions() as session:
        return queries.to_gpr(queries.get_gpr_row(session, gpr_id))


async def settle(reconciler: Reconciler) -> None:
    """Run passes until the backend tasks they start are done."""
    for _ in range(5):
        await reconciler.tick()
        await asyncio.gather(*list(reconciler._tasks.values()))


def kinds(sessions, gpr_id: int) -> list[str]:
    with sessions() as session:
        return [e.kind for e in session.query(EventRow).filter_by(gpr_id=gpr_id).order_by(EventRow.id)]


async def test_admits_binds_and_ends_the_window_on_time(world):
    sessions, clock, backend, reconciler = world
    gpr_id = submit(sessions, "a", 2, 30, clock.now)
    await settle(reconciler)
    gpr = status(sessions, gpr_id)
    assert gpr.status is core.Status.PROVISIONED and gpr.window_end == START + timedelta(minutes=30)
    assert backend.binds == [gpr_id]

    clock.advance(minutes=29, seconds=59)
    await settle(reconciler)
    assert status(sessions, gpr_id).status is core.Status.PROVISIONED
    clock.advance(seconds=1)
    await settle(reconciler)
    assert status(sessions, gpr_id).status is core.Status.COMPLETE
    assert backend.unbinds == [gpr_id]
    assert kinds(sessions, gpr_id) == ["submitted", "admitted", "provisioned", "window-ended", "complete"]
    with sessions() as session:
        assert queries.slice_usable_gpus(session, "a") == []


async def test_a_failed_bind_fails_the_gpr_and_frees_its_gpus_for_the_next(world):
    sessions, clock, backend, reconciler = world
    backend.fail_binds.append(BindError("node not Ready"))
    first = submit(sessions, "a", 4, 30, clock.now)
    second = submit(sessions, "b", 4, 30, clock.now)
    await settle(reconciler)
    failed = status(sessions, first)
    assert failed.status is core.Status.FAILED and failed.status_reason == "node not Ready"
    assert status(sessions, second).status is core.Status.PROVISIONED


async def test_a_slice_that_moves_gprs_off_failing_nodes_gets_another_node(world):
    sessions, clock, backend, reconciler = world
    other = core.Node(name="n2", cluster="local", shape=SHAPE, gpus=tuple(f"GPU-2-{i}" for i in range(4)))
    gpus = [
        core.GPU(uuid=u, index=i, node=n.name, cluster="local", model="H100", memory_mib=81920)
        for n in (NODE, other)
        for i, u in enumerate(n.gpus)
    ]
    with transaction(sessions) as session:
        queries.sync_inventory(session, "local", "local", [NODE, other], gpus, START)
    set_policy(sessions, "a", bind_failure="move")
    backend.fail_binds.append(BindError("node n1 is not Ready", ["n1"]))
    gpr_id = submit(sessions, "a", 4, 30, clock.now)
    await settle(reconciler)
    gpr = status(sessions, gpr_id)
    assert gpr.status is core.Status.PROVISIONED
    assert gpr.bound_nodes == ("n2",) and gpr.avoid_nodes == (("local", "n1"),)
    assert gpr.window_start == START and gpr.window_end == START + timedelta(minutes=30)
    assert kinds(sessions, gpr_id) == ["submitted", "admitted", "moved", "admitted", "provisioned"]
    with sessions() as session:
        moved = session.query(EventRow).filter_by(gpr_id=gpr_id, kind="moved").one()
    assert moved.reason == "node n1 is not Ready; queued again for other nodes"
    assert moved.data == {"cluster": "local", "nodes": ["n1"]}
    assert (moved.from_status, moved.to_status) == ("provisioning", "queued")


MOVE_FAILS = {
    "no other node could serve it": (
        BindError("node n1 is not Ready", ["n1"]),
        "node n1 is not Ready; no other node can serve it: no schedulable node offers any shape",
    ),
    "the backend names no node": (BindError("cannot check the GPUs: NVML gone"), "cannot check the GPUs: NVML gone"),
}


@pytest.mark.parametrize("error, reason", MOVE_FAILS.values(), ids=MOVE_FAILS.keys())
async def test_a_gpr_that_cannot_move_fails_with_the_reason(world, error, reason):
    sessions, clock, backend, reconciler = world
    set_policy(sessions, "a", bind_failure="move")
    backend.fail_binds.append(error)
    gpr_id = submit(sessions, "a", 4, 30, clock.now)
    await settle(reconciler)
    failed = status(sessions, gpr_id)
    assert (failed.status, failed.status_reason) == (core.Status.FAILED, reason)
    assert kinds(sessions, gpr_id) == ["submitted", "admitted", "failed"]


async def test_an_unexpected_bind_error_is_retried_not_failed(world):
    sessions, clock, backend, reconciler = world
    backend.fail_binds.append(RuntimeError("hub unreachable"))
    gpr_id = submit(sessions, "a", 1, 30, clock.now)
    await settle(reconciler)
    assert status(sessions, gpr_id).status is core.Status.PROVISIONING
    clock.advance(seconds=5)
    await settle(reconciler)
    assert status(sessions, gpr_id).status is core.Status.PROVISIONED
    assert backend.binds == [gpr_id, gpr_id]


async def test_an_unfinished_unbind_keeps_the_gpus_held_until_it_succeeds(world):
    sessions, clock, backend, reconciler = world
    holder = submit(sessions, "a", 4, 10, clock.now)
    await settle(reconciler)
    waiting = submit(sessions, "b", 4, 10, clock.now)
    backend.fail_unbinds.append(UnbindError("alice's server did not stop"))
    clock.advance(minutes=10)
    await settle(reconciler)
    assert status(sessions, holder).status is core.Status.RELEASING
    assert status(sessions, waiting).status is core.Status.QUEUED, "GPUs given away before they were back"
    clock.advance(seconds=5)
    await settle(reconciler)
    assert status(sessions, holder).status is core.Status.COMPLETE
    assert status(sessions, waiting).status is core.Status.PROVISIONED
    assert backend.unbinds == [holder, holder]


async def test_a_new_loop_resumes_provisioning_and_releasing_gprs_from_the_database(world):
    sessions, clock, backend, reconciler = world
    binding = submit(sessions, "a", 1, 30, clock.now)
    releasing = submit(sessions, "b", 1, 30, clock.now)
    # What a process killed mid-way leaves: one GPR admitted but not bound, one releasing.
    with transaction(sessions) as session:
        for gpr_id, gpu in ((binding, "GPU-0"), (releasing, "GPU-1")):
            row = queries.get_gpr_row(session, gpr_id)
            gpr = queries.apply(session, row, lifecycle.admit(queries.to_gpr(row), (gpu,), ("n1",), clock.now))
            queries.bind(session, gpr)
        row = queries.get_gpr_row(session, releasing)
        queries.apply(session, row, lifecycle.mark_provisioned(queries.to_gpr(row), "double", clock.now))
        queries.apply(
            session,
            row,
            lifecycle.begin_release(queries.to_gpr(row), core.EndReason.RELEASED_EARLY, "alice", "done", clock.now),
        )

    await settle(reconciler)
    assert status(sessions, binding).status is core.Status.PROVISIONED
    assert status(sessions, releasing).status is core.Status.COMPLETE
    assert (backend.binds, backend.unbinds) == ([binding], [releasing])
    assert kinds(sessions, binding) == ["submitted", "admitted", "provisioned"]
    assert kinds(sessions, releasing)[-1] == "complete"
    with sessions() as session:
        assert queries.slice_usable_gpus(session, "a") == [("GPU-0", binding)]
        assert queries.slice_usable_gpus(session, "b") == []


def set_policy(sessions, slice_name: str, **policy) -> None:
    with transaction(sessions) as session:
        queries.write_slice_policy(queries.get_slice(session, slice_name), core.SlicePolicy(**policy))


def submit_spec(sessions, spec: core.GPRSpec, now: datetime) -> int:
    with transaction(sessions) as session:
        row = queries.new_gpr_row(session, spec, "alice", now)
        return queries.apply(session, row, lifecycle.submit(row.id, spec, "alice", [], now)).id


async def evict_while_unbinding(world) -> tuple[int, int, int]:
    """b holds the node with two GPRs (priorities 50 and 60); a's urgent GPR (auto eviction)
    arrives; the first victim's unbind does not finish at once. Returns (low, other, urgent)."""
    sessions, clock, backend, reconciler = world
    set_policy(sessions, "a", eviction="auto")
    set_policy(sessions, "b", max_active_gprs=2, requeue_evicted=True)
    hour = timedelta(hours=1)
    low = submit_spec(sessions, core.GPRSpec(slice="b", duration=hour, gpus=2, priority=50), clock.now)
    other = submit_spec(sessions, core.GPRSpec(slice="b", duration=hour, gpus=2, priority=60), clock.now)
    await settle(reconciler)
    assert status(sessions, low).status is core.Status.PROVISIONED

    urgent = submit_spec(sessions, core.GPRSpec(slice="a", duration=hour, gpus=2, priority=250), clock.now)
    backend.fail_unbinds.append(UnbindError("the server did not stop yet"))
    await settle(reconciler)
    return low, other, urgent


async def test_eviction_evicts_no_more_while_its_victim_unbinds(world):
    sessions, clock, _, reconciler = world
    low, other, urgent = await evict_while_unbinding(world)
    # The lowest priority is evicted; while it unbinds, nobody else is.
    assert status(sessions, low).status is core.Status.RELEASING
    assert status(sessions, other).status is core.Status.PROVISIONED
    assert status(sessions, urgent).status is core.Status.QUEUED

    clock.advance(seconds=5)
    await settle(reconciler)
    assert status(sessions, low).status is core.Status.QUEUED
    assert status(sessions, other).status is core.Status.PROVISIONED
    assert kinds(sessions, low) == ["submitted", "admitted", "provisioned", "evicted", "requeued"]


async def test_the_gpr_evicted_for_starts_once_its_victim_is_unbound(world):
    sessions, clock, _, reconciler = world
    _, _, urgent = await evict_while_unbinding(world)
    clock.advance(seconds=5)
    await settle(reconciler)
    assert status(sessions, urgent).status is core.Status.PROVISIONED
