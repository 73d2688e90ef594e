"""The Workspaces page in a browser against a real hub: a user's workspace request shows to the
admin, who approves it there (the workspace is made); the admin's own request shows without
Approve, since nobody approves their own."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from ..service.hub import Hub
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in


def test_requests_are_asked_for_and_approved_on_the_workspaces_page(hub: Hub, new_page) -> None:
    as_carol = hub.client(hub.user_token("carol"))
    asked = as_carol.post(
        "workspace-requests", {"name": "vision", "purpose": "train a detector", "members": ["dave"]}, expect=201
    )

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/workspaces", "Workspaces")
    row = page.locator(f"#workspace-requests tr[data-request='{asked['id']}']")
    expect(row).to_contain_text("train a detector")
    row.get_by_role("button", name=f"Approve workspace request {asked['id']}").click()
    expect(page.get_by_role("status")).to_have_text(f"Workspace request {asked['id']} approved")
    expect(row.locator("td").nth(5)).to_have_text("approved")
    made = hub.admin().get("slices/vision")
    assert made["members"] == ["carol", "dave"] and made["project"] == "default"

    ask = page.locator("#ask-form")
    ask.get_by_label("Name", exact=True).fill("admins-own")
    ask.get_by_label("GPUs at once").fill("2")
    ask.get_by_role("button", name="Ask for the workspace").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"^Workspace request \d+ for admins-own is pending"))
    own = page.locator("#workspace-requests tr", has_text="admins-own")
    expect(own.locator("td").nth(4)).to_have_text("2")
    expect(own.get_by_role("button")).to_have_count(0)
    assert watched.errors == []
