"""The queue through the live service: fair share orders a priority band, and an estimate
never moves later because work of its own band arrived (the planner keeps its promises).

Both fill the 4-GPU A100 node with a holder, then queue behind it on that shape.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .hub import until_status, wait_for

A100 = {"gpus": 4, "shape": "A100"}


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def queued(client, *gprs: dict) -> list[dict]:
    """These GPRs as /queue shows them, from a plan made after the last of them changed (a GPR
    that went ahead of others displaced them: they show where they go from the next plan)."""
    changed = max(parse(g["updated_at"]) for g in gprs)

    def planned_since():
        answer = client.get("queue", expect=200)
        return answer if parse(answer["planned_at"]) >= changed else None

    by_id = {q["id"]: q for q in wait_for(planned_since, 30, "a plan made after the last change")["queue"]}
    return [by_id[g["id"]] for g in gprs]


def hold_a100(client, slice_name: str, seconds: int) -> dict:
    holder = client.post("gprs", {"slice": slice_name, **A100, "duration": seconds}, expect=201)
    return until_status(client, holder["id"], "provisioned")


def test_fair_share_orders_a_band_by_recent_use(make_slice, user):
    alice, as_alice = user("alice")
    busy, idle, other = (make_slice(members=(alice,))["name"] for _ in range(3))
    recent = as_alice.post("gprs", {"slice": busy, "gpus": 2, "duration": 2, "shape": "H100"}, expect=201)
    until_status(as_alice, recent["id"], "complete")
    holder = hold_a100(as_alice, other, 20)

    first = as_alice.post("gprs", {"slice": busy, **A100, "duration": 30}, expect=201)
    second = as_alice.post("gprs", {"slice": idle, **A100, "duration": 30}, expect=201)
    mine_busy, mine_idle = queued(as_alice, first, second)

    # Same band; the slice that used nothing lately goes first though it asked later.
    assert mine_busy["band"] == mine_idle["band"] == "medium"
    assert mine_idle["fair_share_factor"] == 1.0 > mine_busy["fair_share_factor"]
    assert mine_idle["queue_position"] < mine_busy["queue_position"]
    busy_usage = as_alice.get(f"slices/{busy}")["usage"]
    # (The holder's slice keeps using GPUs meanwhile, so the factors move: compare loosely.)
    assert busy_usage["gpu_hours_week"] > 0 and 0 < busy_usage["fair_share_factor"] < 1
    assert as_alice.get(f"slices/{idle}")["usage"]["fair_share_factor"] == 1.0

    # The busy slice's GPR was promised the node when the holder ends; the idle slice's GPR,
    # ahead of it in the queue, takes that window, and the busy one follows.
    assert abs(parse(first["estimated_start"]) - parse(holder["window_end"])) < timedelta(seconds=1)
    assert mine_idle["estimated_start"] == first["estimated_start"]
    assert parse(mine_busy["estimated_start"]) >= parse(mine_idle["estimated_start"]) + timedelta(seconds=30)


def test_estimates_move_later_only_for_work_ahead_in_the_queue(admin, make_slice, user):
    alice, as_alice = user("alice")
    a, b, c, d, e = (make_slice(members=(alice,))["name"] for _ in range(5))
    holder = hold_a100(as_alice, a, 20)
    first = as_alice.post("gprs", {"slice": b, **A100, "duration": 30, "priority": 101}, expect=201)
    (before,) = queued(as_alice, first)
    promised = parse(before["estimated_start"])
    assert abs(promised - parse(holder["window_end"])) < timedelta(seconds=1)

    # Same band, behind it in the queue (same priority and fair share, asked later): after it.
    behind = as_alice.post("gprs", {"slice": c, **A100, "duration": 30, "priority": 101}, expect=201)
    kept, last = queued(as_alice, first, behind)
    assert kept["queue_position"] < last["queue_position"]
    assert kept["estimated_start"] == before["estimated_start"], "work behind moved an estimate later"
    assert parse(last["estimated_start"]) >= promised + timedelta(seconds=30)
    assert as_alice.get(f"gprs/{first['id']}")["estimated_start"] == before["estimated_start"]
    schedule = as_alice.get("inventory/schedule", expect=200)
    planned = [w for n in schedule["nodes"] for w in n["windows"] if w["gpr"] == first["id"]]
    assert [w["start"] for w in planned] == [before["estimated_start"]]

    # Higher priority in the same band is ahead in the queue: it may take the promised window.
    ahead = as_alice.post("gprs", {"slice": d, **A100, "duration": 30, "priority": 180}, expect=201)
    moved, top = queued(as_alice, first, ahead)
    assert top["queue_position"] < moved["queue_position"]
    assert top["estimated_start"] == before["estimated_start"]
    assert parse(moved["estimated_start"]) >= promised + timedelta(seconds=30)

    # An admin changing a priority may reorder the band: its promises are planned afresh.
    admin.call("PATCH", f"gprs/{behind['id']}", {"priority": 190}, expect=200)
    (promoted,) = queued(as_alice, behind)
    assert promoted["estimated_start"] == before["estimated_start"]

    # A higher band goes ahead of them all.
    urgent = as_alice.post("gprs", {"slice": e, **A100, "duration": 30, "priority": 250}, expect=201)
    (now_top,) = queued(as_alice, urgent)
    assert now_top["queue_position"] == 1 and now_top["band"] == "high"
    assert now_top["estimated_start"] == before["estimated_start"]


def test_early_release_moves_a_later_gpr_earlier(make_slice, user):
    alice, as_alice = user("alice")
    a, b = (make_slice(members=(alice,))["name"] for _ in range(2))
    holder = hold_a100(as_alice, a, 60)
    # Longer than the wait: its window now would overlap the window it was promised.
    waiting = as_alice.post("gprs", {"slice": b, **A100, "duration": 120}, expect=201)
    assert abs(parse(waiting["estimated_start"]) - parse(holder["window_end"])) < timedelta(seconds=1)

    as_alice.post(f"gprs/{holder['id']}/release", expect=200)
    started = until_status(as_alice, waiting["id"], "provisioned", timeout=5)
    assert parse(started["window_start"]) < parse(waiting["estimated_start"]) - timedelta(seconds=30)
