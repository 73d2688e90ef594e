"""Store queries on SQLite and PostgreSQL: round trips, bindings, inventory, snapshot."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from egs_hub.core import lifecycle
from egs_hub.core import model as core
from egs_hub.store import db, queries
from egs_hub.store.db import transaction
from egs_hub.store.models import Slice

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SHAPE = core.Shape("H100", 80, 4)


def gpus_of(node: str, count: int = 4) -> list[core.GPU]:
    return [
        core.GPU(
            uuid=f"GPU-{node}-{i}",
            index=i,
            node=node,
            cluster="local",
            model="NVIDIA H100 80GB HBM3",
            memory_mib=81559,
        )
        for i in range(count)
    ]


def node(name: str, count: int = 4) -> core.Node:
    return core.Node(name=name, cluster="local", shape=SHAPE, gpus=tuple(f"GPU-{name}-{i}" for i in range(count)))


@pytest.fixture
def sessions(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    with transaction(sessions) as session:
        queries.sync_inventory(session, "local", "local", [node("a"), node("b")], gpus_of("a") + gpus_of("b"), NOW)
        row = Slice(
            name="team-a",
            group_name="team-a",
            project_id=queries.project_id(session, NOW),
            created_at=NOW,
            updated_at=NOW,
        )
        queries.write_slice_policy(row, core.SlicePolicy(max_gpus=8, max_duration=timedelta(days=1)))
        session.add(row)
    yield sessions
    engine.dispose()


def submit(sessions, gpus: int = 2) -> core.GPR:
    spec = core.GPRSpec(
        slice="team-a",
        duration=timedelta(hours=1),
        gpus=gpus,
        name="train",
        start_after=NOW + timedelta(minutes=5),
        idle_timeout=timedelta(minutes=30),
    )
    with transaction(sessions) as session:
        row = queries.new_gpr_row(session, spec, "alice", NOW)
        return queries.apply(session, row, lifecycle.submit(row.id, spec, "alice", [], NOW))


def admit(sessions, gpr_id: int, gpus: tuple[str, ...]) -> core.GPR:
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, gpr_id, lock=True)
        gpr = queries.apply(session, row, lifecycle.admit(queries.to_gpr(row), gpus, ("a",), NOW))
        queries.bind(session, gpr)
        return gpr


def test_gpr_round_trips_through_its_row(sessions):
    submitted = submit(sessions)
    with sessions() as session:
        assert queries.to_gpr(queries.get_gpr_row(session, submitted.id)) == submitted


def test_admitted_gpr_keeps_its_gpus_in_order(sessions):
    gpr = admit(sessions, submit(sessions).id, ("GPU-a-2", "GPU-a-0"))
    with sessions() as session:
        stored = queries.to_gpr(queries.get_gpr_row(session, gpr.id))
        assert stored.bound_gpus == ("GPU-a-2", "GPU-a-0")
        assert stored.bound_nodes == ("a",)
        assert queries.slice_usable_gpus(session, "team-a") == [("GPU-a-0", gpr.id), ("GPU-a-2", gpr.id)]


def test_a_page_of_gprs_reads_those_not_known_and_equals_their_rows(sessions):
    gprs = [submit(sessions) for _ in range(5)]
    gprs[1] = admit(sessions, gprs[1].id, ("GPU-a-2", "GPU-a-0"))
    with sessions() as session:
        rows = [queries.to_gpr(queries.get_gpr_row(session, g.id)) for g in gprs[1:4]]
        assert queries.gprs_page(session, after_id=gprs[0].id, limit=3) == rows
        assert rows[0].bound_gpus == ("GPU-a-2", "GPU-a-0")
        # those known are taken as they are (the caller's memory is as current as the database)
        known = {gprs[2].id: dataclasses.replace(gprs[2], status_reason="from memory")}
        page = queries.gprs_page(session, after_id=gprs[0].id, limit=3, known=known)
        assert page == [rows[0], known[gprs[2].id], rows[2]]
        assert queries.gprs_page(session, statuses=["provisioning"], limit=10) == [rows[0]]


def test_a_gpu_cannot_be_bound_twice(sessions):
    first = admit(sessions, submit(sessions).id, ("GPU-a-0",))
    second = submit(sessions)
    with pytest.raises(IntegrityError):
        admit(sessions, second.id, ("GPU-a-0",))
    with sessions() as session:
        assert queries.get_gpr_row(session, second.id).status == core.Status.QUEUED
        assert queries.slice_usable_gpus(session, "team-a") == [("GPU-a-0", first.id)]


def test_releasing_gpus_are_not_usable_and_unbind_frees_them(sessions):
    gpr = admit(sessions, submit(sessions).id, ("GPU-a-0",))
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, gpr.id)
        queries.apply(session, row, lifecycle.mark_provisioned(queries.to_gpr(row), "local", NOW))
        queries.apply(
            session,
            row,
            lifecycle.begin_release(queries.to_gpr(row), core.EndReason.RELEASED_EARLY, "alice", "done", NOW),
        )
    with sessions() as session:
        assert queries.slice_usable_gpus(session, "team-a") == []
        assert queries.load_snapshot(session, NOW).bookings[0].releasing
    with transaction(sessions) as session:
        queries.unbind(session, gpr.id)
    admit(sessions, submit(sessions).id, ("GPU-a-0",))


def test_every_transition_writes_an_event(sessions):
    gpr = admit(sessions, submit(sessions).id, ("GPU-a-0",))
    with sessions() as session:
        kinds = [e.kind for e in session.query(queries.EventRow).filter_by(gpr_id=gpr.id).order_by("id")]
    assert kinds == ["submitted", "admitted"]


def test_inventory_sync_marks_lost_and_returning_gpus(sessions):
    with transaction(sessions) as session:
        events = queries.sync_inventory(session, "local", "local", [node("a", 3)], gpus_of("a", 3), NOW)
    assert Counter(e.kind for e in events) == {"gpu-lost": 5, "node-lost": 1}
    with sessions() as session:
        snapshot = queries.load_snapshot(session, NOW)
        assert [n.name for n in snapshot.nodes] == ["a"]
        assert "GPU-a-3" not in snapshot.nodes[0].gpus
    with transaction(sessions) as session:
        events = queries.sync_inventory(
            session, "local", "local", [node("a"), node("b")], gpus_of("a") + gpus_of("b"), NOW
        )
    assert Counter(e.kind for e in events) == {"gpu-back": 5, "node-back": 1}


def test_snapshot_sorts_gprs_into_bookings_queue_and_pending(sessions):
    held = admit(sessions, submit(sessions).id, ("GPU-a-0",))
    queued = submit(sessions)
    spec = core.GPRSpec(slice="team-a", duration=timedelta(days=2), gpus=1)
    with transaction(sessions) as session:
        row = queries.new_gpr_row(session, spec, "bob", NOW)
        pending = queries.apply(session, row, lifecycle.submit(row.id, spec, "bob", ["too long"], NOW))
    with sessions() as session:
        snapshot = queries.load_snapshot(session, NOW)
    assert [b.gpr_id for b in snapshot.bookings] == [held.id]
    assert [r.gpr_id for r in snapshot.queue] == [queued.id]
    assert [r.gpr_id for r in snapshot.pending] == [pending.id]
    assert snapshot.policies["team-a"].max_gpus == 8
    assert snapshot.policies["team-a"].max_duration == timedelta(days=1)


def test_servers_holding_finds_servers_by_gpu(sessions):
    with transaction(sessions) as session:
        queries.record_server(session, "alice", "", "team-a", ["GPU-a-0", "GPU-a-1"], NOW)
        queries.record_server(session, "bob", "big", "team-a", ["GPU-b-0"], NOW)
    with sessions() as session:
        assert [s.user for s in queries.servers_holding(session, ["GPU-a-1"])] == ["alice"]
    with transaction(sessions) as session:
        queries.forget_server(session, "alice", "")
    with sessions() as session:
        assert queries.servers_holding(session, ["GPU-a-1"]) == []


def test_slice_policy_round_trips_every_field(sessions):
    policy = core.SlicePolicy(
        max_gpus=4,
        max_duration=timedelta(hours=2),
        max_priority=200,
        auto_approve_max_gpus=2,
        max_active_gprs=3,
        restart_servers=True,
        max_gpu_hours=12.5,
        reject_over_limits=True,
        eviction="auto",
        requeue_evicted=False,
        share=0.25,
    )
    with transaction(sessions) as session:
        queries.write_slice_policy(queries.get_slice(session, "team-a"), policy)
    with sessions() as session:
        assert queries.slice_policy(queries.get_slice(session, "team-a")) == policy


def test_snapshot_books_priority_and_preemptible_and_counts_usage(sessions):
    held = admit(sessions, submit(sessions).id, ("GPU-a-0", "GPU-a-1"))
    later = NOW + timedelta(hours=1)
    with sessions() as session:
        snapshot = queries.load_snapshot(session, later, half_life=timedelta(hours=1))
        uses = queries.gpu_uses(session, NOW - timedelta(days=7), later)
    booking = snapshot.bookings[0]
    assert (booking.gpr_id, booking.priority, booking.preemptible) == (held.id, 101, True)
    # 2 GPUs held for an hour that is still running: counted up to now, one half-life's worth.
    assert [(u.slice, u.gpus, u.start, u.end) for u in uses] == [("team-a", 2, NOW, later)]
    assert snapshot.usage["team-a"] == pytest.approx(2 * 3600 / math.log(2) * 0.5)


def test_mig_instances_and_shares_round_trip_and_count_as_their_part_of_a_gpu(sessions):
    mig_shape = core.Shape("H100", 80, 7, "1g.10gb")
    instances = [
        core.GPU(f"MIG-c-{k}", k, "c:1g.10gb", "local", "H100 MIG 1g.10gb", 9856, parent="GPU-c-0", profile="1g.10gb")
        for k in range(7)
    ]
    mig = core.Node("c:1g.10gb", "local", mig_shape, tuple(g.uuid for g in instances))
    shares = [
        core.GPU(f"GPU-d-0::{k}", k, "d:shared", "local", "H100 (time-sliced)", 81559, parent="GPU-d-0")
        for k in range(4)
    ]
    shared = core.Node("d:shared", "local", core.Shape("H100", 80, 4, replicas=4), tuple(g.uuid for g in shares))
    with transaction(sessions) as session:
        queries.sync_inventory(
            session,
            "local",
            "local",
            [node("a"), node("b"), mig, shared],
            gpus_of("a") + gpus_of("b") + instances + shares,
            NOW,
        )
    held = admit(sessions, submit(sessions, gpus=3).id, ("MIG-c-0", "MIG-c-1", "MIG-c-2"))
    whole = admit(sessions, submit(sessions, gpus=1).id, ("GPU-a-0",))
    later = NOW + timedelta(hours=1)
    with sessions() as session:
        nodes, _ = queries.planning_inventory(session)
        uses = queries.gpu_uses(session, NOW - timedelta(days=7), later)
        stored = {g.uuid: (g.parent_uuid, g.mig_profile) for _, _, g in queries.present_gpus(session)}
        fractions = queries.unit_fractions(session, ["MIG-c-0", "GPU-a-0", "GPU-d-0::1", "nowhere"])
        seen = queries.devices(session, ["GPU-d-0::2", "MIG-c-1", "GPU-d-0::0", "GPU-a-1"])
    assert [n for n in nodes if n.name in ("c:1g.10gb", "d:shared")] == [mig, shared]
    assert sorted((u.gpus, u.start) for u in uses) == [(pytest.approx(3 / 7), NOW), (1, NOW)]
    assert fractions == {"MIG-c-0": pytest.approx(1 / 7), "GPU-d-0::1": 0.25}
    assert seen == ["GPU-d-0", "MIG-c-1", "GPU-a-1"]  # a server sees a share's GPU, once
    assert stored["MIG-c-6"] == ("GPU-c-0", "1g.10gb") and stored["GPU-a-0"] == (None, None)
    assert held.bound_gpus[0] == "MIG-c-0" and whole.bound_gpus == ("GPU-a-0",)


def test_usage_ends_at_ended_at_and_skips_windows_before_since(sessions):
    gpr = admit(sessions, submit(sessions).id, ("GPU-a-0",))
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, gpr.id)
        queries.apply(session, row, lifecycle.mark_provisioned(queries.to_gpr(row), "local", NOW))
        ended = NOW + timedelta(minutes=30)
        queries.apply(
            session,
            row,
            lifecycle.begin_release(queries.to_gpr(row), core.EndReason.RELEASED_EARLY, "alice", "", ended),
        )
        queries.apply(session, row, lifecycle.complete(queries.to_gpr(row), "local", ended))
        queries.unbind(session, gpr.id)
    with sessions() as session:
        week = queries.gpu_uses(session, NOW - timedelta(days=7), NOW + timedelta(days=1))
        assert [(u.gpus, u.start, u.end) for u in week] == [(1, NOW, ended)]
        assert queries.gpu_uses(session, ended + timedelta(seconds=1), NOW + timedelta(days=1)) == []
        assert queries.gpu_uses(session, NOW - timedelta(days=1), NOW + timedelta(days=1), ["other"]) == []


def test_leftovers_are_kept_once_per_slice_and_cluster_until_forgotten(sessions):
    with transaction(sessions) as session:
        queries.leave_behind(session, "team-a", ["west", "east"])
    with transaction(sessions) as session:
        queries.leave_behind(session, "team-a", ["east"])  # left again: still one record
        queries.leave_behind(session, "team-b", ["east"])
    with sessions() as session:
        assert queries.leftovers(session) == [("team-a", "east"), ("team-b", "east"), ("team-a", "west")]
    with transaction(sessions) as session:
        queries.forget_leftover(session, "team-a", "east")
    with sessions() as session:
        assert queries.leftovers(session) == [("team-b", "east"), ("team-a", "west")]
