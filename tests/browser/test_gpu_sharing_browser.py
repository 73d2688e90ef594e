"""GPU sharing in the browser (issue 23): an admin lets a workspace share time-sliced GPUs from the
Workspaces page, the portal's workspace card says when the GPUs it holds are shares of GPUs that
other workspaces run on too, and the admin dashboard counts instances and shares in GPU-equivalents;
on a hub whose declared inventory has MIG instances, a time-sliced node and whole GPUs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from ..service.hub import Hub, sqlite_hub, wait_for
from .test_admin_pages import Watched, open_page
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
