"""GPU sharing in the browser (issue 23): an admin lets a workspace share time-sliced GPUs from the
Workspaces page, and the portal's workspace card says when the GPUs it holds are shares of GPUs that
other workspaces run on too; on a hub whose declared inventory has a time-sliced node."""

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
    assert watched.errors == []
