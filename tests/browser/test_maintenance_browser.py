"""The inventory schedule shows a node's maintenance as its own bar, in a browser against a real hub."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

from ..service.hub import Hub
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in


def test_the_schedule_shows_maintenance_bars(hub: Hub, new_page) -> None:
    admin = hub.admin()
    (cluster,) = [c["name"] for c in admin.get("clusters")["clusters"] if c["kind"] == "local"]
    start = datetime.now(UTC) + timedelta(hours=2)
    window = {"start": start.isoformat(), "end": (start + timedelta(hours=3)).isoformat(), "reason": "BIOS update"}
    admin.post(f"nodes/{cluster}/h100-b/maintenance", window, expect=201)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/schedule", "Inventory schedule")
    bar = page.locator('[data-node="h100-b"] .maintenance')
    expect(bar).to_have_count(1)
    expect(bar).to_have_attribute("aria-label", re.compile(r"^Maintenance of h100-b: .+ → .+, BIOS update$"))
    expect(page.locator('[data-node="h100-a"] .maintenance')).to_have_count(0)
    admin.call("DELETE", f"nodes/{cluster}/h100-b/maintenance", expect=204)
    expect(bar).to_have_count(0)  # the page refreshes without a reload
    assert watched.errors == []
