"""The pages' shared API module follows next_cursor (static/api.js apiAll), in a browser against a
real hub: every item once and in order, audit-log pages joined oldest first, and a stop after
``pages`` pages that leaves the next_cursor; the events page says when it shows every event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

from ..service.hub import Hub
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in

# Far enough ahead that the GPRs stay queued, within EGSService.max_start_after (365 days).
LATER = (datetime.now(UTC) + timedelta(days=300)).isoformat()

FOLLOW = """async (team) => {
  const src = document.querySelector('script[type="module"]').src;
  const { apiAll } = await import(src.replace(/[^/]*$/, "api.js"));
  const gprs = await apiAll(`gprs?slice=${team}`, "gprs", { limit: 2 });
  const events = await apiAll(`events?slice=${team}`, "events", { limit: 2, backwards: true });
  const two = await apiAll(`events?slice=${team}`, "events", { limit: 2, backwards: true, pages: 2 });
  return { gprs: gprs.gprs.map((g) => g.id), gprsNext: gprs.next_cursor, events: events.events.map((e) => e.id),
           two: two.events.map((e) => e.id), twoNext: two.next_cursor };
}"""


def test_the_pages_follow_next_cursor(hub: Hub, new_page) -> None:
    admin = hub.admin()
    team = "cursors"
    admin.post("slices", {"name": team, "members": []}, expect=201)
    made = [
        admin.post("gprs", {"slice": team, "gpus": 1, "duration": "1h", "start_after": LATER})["id"] for _ in range(5)
    ]
    every_event = [e["id"] for e in admin.get(f"events?slice={team}&limit=5000", expect=200)["events"]]
    assert len(every_event) > 4

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/events", "Events")
    expect(page.locator("#shown")).to_contain_text(" of all ")
    expect(page.locator("#older")).to_be_hidden()

    found = page.evaluate(FOLLOW, team)
    assert found["gprs"] == made and found["gprsNext"] is None
    assert found["events"] == every_event
    assert found["two"] == every_event[-4:] and found["twoNext"] is not None
    assert watched.errors == []
    for gpr_id in made:
        admin.call("DELETE", f"gprs/{gpr_id}", expect=200)
