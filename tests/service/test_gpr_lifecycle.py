"""GPRs through the live service: windows end on time, approvals, the queue and its
estimates, priority changes, edits and cancellation."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from .hub import wait_for

FINISHED = ("complete", "cancelled", "rejected", "failed")


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def status_of(client, gpr_id: int) -> dict:
    return client.get(f"gprs/{gpr_id}", expect=200)


def until_status(client, gpr_id: int, status: str, timeout: float = 15) -> dict:
    return wait_for(
        lambda: (g := status_of(client, gpr_id))["status"] == status and g, timeout, f"GPR {gpr_id} {status}"
    )


def test_a_window_ends_on_time(hub, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))
    gpr = as_alice.post("gprs", {"slice": team["name"], "gpus": 1, "duration": 4}, expect=201)
    provisioned = until_status(as_alice, gpr["id"], "provisioned")
    window_end = parse(provisioned["window_end"])
    assert window_end - parse(provisioned["window_start"]) == timedelta(seconds=4)

    done = until_status(as_alice, gpr["id"], "complete", timeout=15)
    assert done["end_reason"] == "window-ended"
    ended = [e for e in as_alice.get(f"events?gpr={gpr['id']}")["events"] if e["kind"] == "window-ended"]
    assert len(ended) == 1
    late = parse(ended[0]["time"]) - window_end
    assert timedelta(0) <= late < timedelta(seconds=2), f"window ended {late} after its end"
    assert parse(done["ended_at"]) - window_end < timedelta(seconds=3)
    assert as_alice.get(f"slices/{team['name']}")["gpus"] == []


def test_over_policy_waits_for_an_admin_who_approves_or_denies(hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,), policy={"auto_approve_max_gpus": 2, "max_duration": "1h"})

    waits = as_alice.post("wait-times", {"slice": team["name"], "gpus": 4, "duration": "2h"}, expect=200)
    assert len(waits["needs_approval"]) == 2

    big = as_alice.post("gprs", {"slice": team["name"], "gpus": 4, "duration": 600}, expect=201)
    assert big["status"] == "pending-approval" and "auto-approval limit" in big["status_reason"]
    long = as_alice.post("gprs", {"slice": team["name"], "gpus": 1, "duration": "2h"}, expect=201)
    assert long["status"] == "pending-approval" and "max_duration" in long["status_reason"]

    as_alice.post(f"gprs/{big['id']}/approve", expect=403)
    approved = admin.post(f"gprs/{big['id']}/approve", {"reason": "paper deadline"}, expect=200)
    assert approved["status"] in ("queued", "provisioning", "provisioned")
    until_status(as_alice, big["id"], "provisioned")

    denied = admin.post(f"gprs/{long['id']}/deny", {"reason": "use 1h windows"}, expect=200)
    assert denied["status"] == "rejected" and denied["status_reason"] == "use 1h windows"
    admin.post(f"gprs/{long['id']}/approve", expect=409)
    events = as_alice.get(f"events?gpr={long['id']}")["events"]
    assert [(e["kind"], e["actor"]) for e in events] == [("submitted", alice), ("rejected", "test-admin")]


def test_queue_estimates_are_when_gpus_free_and_are_kept(hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    bob, as_bob = user("bob")
    a = make_slice(members=(alice,))
    b = make_slice(members=(bob,))
    # Fill the A100 node (4 GPUs) for 6 s, then queue behind it on that shape.
    holder = as_alice.post("gprs", {"slice": a["name"], "gpus": 4, "duration": 6, "shape": "A100"}, expect=201)
    holder = until_status(as_alice, holder["id"], "provisioned")
    queued = as_bob.post("gprs", {"slice": b["name"], "gpus": 2, "duration": 30, "shape": "A100"}, expect=201)
    assert queued["status"] == "queued"
    estimate = parse(queued["estimated_start"])
    assert abs(estimate - parse(holder["window_end"])) < timedelta(seconds=1)

    queue = as_bob.get("queue", expect=200)["queue"]
    mine = next(q for q in queue if q["id"] == queued["id"])
    assert mine["queue_position"] >= 1 and mine["estimated_start"] == queued["estimated_start"]
    others = [q for q in queue if q["slice"] != b["name"]]
    assert all(q["requested_by"] is None for q in others)

    started = until_status(as_bob, queued["id"], "provisioned", timeout=20)
    assert parse(started["window_start"]) - estimate < timedelta(seconds=2), "the estimate was not kept"
    assert set(started["bound_gpus"]) <= set(holder["bound_gpus"])


def test_admin_moves_a_gpr_up_the_queue_and_owner_edits_before_provisioning(hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    bob, as_bob = user("bob")
    a = make_slice(members=(alice,))
    b = make_slice(members=(bob, alice))
    holder = as_alice.post("gprs", {"slice": a["name"], "gpus": 4, "duration": 20, "shape": "A100"}, expect=201)
    until_status(as_alice, holder["id"], "provisioned")
    first = as_bob.post("gprs", {"slice": b["name"], "gpus": 4, "duration": 60, "shape": "A100"}, expect=201)
    second = as_alice.post("gprs", {"slice": b["name"], "gpus": 4, "duration": 60, "shape": "A100"}, expect=201)
    assert status_of(as_bob, first["id"])["queue_position"] < status_of(as_bob, second["id"])["queue_position"]

    moved = admin.call("PATCH", f"gprs/{second['id']}", {"priority": 250}, expect=200)
    assert moved["priority"] == 250
    assert moved["queue_position"] < status_of(as_bob, first["id"])["queue_position"]
    kinds = [e["kind"] for e in admin.get(f"events?gpr={second['id']}")["events"]]
    assert kinds[-1] == "priority-changed"

    # Only the owner (or an admin) edits; a member who did not ask gets 403.
    as_alice.call("PATCH", f"gprs/{first['id']}", {"duration": "2m"}, expect=403)
    edited = as_bob.call("PATCH", f"gprs/{first['id']}", {"duration": "2m", "name": "smaller"}, expect=200)
    assert edited["duration"] == 120 and edited["name"] == "smaller"
    as_bob.call("PATCH", f"gprs/{first['id']}", {"priority": 301}, expect=400)

    cancelled = as_bob.call("DELETE", f"gprs/{first['id']}", expect=200)
    assert cancelled["status"] == "cancelled"
    as_bob.call("DELETE", f"gprs/{first['id']}", expect=409)
    as_alice.call("DELETE", f"gprs/{holder['id']}", expect=409)  # provisioned: release, not cancel
    as_alice.post(f"gprs/{second['id']}/release", expect=409)  # queued: cancel, not release


def test_future_start_after_is_kept_and_shown_in_the_schedule(hub, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))
    start = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    body = {"slice": team["name"], "gpus": 2, "duration": "1h", "start_after": start.isoformat()}
    gpr = as_alice.post("gprs", body, expect=201)
    assert gpr["status"] == "queued" and parse(gpr["estimated_start"]) == start
    # A later start names its node and how many GPUs, not which: those are picked when it starts.
    assert gpr["planned_gpus"] == [] and gpr["planned_gpu_count"] == 2 and len(gpr["planned_nodes"]) == 1

    schedule = as_alice.get(
        f"inventory/schedule?start={datetime.now(UTC).isoformat().replace('+00:00', 'Z')}", expect=200
    )
    planned = [w for n in schedule["nodes"] for w in n["windows"] if w["gpr"] == gpr["id"]]
    assert planned and planned[0]["state"] == "planned" and parse(planned[0]["start"]) == start
    assert planned[0]["gpus"] == [] and planned[0]["gpu_count"] == 2
    assert [n["node"] for n in schedule["nodes"] if planned[0] in n["windows"]] == gpr["planned_nodes"]


def test_inventory_lists_declared_gpus_and_what_is_free(hub, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))
    inventory = as_alice.get("inventory", expect=200)
    assert inventory["gpus"] == 20
    assert {s["name"] for s in inventory["shapes"]} == {"H100-80GB x8", "A100-40GB x4"}
    assert "declared" in inventory["clusters"][0]["source"]
    assert all(n["declared"] for c in inventory["clusters"] for n in c["nodes"])

    free_before = inventory["free"]
    gpr = as_alice.post("gprs", {"slice": team["name"], "gpus": 3, "duration": 60}, expect=201)
    until_status(as_alice, gpr["id"], "provisioned")
    after = as_alice.get("inventory")
    assert after["free"] == free_before - 3
    held = [g for c in after["clusters"] for n in c["nodes"] for g in n["gpus"] if g["gpr"] == gpr["id"]]
    assert len(held) == 3 and {g["slice"] for g in held} == {team["name"]}


def test_a_finished_gpr_of_a_deleted_slice_answers_as_any_finished_gpr(hub, admin):
    """Its slice gone, the GPR is still the admin's to read and act on: release and cancel say it is
    finished (409, as the document says), not that there is no slice (schemathesis found a 422)."""
    team = admin.post("slices", {"name": f"gone-{secrets.token_hex(3)}"}, expect=201)
    later = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    gpr = admin.post("gprs", {"slice": team["name"], "gpus": 1, "duration": 60, "start_after": later}, expect=201)
    admin.call("DELETE", f"gprs/{gpr['id']}", expect=200)
    admin.call("DELETE", f"slices/{team['name']}", expect=204)
    assert admin.post(f"gprs/{gpr['id']}/release", {}, expect=409)["message"].startswith(f"GPR {gpr['id']}")
    admin.call("DELETE", f"gprs/{gpr['id']}", expect=409)
    assert status_of(admin, gpr["id"])["status"] == "cancelled"
