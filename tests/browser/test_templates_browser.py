"""GPR templates on the portal's "Ask for GPUs" form, in a browser against a real hub: the form
lists the templates the picked workspace may use, fills itself from one, and the GPR asked names
it and takes from it what the form left as the template filled it."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from ..service.hub import Hub
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in, region


def test_the_request_form_asks_from_a_template(hub: Hub, new_page) -> None:
    admin = hub.admin()
    for team in ("tpl-a", "tpl-b"):
        admin.post("slices", {"name": team, "members": []}, expect=201)
    admin.post(
        "templates",
        {"name": "one-node", "slice": "tpl-a", "nodes": 1, "duration": "45m", "shape": "A100", "description": "a node"},
        expect=201,
    )
    admin.post("templates", {"name": "b-only", "slice": "tpl-b", "gpus": 1, "duration": "1h"}, expect=201)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "", "My workspaces")
    ask = region(page, "Ask for GPUs")
    ask.get_by_label("Workspace").select_option("tpl-a")
    template = ask.get_by_label("Template")
    expect(template.locator("option")).to_have_text(["none", "one-node: a node"])
    template.select_option("one-node")
    expect(ask.get_by_label("For", exact=True)).to_have_value("45m")
    expect(page.get_by_role("status")).to_have_text("Template one-node: a node; 1 whole node(s); shape A100")

    ask.get_by_role("button", name="Get wait times").click()
    waits = ask.get_by_role("table", name="Estimated start if you ask now")
    expect(waits.locator("tbody tr td:nth-child(3)")).to_have_text(["A100-40GB x4"])

    ask.get_by_role("button", name="Request GPUs").click()
    notice = page.get_by_role("status")
    expect(notice).to_have_text(re.compile(r"^GPR \d+ is (queued|provisioning|provisioned)$"))
    gpr_id = notice.inner_text().split()[1]
    gpr = admin.get(f"gprs/{gpr_id}")
    # The size and duration are the template's; the shape is the wait-time row picked (its only one).
    fields = ("template", "nodes", "gpus", "duration", "shape")
    assert [gpr[f] for f in fields] == ["one-node", 1, None, 45 * 60, "A100-40GB x4"]

    ask.get_by_label("Workspace").select_option("tpl-b")
    expect(template.locator("option")).to_have_text(["none", "b-only"])
    assert watched.errors == []
    for gpr_row in admin.get("gprs?slice=tpl-a")["gprs"]:
        admin.post(f"gprs/{gpr_row['id']}/release")
