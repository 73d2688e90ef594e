"""Issue 25: one bad GPR never stops the service.

A start_after past the horizon is refused at the door (400 naming the field); a GPR
already in the store with a time the planner cannot place (written before the bound
existed) is failed with the reason, and every read and every other GPR goes on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from egs_hub.store.db import make_engine, make_sessions, transaction
from egs_hub.store.models import GPRRow

from .hub import Client, restart_service, until_status

FAR = "9999-12-31T23:59:59Z"


def test_a_start_after_past_the_horizon_is_refused_naming_the_field(hub, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))
    asked = {"slice": team["name"], "gpus": 1, "duration": "1h", "start_after": FAR}
    error = as_alice.post("gprs", asked, expect=400)
    assert error["field"] == "start_after"
    assert error["message"].startswith("start_after must be within 365 days from now (before ")
    assert error["message"].endswith(f"), not {FAR}")
    assert as_alice.post("wait-times", asked, expect=400)["field"] == "start_after"
    assert as_alice.get(f"gprs?slice={team['name']}", expect=200)["gprs"] == []

    soon = (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    gpr = as_alice.post("gprs", {**asked, "start_after": soon}, expect=201)
    error = as_alice.call("PATCH", f"gprs/{gpr['id']}", {"start_after": FAR}, expect=400)
    assert error["field"] == "start_after"
    assert as_alice.get(f"gprs/{gpr['id']}", expect=200)["start_after"] == soon


def write_start_after(db_url: str, gpr_id: int, start_after: datetime) -> None:
    """What an old service (or a hand edit) left in the store: bypasses every check."""
    engine = make_engine(db_url)
    try:
        with transaction(make_sessions(engine)) as session:
            session.execute(update(GPRRow).where(GPRRow.id == gpr_id).values(start_after=start_after))
    finally:
        engine.dispose()


def reads_answer(client: Client, slice_name: str) -> None:
    client.get("queue", expect=200)
    client.get(f"gprs?slice={slice_name}", expect=200)
    client.get("inventory/schedule", expect=200)
    client.post("wait-times", {"slice": slice_name, "gpus": 1, "duration": "1h"}, expect=200)


def test_a_stored_gpr_the_planner_cannot_place_fails_and_the_rest_goes_on(hub, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))
    later = (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    bad = as_alice.post("gprs", {"slice": team["name"], "gpus": 1, "duration": "1h", "start_after": later}, expect=201)
    write_start_after(hub.db_url, bad["id"], datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
    restart_service(hub)

    reads_answer(as_alice, team["name"])
    good = as_alice.post("gprs", {"slice": team["name"], "gpus": 1, "duration": "1h"}, expect=201)
    until_status(as_alice, good["id"], "provisioned", timeout=30)
    failed = until_status(as_alice, bad["id"], "failed", timeout=30)
    assert failed["start_after"] == FAR
    assert failed["status_reason"].startswith("the planner could not place this GPR: ")
    events = as_alice.get(f"events?gpr={bad['id']}", expect=200)["events"]
    assert [(e["kind"], e["actor"]) for e in events] == [("submitted", alice), ("failed", "planner")]
    assert events[-1]["reason"] == failed["status_reason"]
    assert "9000-01-01T00:00:00Z" in events[-1]["reason"]
    reads_answer(as_alice, team["name"])
    assert as_alice.post(f"gprs/{good['id']}/release", expect=200)["status"] in ("releasing", "complete")
