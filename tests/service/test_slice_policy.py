"""Slice quota and policy through the live service: the weekly GPU-hours quota, rejecting
over-limit GPRs, eviction and fair-share settings, and the usage a slice shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from .hub import until_status

POLICY_DEFAULTS = {
    "reject_over_limits": False,
    "eviction": "confirm",
    "requeue_evicted": True,
    "share": None,
    "bind_failure": "fail",
}


def test_new_policy_fields_round_trip_and_default(admin, make_slice):
    plain = make_slice()
    assert plain["quota"] == {"max_gpus": None, "max_gpu_hours": None, "max_cost_month": None}
    assert {k: plain["policy"][k] for k in POLICY_DEFAULTS} == POLICY_DEFAULTS
    usage = dict(plain["usage"])
    project_factor = usage.pop("project_fair_share_factor")  # the default project's, after other tests' use
    assert usage == {"gpu_hours_week": 0.0, "decayed_gpu_hours": 0.0, "fair_share_factor": 1.0}
    assert 0 < project_factor <= 1

    policy = {
        "reject_over_limits": True,
        "eviction": "auto",
        "requeue_evicted": False,
        "share": 2.5,
        "bind_failure": "move",
    }
    made = make_slice(quota={"max_gpus": 6, "max_gpu_hours": 40.5, "max_cost_month": 250}, policy=policy)
    assert made["quota"] == {"max_gpus": 6, "max_gpu_hours": 40.5, "max_cost_month": 250.0}
    assert {k: made["policy"][k] for k in policy} == policy
    assert admin.get(f"slices/{made['name']}") == made

    # A partial update changes what it names and keeps the rest.
    changed = admin.call(
        "PATCH",
        f"slices/{made['name']}",
        {"quota": {"max_gpu_hours": None}, "policy": {"eviction": "off", "share": 1}},
        expect=200,
    )
    assert changed["quota"] == {"max_gpus": 6, "max_gpu_hours": None, "max_cost_month": 250.0}
    assert {k: changed["policy"][k] for k in policy} == {**policy, "eviction": "off", "share": 1.0}


def test_weekly_gpu_hours_count_recent_use_toward_approval(make_slice, user):
    alice, as_alice = user("alice")
    # 0.01 GPU-hours is 36 GPU-seconds a week; 1 GPU for 30 s fits while nothing was used.
    team = make_slice(members=(alice,), quota={"max_gpu_hours": 0.01})
    ask = {"slice": team["name"], "gpus": 1, "duration": 30}
    assert as_alice.post("wait-times", ask, expect=200)["needs_approval"] == []

    used = as_alice.post("gprs", {"slice": team["name"], "gpus": 2, "duration": 4}, expect=201)
    until_status(as_alice, used["id"], "complete")
    usage = as_alice.get(f"slices/{team['name']}")["usage"]
    assert usage["gpu_hours_week"] == pytest.approx(8 / 3600, abs=3 / 3600)  # 2 GPUs for 4 s, and the unbind
    assert 0 < usage["decayed_gpu_hours"] <= usage["gpu_hours_week"]

    # Now the same request would bring the week over 0.01 GPU-hours: it waits for an admin.
    reasons = as_alice.post("wait-times", ask, expect=200)["needs_approval"]
    assert len(reasons) == 1 and "GPU-hours per rolling week" in reasons[0]
    waiting = as_alice.post("gprs", ask, expect=201)
    assert waiting["status"] == "pending-approval" and "of its 0.01 GPU-hours" in waiting["status_reason"]


def test_over_limit_gprs_are_rejected_when_the_policy_says_so(make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,), policy={"reject_over_limits": True, "auto_approve_max_gpus": 1})
    big = as_alice.post("gprs", {"slice": team["name"], "gpus": 2, "duration": 60}, expect=201)
    assert big["status"] == "rejected" and big["ended_at"] is not None
    assert big["status_reason"].startswith("over the slice's limits") and "auto-approval limit" in big["status_reason"]
    events = as_alice.get(f"events?gpr={big['id']}")["events"]
    assert [(e["kind"], e["to_status"]) for e in events] == [("submitted", "rejected")]

    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    small = as_alice.post("gprs", {"slice": team["name"], "gpus": 1, "duration": 60, "start_after": later}, expect=201)
    assert small["status"] == "queued"
    # Editing it over the limits is refused too: submitted so, it would have been rejected.
    refused = as_alice.call("PATCH", f"gprs/{small['id']}", {"gpus": 2}, expect=409)
    assert "over the slice's limits" in refused["message"]
    assert as_alice.get(f"gprs/{small['id']}")["gpus"] == 1
