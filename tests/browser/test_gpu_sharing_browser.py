"""GPU sharing in the browser (issue 23): an admin lets a workspace share time-sliced GPUs from the
Workspaces page, the portal's workspace card says when the GPUs it holds are shares of GPUs that
other workspaces run on too, and the admin dashboard counts instances and shares in GPU-equivalents;
a data scientist asks for a share and for one 1g.10gb instance from the JupyterLab sidebar, sees when
and at what price, and gets them; on a hub whose declared inventory has MIG instances, a time-sliced
node and whole GPUs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from ..service.hub import Hub, sqlite_hub, wait_for
from .test_admin_pages import Watched, open_page
from .test_lab_browser import opens_jupyterlab
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("hub-sharing-browser"), inventory="inventory_sharing.yaml") as running:
        yield running


def test_an_admin_allows_sharing_and_the_workspace_card_says_its_gpus_are_shared(hub: Hub, new_page) -> None:
    admin = hub.admin()
    admin.post("slices", {"name": "notebooks", "members": []}, expect=201)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/slices", "Workspaces")
    card = page.locator('[data-slice="notebooks"]')
    card.get_by_role("button", name="Edit notebooks").click()
    editor = page.locator("#slice-editor")
    editor.get_by_label("Share time-sliced GPUs").check()
    editor.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("status")).to_have_text("Workspace notebooks saved")
    expect(card).to_contain_text("may share time-sliced GPUs")
    assert admin.get("slices/notebooks")["policy"]["gpu_sharing"] is True

    gpr = admin.post("gprs", {"slice": "notebooks", "gpu_share": 0.25, "duration": "1h"}, expect=201)
    wait_for(lambda: admin.get(f"gprs/{gpr['id']}")["status"] == "provisioned", 30, "provisioned")
    open_page(page, hub, "", "My workspaces")
    mine = page.locator('#slices [data-slice="notebooks"]')
    expect(mine.locator(".shared-gpus")).to_contain_text("1 of them are shares of time-sliced GPUs")
    expect(mine).to_contain_text("may ask for shares of time-sliced GPUs (gpu_share)")

    # 14 1g.10gb instances (2 GPUs), 4 shares (1 GPU) and 8 whole GPUs: 11 GPUs; a quarter of one is bound.
    open_page(page, hub, "admin/", "Dashboard")
    capacity = page.get_by_role("table", name="GPUs per cluster and shape now")
    expect(capacity.locator("tbody tr")).to_have_text(
        [
            "localH100-80GB 1g.10gb x14140140",
            "localH100-80GB shared/4 x44130",
            "localH100-80GB x88080",
            "All, in GPU-equivalents110.2510.750",
        ]
    )
    expect(page.locator("[data-figure='bound-now']")).to_have_text("2% (0.25 of 11 GPUs)")
    assert watched.errors == []


@pytest.mark.browser
def test_a_share_and_a_mig_instance_from_the_sidebar_with_wait_and_price(hub: Hub, new_page) -> None:
    admin = hub.admin()
    policy = {"gpu_sharing": True, "max_active_gprs": 3}
    admin.post("slices", {"name": "lab-team", "members": ["dana"], "policy": policy}, expect=201)
    prices = {"H100-80GB shared/4 x4": 0.8, "H100-80GB 1g.10gb x14": 0.5}
    admin.call("PUT", "clusters/local/prices", prices, expect=200)
    page = new_page()
    page.set_viewport_size({"width": 1280, "height": 1600})
    opens_jupyterlab(hub, page, "dana", "dana-shares-a-gpu")
    page.locator('.jp-SideBar [data-id="egs-sidebar"]').click()
    panel = page.locator("#egs-sidebar")
    expect(panel.get_by_label("Workspace")).to_have_value("lab-team")

    panel.get_by_label("Ask for").select_option("a share of a GPU")
    expect(panel.get_by_label("Share of a GPU")).to_have_value("0.25")
    panel.get_by_role("button", name="Get wait times").click()
    waits = panel.get_by_role("table", name="Wait times")
    expect(waits.get_by_role("radio")).to_have_count(1)  # the time-sliced node alone serves a share
    expect(waits).to_contain_text("H100-80GB shared/4 x4")
    expect(waits.locator("tbody td").nth(5)).to_have_text("0.80")  # one share at 0.80 an hour
    panel.get_by_role("button", name="Request GPUs").click()
    expect(panel.locator('[data-gpr-id][data-status="provisioned"]')).to_have_count(1, timeout=30_000)
    (share,) = [g for g in admin.get("gprs?slice=lab-team")["gprs"] if g["status"] == "provisioned"]
    assert (share["gpu_share"], len(share["bound_gpus"]), share["price_per_gpu_hour"]) == (0.25, 1, 0.8)

    panel.get_by_label("Ask for").select_option("single GPUs")
    expect(panel.get_by_label("GPUs", exact=True)).to_have_value("1")
    panel.get_by_label("Shape").select_option("H100-80GB 1g.10gb x14")
    panel.get_by_role("button", name="Get wait times").click()
    expect(waits.get_by_role("radio")).to_have_count(1)
    expect(waits).to_contain_text("H100-80GB 1g.10gb x14")
    expect(waits).to_contain_text("now")
    expect(waits.locator("tbody td").nth(5)).to_have_text("0.50")
    panel.get_by_role("button", name="Request GPUs").click()
    expect(panel.locator('[data-gpr-id][data-status="provisioned"]')).to_have_count(2, timeout=30_000)
    instance = next(g for g in admin.get("gprs?slice=lab-team")["gprs"] if g["id"] != share["id"])
    (uuid,) = instance["bound_gpus"]
    assert instance["shape"] == "H100-80GB 1g.10gb x14" and uuid.startswith("MIG-")


def test_an_admin_splits_a_free_node_into_mig_instances_from_the_nodes_page(hub: Hub, new_page) -> None:
    admin = hub.admin()
    wait_for(lambda: not admin.get("nodes/local/h100-a")["held_by"], 30, "h100-a to be free")
    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/nodes", "Nodes")
    notice = page.get_by_role("status")
    row = page.locator("#nodes tbody tr[data-node='h100-a']")
    expect(row.get_by_role("button", name="Change the layout of node h100-a")).to_be_enabled()
    expect(page.get_by_role("button", name="Change the layout of node shared-a:shared")).to_have_count(0)

    # A layout that does not fit its GPUs is refused with the service's reason, and nothing changes.
    page.once("dialog", lambda dialog: dialog.accept("1g.10gb=8"))
    row.get_by_role("button", name="Change the layout of node h100-a").click()
    expect(notice).to_contain_text("from 1 to 7")
    page.once("dialog", lambda dialog: dialog.accept("seven small ones"))
    row.get_by_role("button", name="Change the layout of node h100-a").click()
    expect(notice).to_contain_text("is not a MIG profile and a count")
    assert admin.get("nodes/local/h100-a/layout")["changes"] == []

    page.once("dialog", lambda dialog: dialog.accept("1g.10gb=7"))
    row.get_by_role("button", name="Change the layout of node h100-a").click()
    expect(notice).to_contain_text("Node h100-a is being re-partitioned into 7 x 1g.10gb per GPU, back by")
    split = page.locator("#nodes tbody tr[data-node='h100-a:1g.10gb']")
    expect(split.locator("td").nth(1)).to_have_text("H100-80GB 1g.10gb x56")
    expect(split.locator("td").nth(5)).to_contain_text("re-partitioning (layout change")
    # The whole node it was is not found now (kept: past allocations name it).
    expect(row.locator("td").nth(2)).to_contain_text("not found in its cluster now")
    expect(row.get_by_role("button", name="Change the layout of node h100-a")).to_have_count(1)
    assert watched.errors == []
