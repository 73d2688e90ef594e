"""The "Capacity planning" admin page in a browser against a real hub: the admin asks what one more
node of the host's shape would have done; a progress bar follows the replay, then the chart of GPUs
bound over time and the waits per workspace show what happened beside the replays."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from ..service.hub import Hub, until_status
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in


def test_the_admin_asks_what_one_more_node_would_have_done(hub: Hub, new_page) -> None:
    admin = hub.admin()
    admin.post("slices", {"name": "planned", "members": []}, expect=201)
    shapes = admin.get("inventory")["shapes"]
    shape = shapes[0]
    admin.call("PUT", "clusters/local/prices", {s["name"]: 1.0 for s in shapes}, expect=200)
    gpr = admin.post("gprs", {"slice": "planned", "gpus": 1, "duration": "1h"}, expect=201)
    until_status(admin, gpr["id"], "provisioned")
    admin.post(f"gprs/{gpr['id']}/release", expect=200)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/capacity", "Capacity planning")
    form = page.get_by_role("form", name="What if")
    form.locator("select[name=since]").select_option("7d")
    form.locator("input[name=add_shape]").fill(shape["name"])
    form.locator("input[name=add_count]").fill("1")
    form.get_by_label("Price per GPU-hour").fill("3")
    form.get_by_role("button", name="Run what-if").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"^Plan \d+ started$"), timeout=10_000)

    result = page.locator("#plan")
    expect(result.get_by_role("img", name="GPUs bound over the", exact=False)).to_be_visible(timeout=60_000)
    expect(result).to_contain_text(f"+1 {shape['name']}")
    # A week of every GPU at 1 per GPU-hour, but at 3 for the shape asked about (as the form says).
    week = sum(s["gpus"] * (3 if s["name"] == shape["name"] else 1) for s in shapes) * 7 * 24
    more = shape["gpus_per_node"] * 3 * 7 * 24
    legend = result.get_by_role("list")
    expect(legend.get_by_role("listitem").nth(1)).to_contain_text(f"costing {week:.2f} over the period")
    expect(legend.get_by_role("listitem").nth(2)).to_contain_text(f"costing {week + more:.2f} over the period")
    waits = result.get_by_role("table")
    expect(waits.locator("thead th")).to_have_text(
        [
            "Workspace",
            "what happened: mean / p95 wait",
            "replayed as they are: mean / p95 wait",
            "replayed changed: mean / p95 wait",
        ]
    )
    expect(waits.locator("tbody tr", has_text="planned")).to_have_count(1)
    expect(page.locator("#plans tbody tr").first.locator("td").last).to_have_text("done")
    assert watched.errors == []
    admin.call("PUT", "clusters/local/prices", {}, expect=200)
