"""The Slices admin page's auto-GPR and home-volume policy and its project filter, and what the portal's
workspace card says of them, in a browser against a real hub."""

from __future__ import annotations

from playwright.sync_api import expect

from ..service.hub import Hub
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in


def test_an_admin_sets_auto_gpr_and_home_volumes_and_filters_by_project(hub: Hub, new_page) -> None:
    admin = hub.admin()
    admin.post("projects", {"name": "vision", "display_name": "Vision"}, expect=201)
    admin.post("slices", {"name": "pol-a", "members": []}, expect=201)
    admin.post("slices", {"name": "pol-v", "project": "vision", "members": []}, expect=201)
    admin.post("templates", {"name": "one-gpu", "gpus": 1, "duration": "1h"}, expect=201)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/slices", "Workspaces")
    cards = page.locator("#slice-list .card")
    expect(page.locator('[data-slice="pol-v"]')).to_be_visible()
    page.get_by_label("Project").select_option("vision")
    expect(cards).to_have_count(1)
    expect(cards.first).to_have_attribute("data-slice", "pol-v")
    page.get_by_label("Project").select_option("")
    expect(page.locator('[data-slice="pol-a"]')).to_be_visible()

    card = page.locator('[data-slice="pol-a"]')
    expect(card).to_contain_text("home volumes 10Gi")
    card.get_by_role("button", name="Edit pol-a").click()
    editor = page.locator("#slice-editor")
    editor.get_by_label("Auto-GPR template").fill("one-gpu")
    editor.get_by_label("Home volume").fill("20Gi")
    editor.get_by_label("Volume class").fill("fast-ssd")
    editor.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("status")).to_have_text("Workspace pol-a saved")
    policy = admin.get("slices/pol-a")["policy"]
    assert (policy["auto_gpr"], policy["home_volume_size"], policy["home_volume_class"]) == (
        "one-gpu",
        "20Gi",
        "fast-ssd",
    )
    expect(card).to_contain_text("a server asking for GPUs files a GPR from template one-gpu")
    expect(card).to_contain_text("home volumes 20Gi (fast-ssd)")

    card.get_by_role("button", name="Edit pol-a").click()
    editor.get_by_label("Auto-GPR template").fill("no-such")
    editor.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("status")).to_contain_text("no template named 'no-such'")
    assert admin.get("slices/pol-a")["policy"]["auto_gpr"] == "one-gpu"  # nothing lost

    # The portal's card: the auto-GPR, and where a workspace on this host keeps home directories.
    open_page(page, hub, "", "My workspaces")
    mine = page.locator('#slices [data-slice="pol-a"]')
    expect(mine).to_contain_text("starting a server with GPUs files a GPR from template one-gpu")
    expect(mine.locator('[data-volumes="pol-a"]')).to_have_text(
        "Home directories: servers on this host keep each member's home directory on the host."
    )
    assert watched.errors == []
