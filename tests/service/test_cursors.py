"""Cursor pages of the list endpoints through the live service: following next_cursor gives
every item exactly once, in the list's order, and ends with null; a cursor of one list is
refused by another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.core.errors import InvalidRequest
from egs_hub.service import cursors

from .hub import Client

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
# A start far enough ahead that these GPRs stay queued, within EGSService.max_start_after (365 days).
LATER = (datetime.now(UTC) + timedelta(days=300)).isoformat()


def pages(client: Client, path: str, key: str) -> list[list]:
    """Every page of ``path``, following next_cursor: the items of each page."""
    found, cursor = [], None
    separator = "&" if "?" in path else "?"
    while True:
        page = client.get(path + (f"{separator}cursor={cursor}" if cursor else ""), expect=200)
        found.append(page[key])
        cursor = page["next_cursor"]
        if cursor is None:
            return found
        assert len(found) < 1000, f"GET {path} keeps answering a next_cursor"


# The cursor module on its own.


def test_a_cursor_names_the_key_it_was_made_from():
    key = (T0 + timedelta(microseconds=7), 42)
    assert cursors.EVENTS.after(cursors.EVENTS.cursor(key)) == key
    assert cursors.QUEUE.after(cursors.QUEUE.cursor((True, 0, 9))) == (True, 0, 9)
    assert cursors.WORKLOADS.after(cursors.WORKLOADS.cursor(("ml", 1, "ns/pod", ""))) == ("ml", 1, "ns/pod", "")


BAD_CURSORS = {
    "not base64": "%%%",
    "not JSON": "bm90IGpzb24",  # "not json"
    "another list's": cursors.EVENTS.cursor((T0, 1)),
    "key of the wrong length": cursors.Listing("gprs", 1, 1, ("int", "int")).cursor((1, 2)),
    "key of the wrong type": cursors.Listing("gprs", 1, 1, ("str",)).cursor(("1",)),
    "a bool for an int": cursors.Listing("gprs", 1, 1, ("bool",)).cursor((True,)),
}


@pytest.mark.parametrize("text", BAD_CURSORS.values(), ids=BAD_CURSORS.keys())
def test_a_bad_cursor_is_refused_naming_the_field(text):
    with pytest.raises(InvalidRequest, match="GET /gprs gave") as caught:
        cursors.GPRS.after(text)
    assert caught.value.field == "cursor"


def test_limit_defaults_and_bounds():
    assert cursors.GPRS.limit(None) == cursors.GPRS.default_limit
    assert cursors.GPRS.limit("1000") == 1000
    for bad in ("0", "1001", "-3", "ten", ""):
        with pytest.raises(InvalidRequest) as caught:
            cursors.GPRS.limit(bad)
        assert caught.value.field == "limit"


def test_a_page_has_a_next_cursor_only_when_more_follow():
    assert cursors.GPRS.page([1, 2, 3], 3, key=lambda i: (i,)) == ([1, 2, 3], None)
    shown, cursor = cursors.GPRS.page([1, 2, 3, 4], 3, key=lambda i: (i,))
    assert shown == [1, 2, 3] and cursors.GPRS.after(cursor) == (3,)


# Through the service.


def test_gpr_pages_cover_every_gpr_once_in_id_order(make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    start = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    made = [
        as_alice.post("gprs", {"slice": team, "gpus": 1, "duration": "1h", "start_after": start}, expect=201)["id"]
        for _ in range(5)
    ]
    found = pages(as_alice, f"gprs?slice={team}&limit=2", "gprs")
    assert [len(p) for p in found] == [2, 2, 1]
    assert [g["id"] for p in found for g in p] == made
    exact = pages(as_alice, f"gprs?slice={team}&limit=5", "gprs")
    assert [len(p) for p in exact] == [5], "a full last page has no next_cursor"
    assert [g["id"] for g in as_alice.get(f"gprs?slice={team}")["gprs"]] == made  # default limit 100


def test_queue_pages_follow_the_planner_order(make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    start = datetime.now(UTC) + timedelta(days=3)
    for hours in (5, 1, 3, 2):  # later start_after first: the queue is not in id order
        body = {"slice": team, "gpus": 1, "duration": "1h", "start_after": (start + timedelta(hours=hours)).isoformat()}
        as_alice.post("gprs", body, expect=201)
    whole = as_alice.get("queue?limit=1000", expect=200)
    assert whole["next_cursor"] is None
    found = pages(as_alice, "queue?limit=3", "queue")
    assert all(len(p) == 3 for p in found[:-1]) and 1 <= len(found[-1]) <= 3
    queue = [q["id"] for p in found for q in p]
    assert queue == [q["id"] for q in whole["queue"]]
    positions = [q["queue_position"] for p in found for q in p]
    assert positions == sorted(positions, key=lambda p: (p is None, p or 0))


def test_event_pages_go_back_in_time_each_newest_last(make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    for _ in range(3):
        gpr = as_alice.post("gprs", {"slice": team, "gpus": 1, "duration": "1h", "start_after": LATER})
        as_alice.call("DELETE", f"gprs/{gpr['id']}", expect=200)
    whole = as_alice.get(f"events?slice={team}&limit=5000", expect=200)
    assert whole["next_cursor"] is None and len(whole["events"]) >= 6
    found = pages(as_alice, f"events?slice={team}&limit=4", "events")
    assert all(len(p) == 4 for p in found[:-1])
    for page in found:
        assert [(e["time"], e["id"]) for e in page] == sorted((e["time"], e["id"]) for e in page)
    assert [e["id"] for p in reversed(found) for e in p] == [e["id"] for e in whole["events"]]


def test_workload_pages_cover_every_server_once(hub, make_slice, user):
    alice, _ = user("alice")
    admin = hub.admin()
    team = make_slice(members=(alice,))["name"]
    names = ["b", "a", "d", "c", "e"]
    for name in names:
        admin.call("PUT", f"servers/{alice}/{name}", {"slice": team}, expect=200)
    try:
        found = pages(admin, f"workloads?slice={team}&limit=2", "workloads")
        assert [len(p) for p in found] == [2, 2, 1]
        assert [w["name"] for p in found for w in p] == [f"{alice}/{n}" for n in sorted(names)]
    finally:
        for name in names:
            admin.call("DELETE", f"servers/{alice}/{name}", expect=204)


def test_alerts_answer_a_page_and_a_next_cursor(user):
    _, as_alice = user("alice")
    page = as_alice.get("alerts?limit=1", expect=200)
    assert page == {"source": page["source"], "alerts": [], "next_cursor": None}


def test_a_cursor_of_one_list_is_refused_by_another(make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    for _ in range(2):
        as_alice.post("gprs", {"slice": team, "gpus": 1, "duration": "1h", "start_after": LATER})
    cursor = as_alice.get(f"gprs?slice={team}&limit=1", expect=200)["next_cursor"]
    assert cursor is not None
    for path in ("events", "queue", "alerts", "workloads"):
        error = as_alice.get(f"{path}?cursor={cursor}", expect=400)
        assert error["field"] == "cursor" and f"GET /{path} gave" in error["message"]
