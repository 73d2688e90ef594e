"""The inventory schedule shows a split node's GPUs with the windows on their instances (issue 23), in a
browser against a real hub whose declared inventory splits mig-a's two GPUs into seven 1g.10gb
instances each, time-slices shared-a's GPU into four shares and keeps h100-a's GPUs whole."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from ..service.hub import Hub, sqlite_hub, until_status
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in

MIG_SHAPE = "H100-80GB 1g.10gb"


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("hub-schedule-mig"), inventory="inventory_sharing.yaml") as running:
        yield running


def test_the_schedule_shows_a_split_nodes_gpus_with_their_windows(hub: Hub, new_page, artifacts: Path) -> None:
    admin = hub.admin()
    admin.post("slices", {"name": "mig-lab", "members": [], "policy": {"max_active_gprs": 3}}, expect=201)
    ask = {"slice": "mig-lab", "duration": "1h", "shape": MIG_SHAPE}
    one = until_status(admin, admin.post("gprs", {**ask, "gpus": 1}, expect=201)["id"], "provisioned", 30)
    rest = until_status(admin, admin.post("gprs", {**ask, "gpus": 13}, expect=201)["id"], "provisioned", 30)
    later = admin.post("gprs", {**ask, "gpus": 1}, expect=201)  # planned after them, its instance not chosen
    nodes = [n for c in admin.get("inventory")["clusters"] for n in c["nodes"]]
    instances = next(n["gpus"] for n in nodes if n["name"] == "mig-a:1g.10gb")
    parents = list(dict.fromkeys(g["parent_uuid"] for g in instances))  # GPU 0, GPU 1
    held_on = next(g["parent_uuid"] for g in instances if g["uuid"] == one["bound_gpus"][0])
    other = next(p for p in parents if p != held_on)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/schedule", "Inventory schedule")
    expect(page.locator("#page-of")).to_have_text("Nodes 1-3 of 3")  # mig-a, shared-a, h100-a
    machine = page.locator('.gantt-rows li.machine[data-machine="mig-a"]')
    expect(machine.locator(".machine-name")).to_have_text("mig-a local")
    rows = machine.locator('li[data-node="mig-a:1g.10gb"]')
    expect(rows.locator(".gpu-name")).to_have_text(["GPU 0 · 7 x 1g.10gb", "GPU 1 · 7 x 1g.10gb", "GPU not chosen yet"])
    for i, parent in enumerate(parents):
        expect(rows.nth(i)).to_have_attribute("data-gpu", parent)

    bar = machine.locator(f'li[data-gpu="{held_on}"] a.window.current[data-gpr="{one["id"]}"]')
    expect(bar).to_have_attribute("aria-label", re.compile(rf"^GPR {one['id']}, mig-lab, 1 GPU, current: .+ → .+$"))
    expect(machine.locator(f'li[data-gpu="{other}"] a.window[data-gpr="{one["id"]}"]')).to_have_count(0)
    expect(machine.locator(f'a.window.current[data-gpr="{rest["id"]}"]')).to_have_count(2)  # on both GPUs
    unchosen = rows.nth(2)
    expect(unchosen).not_to_have_attribute("data-gpu", re.compile(".*"))
    expect(unchosen.locator(f'a.window.planned[data-gpr="{later["id"]}"]')).to_have_count(1)
    expect(unchosen.locator("a.window")).to_have_count(1)

    shares = page.locator('li.machine[data-machine="shared-a"] li[data-node="shared-a:shared"] .gpu-name')
    expect(shares).to_have_text(["GPU 0 · 4 shares"])
    expect(page.locator('.gantt-rows > li[data-node="h100-a"] .node-name')).to_have_text("h100-a local")
    page.screenshot(path=artifacts / "admin-schedule-mig.png", full_page=True)

    page.get_by_label("Node").fill("mig")  # the filter matches node (machine) names
    expect(page.locator("#page-of")).to_have_text("Nodes 1-1 of 1")
    expect(page.locator(".gantt-rows > li")).to_have_count(1)
    assert watched.errors == []
    admin.call("DELETE", f"gprs/{later['id']}", expect=200)
    for gpr in (one, rest):
        admin.post(f"gprs/{gpr['id']}/release", expect=200)
