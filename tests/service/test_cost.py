"""Prices and cost through the live service: an admin sets a cluster's prices, the inventory and
every wait-time row show them, and a GPR records its price, reserved and used cost."""

from __future__ import annotations

from datetime import datetime

import pytest

from .hub import until_status

H100 = "H100-80GB x8"
A100 = "A100-40GB x4"


@pytest.fixture
def prices(admin):
    """Set the local cluster's prices for a test; none again after it."""

    def put(table: dict) -> dict:
        return admin.call("PUT", "clusters/local/prices", table, expect=200)

    yield put
    put({})


def test_admins_set_prices_and_bad_ones_are_refused(admin, prices, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    assert admin.get("clusters/local/prices") == {"cluster": "local", "prices": {}}
    shapes = {s["name"]: s for s in admin.get("inventory")["shapes"]}
    assert shapes[H100]["price_per_gpu_hour"] is None  # no price until one is set

    assert prices({H100: 4.5, A100: 2}) == {"cluster": "local", "prices": {A100: 2.0, H100: 4.5}}
    assert as_alice.get("clusters/local/prices")["prices"] == {A100: 2.0, H100: 4.5}
    shapes = {s["name"]: s for s in as_alice.get("inventory")["shapes"]}
    assert (shapes[H100]["price_per_gpu_hour"], shapes[A100]["price_per_gpu_hour"]) == (4.5, 2.0)

    as_alice.call("PUT", "clusters/local/prices", {H100: 1}, expect=403)
    admin.call("PUT", "clusters/nowhere/prices", {H100: 1}, expect=404)
    for table, field, status in [
        ({"B200-192GB x8": 9}, "B200-192GB x8", 422),  # no such shape there
        ({H100: -1}, H100, 400),
        ({H100: "cheap"}, H100, 400),
        ([H100], "body", 400),
    ]:
        refused = admin.call("PUT", "clusters/local/prices", table, expect=status)
        assert refused["field"] == field, refused
    assert admin.get("clusters/local/prices")["prices"] == {A100: 2.0, H100: 4.5}  # nothing changed
    assert any(e["kind"] == "prices-set" for e in admin.get("events?limit=20")["events"])

    assert prices({H100: 4.5}) == {"cluster": "local", "prices": {H100: 4.5}}  # a PUT replaces them all
    options = as_alice.post("wait-times", {"slice": team, "gpus": 2, "duration": "1h"})["options"]
    assert {o["cost_per_hour"] for o in options if o["shape"]["name"] == H100} == {9.0}
    prices({})  # and an empty one takes every price away, from the wait times too
    options = as_alice.post("wait-times", {"slice": team, "gpus": 2, "duration": "1h"})["options"]
    assert {o["cost_per_hour"] for o in options} == {None}


def test_wait_times_and_gprs_show_their_cost(admin, prices, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    unpriced = as_alice.post("wait-times", {"slice": team, "gpus": 2, "duration": "90m"}, expect=200)
    assert {(o["cost_per_hour"], o["estimated_cost"]) for o in unpriced["options"]} == {(None, None)}

    prices({H100: 4.0})
    options = {
        o["shape"]["name"]: o
        for o in as_alice.post("wait-times", {"slice": team, "gpus": 2, "duration": "90m"})["options"]
    }
    assert (options[H100]["cost_per_hour"], options[H100]["estimated_cost"]) == (8.0, 12.0)
    assert (options[A100]["cost_per_hour"], options[A100]["estimated_cost"]) == (None, None)

    gpr = as_alice.post("gprs", {"slice": team, "gpus": 2, "duration": "1h", "shape": "H100"}, expect=201)
    running = until_status(as_alice, gpr["id"], "provisioned")
    assert (running["price_per_gpu_hour"], running["cost_per_hour"], running["reserved_cost"]) == (4.0, 8.0, 8.0)
    assert 0 <= running["used_cost"] < 1

    prices({H100: 100.0})  # a later price does not rewrite what this GPR is charged
    as_alice.post(f"gprs/{gpr['id']}/release", expect=200)
    done = until_status(as_alice, gpr["id"], "complete")
    held_hours = (
        datetime.fromisoformat(done["ended_at"]) - datetime.fromisoformat(done["window_start"])
    ).total_seconds() / 3600
    assert done["price_per_gpu_hour"] == 4.0 and done["reserved_cost"] == 8.0
    assert done["used_cost"] == pytest.approx(8.0 * held_hours)
    assert as_alice.get(f"gprs/{gpr['id']}")["used_cost"] == done["used_cost"]  # it stops growing once released


def test_usage_per_slice_project_and_user_as_json_and_csv(admin, hub, prices, make_slice, user):
    alice, as_alice = user("alice")
    bob, as_bob = user("bob")
    team = make_slice(members=(alice, bob))["name"]
    other = make_slice()["name"]
    prices({H100: 6.0})
    done = []
    for client, shape in ((as_alice, "H100"), (as_bob, "A100")):
        gpr = client.post("gprs", {"slice": team, "gpus": 2, "duration": "1h", "shape": shape}, expect=201)
        until_status(client, gpr["id"], "provisioned")
        client.post(f"gprs/{gpr['id']}/release", expect=200)
        done.append(until_status(client, gpr["id"], "complete"))

    def held(gpr) -> float:
        span = datetime.fromisoformat(gpr["ended_at"]) - datetime.fromisoformat(gpr["window_start"])
        return 2 * span.total_seconds() / 3600

    report = as_alice.get("usage?group_by=user&period=week", expect=200)
    assert (report["group_by"], report["period"]) == ("user", "week")
    rows = {r["key"]: r for r in report["rows"]}
    assert {alice, bob} <= rows.keys()
    assert rows[alice]["gpu_hours_reserved"] == pytest.approx(2.0)  # 2 GPUs for the hour they reserved
    assert rows[alice]["gpu_hours_used"] == pytest.approx(held(done[0]))
    assert rows[alice]["cost"] == pytest.approx(6.0 * held(done[0])) and rows[alice]["unpriced_gpu_hours"] == 0
    assert rows[bob]["cost"] is None and rows[bob]["unpriced_gpu_hours"] == pytest.approx(held(done[1]))

    by_slice = {r["key"]: r for r in as_alice.get("usage?group_by=slice&period=month")["rows"]}
    assert other not in by_slice  # a member sees their own slices only
    assert by_slice[team]["gpu_hours_used"] == pytest.approx(held(done[0]) + held(done[1]))
    assert "default" in {r["key"] for r in admin.get("usage?group_by=project")["rows"]}

    for bad, field in (("group_by=team", "group_by"), ("period=day", "period"), ("since=yesterday", "since")):
        assert admin.get(f"usage?{bad}", expect=400)["field"] == field

    response = hub.client(hub.user_token(alice)).session.get(
        f"{hub.api}usage?group_by=slice&format=csv", headers={"Authorization": f"token {hub.user_token(alice)}"}
    )
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/csv")
    assert "attachment" in response.headers["Content-Disposition"]
    lines = response.text.splitlines()
    assert lines[0] == (
        "period_start,key,gpu_hours_reserved,gpu_hours_used,reserved_cost,cost,unpriced_gpu_hours,mean_utilization"
    )
    (line,) = [line for line in lines[1:] if f",{team}," in line]
    month = admin.get("usage?group_by=slice&period=month")["since"]
    assert line.startswith(f"{month[:10]},{team},")  # this month's row, from the 1st


def test_a_gpr_over_the_months_budget_waits_for_an_admin(admin, prices, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,), quota={"max_cost_month": 10})["name"]
    prices({H100: 4.0})
    ask = {"slice": team, "gpus": 2, "duration": "1h", "shape": "H100"}
    assert as_alice.post("wait-times", ask)["needs_approval"] == []  # 8 of 10
    first = as_alice.post("gprs", ask, expect=201)
    until_status(as_alice, first["id"], "provisioned")

    # Its window is reserved this month: 8 spent, so another 8 would bring the month to 16 of 10.
    (reason,) = as_alice.post("wait-times", ask)["needs_approval"]
    assert reason == "this GPR's estimated cost 8.00 would bring the slice's month to 16.00 of its budget of 10.00"
    second = as_alice.post("gprs", ask, expect=201)
    assert second["status"] == "pending-approval" and second["status_reason"] == reason
    # Unpriced shapes cannot pass a budget.
    assert as_alice.post("wait-times", {**ask, "shape": "A100"})["needs_approval"] == []
