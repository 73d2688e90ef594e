"""Eviction through the live service: a high-priority GPR that cannot start ends
lower-priority preemptible provisioned GPRs, at once ("auto") or once an admin confirms
the planner's list ("confirm"); evicted GPRs are re-queued when their slice says so."""

from __future__ import annotations

from datetime import datetime

import pytest

from .hub import event_kinds, until_status


def provisioned(client, slice_name: str, gpus: int, priority: int, duration="10m") -> dict:
    gpr = client.post(
        "gprs",
        {"slice": slice_name, "gpus": gpus, "shape": "A100", "duration": duration, "priority": priority},
        expect=201,
    )
    return until_status(client, gpr["id"], "provisioned")


def first_evicted_at(client, gpr_id: int) -> str:
    """When the GPR was re-queued: its first window ended then."""
    (event,) = [e for e in client.get(f"events?gpr={gpr_id}")["events"] if e["kind"] == "requeued"]
    return event["time"].replace("Z", "+00:00")


def evicted_event(client, gpr_id: int) -> dict:
    (event,) = [e for e in client.get(f"events?gpr={gpr_id}")["events"] if e["kind"] == "evicted"]
    return event


def test_automatic_eviction_requeues_or_ends_the_victims(make_slice, user):
    alice, as_alice = user("alice")
    requeues = make_slice(members=(alice,), policy={"requeue_evicted": True})["name"]
    ends = make_slice(members=(alice,), policy={"requeue_evicted": False})["name"]
    urgent = make_slice(members=(alice,), policy={"eviction": "auto"})["name"]
    first = provisioned(as_alice, requeues, 2, priority=50)
    second = provisioned(as_alice, ends, 2, priority=60)

    high = as_alice.post(
        "gprs", {"slice": urgent, "gpus": 4, "shape": "A100", "duration": 5, "priority": 250}, expect=201
    )
    started = until_status(as_alice, high["id"], "provisioned")
    assert set(started["bound_gpus"]) == set(first["bound_gpus"]) | set(second["bound_gpus"])

    again = until_status(as_alice, first["id"], "queued")
    assert again["end_reason"] is None and again["bound_gpus"] == [] and again["window_start"] is None
    # The window it held before counts: usage (and budgets) keep the GPU-hours of the evicted window.
    (row,) = [r for r in as_alice.get("usage?group_by=slice&period=week")["rows"] if r["key"] == requeues]
    started_at = datetime.fromisoformat(first["window_start"].replace("Z", "+00:00"))
    held = datetime.fromisoformat(first_evicted_at(as_alice, first["id"])) - started_at
    assert row["gpu_hours_used"] == pytest.approx(2 * held.total_seconds() / 3600, rel=0.05, abs=2 / 3600)
    assert row["gpu_hours_used"] > 0
    assert [k for k, _ in event_kinds(as_alice, first["id"])][:5] == [
        "submitted",
        "admitted",
        "provisioned",
        "evicted",
        "requeued",
    ]
    assert ("requeued", "planner") in event_kinds(as_alice, first["id"])
    done = until_status(as_alice, second["id"], "complete")
    assert done["end_reason"] == "evicted"
    assert [k for k, _ in event_kinds(as_alice, second["id"])][-2:] == ["evicted", "complete"]
    for victim in (first, second):
        event = evicted_event(as_alice, victim["id"])
        assert event["actor"] == "planner" and f"GPR {high['id']}" in event["reason"]
        assert event["data"] == {"for_gpr": high["id"]}

    # The re-queued GPR starts again once the urgent window is over.
    until_status(as_alice, first["id"], "provisioned", timeout=20)


def test_an_admin_confirms_the_eviction_the_planner_proposes(admin, make_slice, user):
    alice, as_alice = user("alice")
    low = make_slice(members=(alice,))["name"]
    high_slice = make_slice(members=(alice,), policy={"eviction": "confirm"})["name"]
    victim = provisioned(as_alice, low, 4, priority=50)
    high = as_alice.post(
        "gprs", {"slice": high_slice, "gpus": 4, "shape": "A100", "duration": 30, "priority": 250}, expect=201
    )
    assert high["status"] == "queued"

    proposals = admin.get("queue/evictions", expect=200)["evictions"]
    assert [e for e in proposals if e["gpr_id"] == high["id"]] == [
        {
            "gpr_id": high["id"],
            "victims": [
                {
                    "id": victim["id"],
                    "slice": low,
                    "priority": 50,
                    "gpus": 4,
                    "window_end": victim["window_end"],
                    "status": "provisioned",
                }
            ],
            "automatic": False,
        }
    ]
    # Members neither see nor confirm evictions; nothing happens without an admin.
    as_alice.get("queue/evictions", expect=403)
    as_alice.post("queue/evictions", {"gpr_id": high["id"], "victims": [victim["id"]]}, expect=403)
    assert as_alice.get(f"gprs/{victim['id']}")["status"] == "provisioned"

    wrong = admin.post("queue/evictions", {"gpr_id": high["id"], "victims": [victim["id"], high["id"]]}, expect=409)
    assert f"is now GPRs {victim['id']}," in wrong["message"]
    done = admin.post("queue/evictions", {"gpr_id": high["id"], "victims": [victim["id"]]}, expect=200)
    assert done["gpr_id"] == high["id"] and [v["status"] for v in done["victims"]] == ["releasing"]
    # The list is stale now: confirming it again evicts nothing.
    admin.post("queue/evictions", {"gpr_id": high["id"], "victims": [victim["id"]]}, expect=409)

    until_status(as_alice, high["id"], "provisioned")
    until_status(as_alice, victim["id"], "queued")  # requeue_evicted is on by default
    event = evicted_event(as_alice, victim["id"])
    assert event["actor"] == "test-admin" and "confirmed by test-admin" in event["reason"]
    assert f"GPR {high['id']}" in event["reason"]
