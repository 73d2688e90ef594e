"""The EGS sidebar inside JupyterLab, end to end in a browser.

A real egs-hub (JupyterHub, proxy, EGS service, SliceLocalSpawner) whose GPUs are the node
of the recorded DCGM exposition, read through a real Prometheus, so the sidebar has live
metrics. Carol, a member of workspace ml-team, signs up, opens her JupyterLab (the
labextension and the server extension come with the package), opens the sidebar, gets
wait times, requests 2 GPUs, sees the GPR provisioned with its GPUs' metrics and the status
bar change, restarts her server from the notification to get the GPUs, and sees an endpoint of
her workspace wait for GPUs.

Screenshots go to the artifacts directory (tests/artifacts/ unless $EGS_ARTIFACTS says).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from ..service.hub import Hub, dcgm_hub, wait_for
from .test_walkthrough_browser import log_in, server_environment, server_model, sign_up

CAROL_PASSWORD = "carol-opens-the-lab"
GPUS = ["GPU-3f6e2a1c-8b7d-4e55-a0c2-9d1b7e4f6a10", "GPU-b81c4d92-07ae-4f3b-9e61-52c8d0a7e3f4"]


@pytest.fixture(scope="module")
def lab_hub(tmp_path_factory) -> Iterator[Hub]:
    with dcgm_hub(tmp_path_factory.mktemp("lab-hub")) as running:
        yield running.hub


def opens_jupyterlab(hub: Hub, page: Page, user: str, password: str) -> None:
    """``user`` signs up through an invite, logs in, and opens JupyterLab on a started server."""
    sign_up(page, hub.invite_link(user), user, password)
    page.goto(f"{hub.url}/hub/login")
    log_in(page, user, password)
    expect(page).not_to_have_url(re.compile(r"/hub/login"))
    hub.hub_api("POST", f"users/{user}/server", expect=(201, 202))
    wait_for(lambda: server_model(hub, user).get("ready"), 60, f"{user}'s server", interval=0.5)
    page.goto(f"{hub.url}/user/{user}/lab")
    expect(page.locator(".jp-Launcher")).to_be_visible(timeout=60_000)


@pytest.mark.browser
def test_sidebar_wait_times_request_provisioned_metrics_restart(lab_hub: Hub, new_page, artifacts: Path) -> None:
    admin = lab_hub.admin()
    admin.post("slices", {"name": "ml-team", "members": ["carol"]}, expect=201)
    template = {"name": "pair", "slice": "ml-team", "gpus": 2, "duration": "30m", "description": "two GPUs"}
    admin.post("templates", template, expect=201)
    (shape,) = admin.get("inventory")["shapes"]
    admin.call("PUT", "clusters/local/prices", {shape["name"]: 2.5}, expect=200)
    page = new_page()
    page.set_viewport_size({"width": 1280, "height": 1600})  # the whole sidebar in one screenshot
    opens_jupyterlab(lab_hub, page, "carol", CAROL_PASSWORD)
    first_pid = server_model(lab_hub, "carol")["state"]["pid"]
    assert server_environment(first_pid)["CUDA_VISIBLE_DEVICES"] == ""

    page.locator('.jp-SideBar [data-id="egs-sidebar"]').click()
    panel = page.locator("#egs-sidebar")
    expect(panel).to_be_visible()
    expect(panel.get_by_label("Workspace")).to_have_value("ml-team")
    panel.get_by_label("Template").select_option("pair")  # fills the size and duration
    expect(panel.get_by_label("GPUs", exact=True)).to_have_value("2")
    expect(panel.get_by_label("Duration")).to_have_value("30m")
    panel.get_by_role("button", name="Get wait times").click()
    waits = panel.get_by_role("table", name="Wait times")
    expect(waits.get_by_role("radio")).to_have_count(1)  # one shape: the H100 node
    expect(waits).to_contain_text("H100")
    expect(waits).to_contain_text("now")
    expect(waits.locator("tbody td").nth(5)).to_have_text("5.00")  # 2 GPUs at 2.50 per GPU-hour
    expect(waits.locator("tbody td").nth(6)).to_have_text("2.50")  # for half an hour
    waits.get_by_role("radio").first.check()
    page.screenshot(path=artifacts / "lab-wait-times.png")
    panel.screenshot(path=artifacts / "lab-sidebar-wait-times.png")

    panel.get_by_role("button", name="Request GPUs").click()
    provisioned = panel.locator('[data-gpr-id][data-status="provisioned"]')
    expect(provisioned).to_have_count(1, timeout=30_000)
    gpr_id = provisioned.get_attribute("data-gpr-id")
    gpr = lab_hub.admin().get(f"gprs/{gpr_id}", expect=200)
    assert gpr["slice"] == "ml-team" and gpr["requested_by"] == "carol" and sorted(gpr["bound_gpus"]) == sorted(GPUS)
    assert (gpr["template"], gpr["price_per_gpu_hour"], gpr["reserved_cost"]) == ("pair", 2.5, 2.5)
    # The GPUs are declared (no NVML here), and the status bar says so.
    expect(page.locator("#egs-status")).to_have_text(re.compile(r"^2 x H100 \(declared\) · (29|30)m\d\ds left$"))
    # The recorded exposition: the busy GPU runs at 97 % utilisation.
    expect(panel).to_contain_text("97%", timeout=40_000)
    page.screenshot(path=artifacts / "lab-provisioned.png")
    panel.screenshot(path=artifacts / "lab-sidebar-provisioned-metrics.png")

    restart = page.get_by_role("button", name="Restart server to use the GPUs")
    restart.click()
    restarted = wait_for(
        lambda: (s := server_model(lab_hub, "carol")).get("ready") and s["state"].get("pid") not in (None, first_pid),
        60,
        "carol's server to restart",
        interval=0.5,
    )
    assert restarted
    pid = server_model(lab_hub, "carol")["state"]["pid"]
    assert sorted(server_environment(pid)["CUDA_VISIBLE_DEVICES"].split(",")) == sorted(GPUS)

    # An endpoint of her workspace waits behind her GPR (one GPR at a time there): the sidebar says until when.
    server = Path(__file__).parent.parent / "service" / "endpoint_server.py"
    command = [sys.executable, str(server), "{port}"]
    admin.post("endpoints", {"slice": "ml-team", "name": "echo", "runtime": "command", "command": command}, expect=202)
    page.goto(f"{lab_hub.url}/user/carol/lab")  # the restarted server logs the page in again
    expect(page.locator(".jp-Launcher")).to_be_visible(timeout=60_000)
    if not panel.is_visible():  # JupyterLab may have restored the sidebar open
        page.locator('.jp-SideBar [data-id="egs-sidebar"]').click()
    endpoint = panel.get_by_role("list", name="My endpoints").locator("[data-endpoint='ml-team/echo']")
    # a start past midnight carries its weekday ("~Sun 00:09")
    expect(endpoint).to_contain_text(re.compile(r"pending · GPUs ~(\w{3} )?\d\d:\d\d \(in (29|30)m"), timeout=30_000)
    expect(endpoint.get_by_role("link")).to_have_attribute("href", "/services/egs/endpoints/ml-team/echo/")
    panel.screenshot(path=artifacts / "lab-sidebar-endpoint.png")
    admin.call("DELETE", "endpoints/ml-team/echo", expect=204)
