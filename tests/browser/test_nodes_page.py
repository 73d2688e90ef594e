"""The Nodes page and a GPR's checklist in a browser, against a real hub (declared inventory: h100-a,
h100-b and a100-a on this host's cluster; no GPU metrics, so gpu-health checks are skipped).

1. The admin opens the Nodes page: every node with its health, GPUs, holders, next maintenance and
   last checks. They quarantine a100-a with a reason (the health filter finds it), clear it, set
   the cluster's checklist with a bad threshold (refused, naming the field), then a good one with
   a slow custom check, quarantine a100-a again and run its checks: they show as pending or running,
   end (smoke passed, gpu-health skipped; a chip's tooltip tells duration, values and log) and the
   node, all its checks passed, is cleared.
2. bob's GPR is provisioned after its entry checks; on his portal its row shows the checklist with
   each check's node, phase, status, duration and log (collapsed until opened). On the Nodes page
   the node names bob's GPR as its holder, and running its checks is refused with the service's reason.

The hub is the module's: a fixture puts the default checklist back and clears every quarantine and
maintenance window after each test, passed or failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from ..service.hub import Hub, until_status
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in, sign_up

# A check that takes a moment, so that the page shows it running before it ends.
SMOKE = {
    "name": "smoke",
    "kind": "custom",
    "at": ["entry"],
    "timeout": 60,
    "command": ["sh", "-c", "sleep 2; echo smoke ok"],
}
GOOD_CHECKLIST = [
    {"name": "gpu-health", "kind": "gpu-health", "at": ["entry", "exit"], "thresholds": {"max_temperature_c": 80}},
    SMOKE,
]
BAD_CHECKLIST = [{"name": "gpu-health", "kind": "gpu-health", "at": ["entry"], "thresholds": {"max_temperature_c": -5}}]
BOB_PASSWORD = "bob-reads-his-checklist"


@pytest.fixture
def cluster(hub: Hub) -> Iterator[str]:
    """The name of this host's cluster; after the test its default checklist, no quarantine, no maintenance."""
    admin = hub.admin()
    (name,) = [c["name"] for c in admin.get("clusters")["clusters"] if c["kind"] == "local"]
    try:
        yield name
    finally:
        try:
            admin.call("DELETE", f"clusters/{name}/checks", expect=200)
        finally:
            for node in admin.get("nodes", expect=200)["nodes"]:
                path = f"nodes/{node['cluster']}/{node['name']}"
                if node["quarantined_at"] is not None:
                    admin.post(f"{path}/clear", {"reason": "test over"}, expect=200)
                if node["maintenance"]:
                    admin.call("DELETE", f"{path}/maintenance", expect=204)


def node_row(page: Page, name: str):
    return page.locator(f"#nodes tbody tr[data-node='{name}']")


def cells(row):
    """cluster, shape, health, GPUs, held by, maintenance, checks, actions (the node's name is the row header)."""
    return row.locator("td")


def log_in_as_admin(page: Page, hub: Hub) -> None:
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    expect(page).not_to_have_url(re.compile(r"/hub/login"))


def set_checklist(page: Page, cluster: str, checks: list[dict]) -> None:
    card = page.locator(f"[data-checklist='{cluster}']")
    card.get_by_label(f"Checks of {cluster} (JSON)").fill(json.dumps(checks, indent=2))
    card.get_by_role("button", name=f"Save checklist of {cluster}").click()


@pytest.mark.browser
def test_an_admin_quarantines_clears_and_checks_a_node_and_sets_a_checklist(hub: Hub, cluster, new_page, artifacts):
    admin_api = hub.admin()
    start = datetime.now(UTC) + timedelta(hours=5)
    window = {"start": start.isoformat(), "end": (start + timedelta(hours=2)).isoformat(), "reason": "firmware update"}
    admin_api.post(f"nodes/{cluster}/a100-a/maintenance", window, expect=201)

    watched = Watched(new_page())
    page = watched.page
    log_in_as_admin(page, hub)
    open_page(page, hub, "admin/nodes", "Nodes")
    expect(page.get_by_role("navigation", name="pages").get_by_role("link", name="Nodes")).to_have_attribute(
        "aria-current", "page"
    )
    notice = page.get_by_role("status")
    expect(page.locator("#nodes tbody tr[data-node]")).to_have_count(3)
    row = node_row(page, "a100-a")
    expect(row.locator("th")).to_have_text("a100-a")
    expect(cells(row).nth(0)).to_have_text(cluster)
    expect(cells(row).nth(1)).to_have_text("A100-40GB x4")
    expect(cells(row).nth(2)).to_have_text("healthy")
    expect(cells(row).nth(3)).to_have_text("4/4")
    expect(cells(row).nth(4)).to_have_text("free")
    expect(cells(row).nth(5)).to_contain_text(re.compile(r"→.*firmware update"))
    expect(cells(row).nth(6)).to_have_text("never checked")

    # Quarantine, with a reason asked for.
    page.once("dialog", lambda dialog: dialog.accept("flaky NVLink"))
    row.get_by_role("button", name="Quarantine node a100-a").click()
    expect(notice).to_have_text("Node a100-a quarantined")
    expect(cells(row).nth(2)).to_contain_text("quarantined")
    expect(cells(row).nth(2)).to_contain_text("flaky NVLink")
    assert admin_api.get(f"nodes/{cluster}/a100-a")["health"] == "quarantined"

    filters = page.get_by_role("search", name="Filter nodes")
    filters.get_by_label("Health").select_option("quarantined")
    expect(page.locator("#nodes tbody tr[data-node]")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"/admin/nodes\?health=quarantined$"))
    filters.get_by_label("Cluster").select_option(cluster)
    expect(page).to_have_url(re.compile(rf"/admin/nodes\?cluster={cluster}&health=quarantined$"))
    expect(row).to_have_count(1)
    page.screenshot(path=artifacts / "admin-nodes-quarantined.png", full_page=True)
    filters.get_by_label("Health").select_option("")
    expect(page.locator("#nodes tbody tr[data-node]")).to_have_count(3)

    # Clear, with a reason asked for.
    page.once("dialog", lambda dialog: dialog.accept("NVLink reseated"))
    row.get_by_role("button", name="Clear node a100-a").click()
    expect(notice).to_have_text("Node a100-a cleared")
    expect(cells(row).nth(2)).to_have_text("healthy")

    # The checklist: a bad threshold is refused naming the field; nothing changes. Then a good one.
    card = page.locator(f"[data-checklist='{cluster}']")
    expect(card).to_contain_text("egs-hub's default checklist")
    expect(card.get_by_label(f"Checks of {cluster} (JSON)")).to_have_value(re.compile(r'"name": "gpu-health"'))
    set_checklist(page, cluster, BAD_CHECKLIST)
    refusal = card.get_by_role("alert")
    expect(refusal).to_contain_text("Refused (400): checks.0.thresholds.max_temperature_c must be a number")
    expect(refusal.locator("code.field")).to_have_text("checks.0.thresholds.max_temperature_c")
    expect(notice).to_have_class("error")
    assert admin_api.get(f"clusters/{cluster}/checks")["default"] is True
    set_checklist(page, cluster, GOOD_CHECKLIST)
    expect(notice).to_have_text(f"Checklist of {cluster} saved: gpu-health, smoke")
    expect(refusal).to_have_count(0)
    expect(card).to_contain_text("Set by an admin.")
    expect(card.locator("table.checklist tbody tr")).to_have_count(2)
    expect(card.locator("tr[data-check='smoke'] td")).to_have_text(
        ["custom", "entry", "1m", "defaults", "sh -c sleep 2; echo smoke ok"]
    )
    expect(card.locator("tr[data-check='gpu-health'] td").nth(3)).to_have_text("max_temperature_c 80")

    # Checks on a quarantined node: shown pending or running, followed until they end; all passed clears it.
    page.once("dialog", lambda dialog: dialog.accept("suspect after the swap"))
    row.get_by_role("button", name="Quarantine node a100-a").click()
    expect(cells(row).nth(2)).to_contain_text("quarantined")
    row.get_by_role("button", name="Run checks on node a100-a").click()
    smoke = row.locator("[data-check='smoke/entry']")
    expect(smoke).to_have_attribute("data-status", re.compile(r"^(pending|running)$"))
    expect(row.get_by_role("button", name="Run checks on node a100-a")).to_be_disabled()
    expect(notice).to_have_text("Checks of node a100-a ended: 1 passed, 1 skipped", timeout=30_000)
    expect(smoke).to_have_attribute("data-status", "passed")
    expect(smoke).to_have_text("smoke entry: passed")
    expect(smoke).to_have_attribute(
        "title",
        re.compile(
            r"^smoke \(custom\) at entry on a100-a: passed\n.*\ntook \d+\.\d\d s\nvalues: .*\nlog: .*smoke ok", re.S
        ),
    )
    health = row.locator("[data-check='gpu-health/entry']")
    expect(health).to_have_attribute("data-status", "skipped")
    expect(health).to_have_attribute("title", re.compile(r"\nlog: .+"))
    expect(cells(row).nth(2)).to_have_text("healthy")  # its checks passed: out of quarantine
    expect(row.get_by_role("button", name="Run checks on node a100-a")).to_be_enabled()
    page.screenshot(path=artifacts / "admin-nodes-checked.png", full_page=True)

    # The default checklist again.
    card.get_by_role("button", name="Use the default").click()
    expect(notice).to_have_text(f"Checklist of {cluster}: egs-hub's default again (gpu-health)")
    expect(card).to_contain_text("egs-hub's default checklist")
    expect(card.get_by_role("button", name="Use the default")).to_have_count(0)
    assert watched.errors == []


@pytest.mark.browser
def test_a_member_sees_the_checklist_of_a_provisioned_gpr_in_the_portal(hub: Hub, cluster, new_page, artifacts):
    admin_api = hub.admin()
    admin_api.call("PUT", f"clusters/{cluster}/checks", {"checks": GOOD_CHECKLIST}, expect=200)
    admin_api.post("slices", {"name": "checked", "members": ["bob"]}, expect=201)
    bob_watched, admin_watched = Watched(new_page()), Watched(new_page())
    bob = bob_watched.page
    sign_up(bob, hub.invite_link("bob"), "bob", BOB_PASSWORD)
    bob_api = hub.client(hub.user_token("bob"))
    asked = bob_api.post("gprs", {"slice": "checked", "gpus": 1, "duration": "1h", "shape": "H100-80GB x8"}, expect=201)
    gpr = until_status(bob_api, asked["id"], "provisioned", timeout=30)
    (node,) = gpr["bound_nodes"]

    bob.goto(f"{hub.url}/services/egs/")
    log_in(bob, "bob", BOB_PASSWORD)
    expect(bob.locator("#updated")).to_contain_text("Updated")
    row = bob.locator(f"#gprs tbody tr[data-gpr='{gpr['id']}']")
    checks = row.get_by_role("list", name=f"Checks of GPR {gpr['id']}").get_by_role("listitem")
    expect(checks).to_have_count(2)  # the entry checks of its one node; exit checks come at its end
    expect(checks.nth(0)).to_contain_text(f"skipped {node} · gpu-health at entry")
    expect(checks.nth(1)).to_contain_text(re.compile(rf"^passed {node} · smoke at entry · \d+\.\d\d s"))
    log = checks.nth(1).locator("details.log")
    expect(log.locator("pre")).not_to_be_visible()  # the log is collapsed
    log.get_by_text("log", exact=True).click()
    expect(log.locator("pre")).to_be_visible()
    expect(log.locator("pre")).to_contain_text("smoke ok")
    bob.screenshot(path=artifacts / "portal-gpr-checklist.png", full_page=True)

    admin = admin_watched.page
    log_in_as_admin(admin, hub)
    open_page(admin, hub, "admin/nodes", "Nodes")
    held = node_row(admin, node)
    expect(cells(held).nth(4).get_by_role("link")).to_have_text(f"GPR {gpr['id']}")
    expect(cells(held).nth(4).get_by_role("link")).to_have_attribute(
        "href", f"/services/egs/admin/requests?gpr={gpr['id']}"
    )
    held.get_by_role("button", name=f"Run checks on node {node}").click()
    notice = admin.get_by_role("status")
    expect(notice).to_have_text(re.compile(rf"^node {node} is held by GPR\(s\) {gpr['id']}: .+"))
    expect(notice).to_have_class("error")

    bob_api.post(f"gprs/{gpr['id']}/release", {}, expect=200)
    until_status(bob_api, gpr["id"], "complete", timeout=30)
    assert bob_watched.errors == [] and admin_watched.errors == []
