"""What-if capacity plans through the live service (admins): POST starts one in the background, GET
follows its progress to its result; bad changes are refused naming the field; one runs at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core.errors import Conflict
from egs_hub.core.requests import CapacityPlanCreate
from egs_hub.service.capacity import CapacityPlans, Run

from .hub import wait_for

H100 = "H100-80GB x8"


def test_an_admin_asks_what_one_more_h100_node_would_have_done(admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    as_alice.post("gprs", {"slice": team, "gpus": 8, "duration": "1h"}, expect=201)

    started = admin.post("capacity-plans", {"since": "1d", "add_nodes": [{"shape": "H100", "count": 1}]}, expect=202)
    asked = (started["since"], started["add_nodes"], started["remove_nodes"])
    assert asked == (86400, [{"shape": "H100", "count": 1, "price": None}], [])
    assert (started["status"], started["progress"], started["result"]) == ("running", 0.0, None)

    def finished() -> dict | None:
        plan = admin.get(f"capacity-plans/{started['id']}")
        return plan if plan["status"] != "running" else None

    done = wait_for(finished, 120, "the capacity plan to finish")
    assert done["status"] == "done", done["error"]
    assert done["progress"] == 1.0 and done["finished_at"] is not None
    result = done["result"]
    assert result["gprs"] >= 1
    assert result["changed"]["capacity_gpus"] == result["current"]["capacity_gpus"] + 8
    assert H100 in result["changed"]["nodes"]
    for case in ("recorded", "current", "changed"):
        assert len(result[case]["bound"]) == 101, case
        assert all(0.0 <= share <= 1.0 for _, share in result[case]["bound"]), case
    assert team in result["current"]["slices"]
    assert admin.get("capacity-plans")["plans"][0]["id"] == done["id"]


def test_bad_plans_are_refused_naming_the_field(admin, user):
    _, as_member = user("bob")
    as_member.call("POST", "capacity-plans", {}, expect=403)
    as_member.get("capacity-plans", expect=403)
    for body, field in [
        ({"add_nodes": [{"shape": "B200", "count": 1}]}, "add_nodes"),
        ({"remove_nodes": [{"shape": "H100", "count": 50}]}, "remove_nodes"),
        ({"add_nodes": [{"shape": "H100", "count": 0}]}, "add_nodes.0.count"),
        ({"since": "500d"}, "since"),
        ({"since": "soon"}, "since"),
    ]:
        refused = admin.call("POST", "capacity-plans", body, expect=400)
        assert refused["field"] == field, (body, refused)
    admin.get("capacity-plans/99999", expect=404)


def test_one_plan_runs_at_a_time():
    plans = CapacityPlans("sqlite://", lambda: datetime.now(UTC))
    plans.runs[1] = Run(1, CapacityPlanCreate(since=timedelta(days=1)), "admin", datetime.now(UTC))
    with pytest.raises(Conflict, match="capacity plan 1 is running"):
        plans.start(None, CapacityPlanCreate(), "admin")
