"""The Endpoints page in a browser against a real hub: serve a command from a workspace's GPUs (a
cluster and image are sent only when filled; an unknown cluster is refused, saying so), see it ready
on its cluster with its replica's GPR, scale it to two replicas and delete it."""

from __future__ import annotations

import os
import re
import sys

from playwright.sync_api import expect

from ..service.hub import Hub, wait_for
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in

SERVER = os.path.join(os.path.dirname(__file__), "..", "service", "endpoint_server.py")
LIVE = ("pending-approval", "queued", "provisioning", "provisioned")


def test_an_endpoint_is_served_scaled_and_deleted_on_its_page(hub: Hub, new_page) -> None:
    admin = hub.admin()
    admin.post("slices", {"name": "serving", "members": [], "policy": {"max_active_gprs": 4}}, expect=201)
    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "endpoints", "Endpoints")

    form = page.locator("#serve-form")
    expect(form.get_by_label("Runtime").locator("option")).to_have_text(
        ["vLLM", "KServe (Hugging Face runtime)", "Command"]
    )
    form.get_by_label("Workspace").select_option("serving")
    form.get_by_label("Name", exact=True).fill("echo")
    form.get_by_label("Runtime").select_option("command")
    form.get_by_role("textbox", name="Command").fill(f"{sys.executable} {os.path.abspath(SERVER)} {{port}}")
    form.get_by_label("Min replicas").fill("1")
    form.get_by_label("Max replicas").fill("2")
    form.get_by_label("Cluster").fill("nowhere")
    form.get_by_label("Image").fill("registry.example/echo:1")
    sent = serve(page)
    assert (sent["runtime"], sent["cluster"], sent["image"]) == ("command", "nowhere", "registry.example/echo:1")
    expect(page.get_by_role("status")).to_have_text(re.compile(r"'nowhere'.* \(cluster\)$"))  # the service's 422
    expect(page.locator("#notice")).to_have_class("error")
    expect(page.locator("#endpoints tbody tr")).to_have_count(0)

    form.get_by_label("Cluster").fill("local")  # this host's; the refused form keeps the rest
    form.get_by_label("Image").fill("")
    sent = serve(page)
    assert sent["cluster"] == "local" and "image" not in sent
    expect(page.get_by_role("status")).to_have_text(
        re.compile(r"^Endpoint echo is (pending|starting|ready): it answers at /services/egs/endpoints/serving/echo/$")
    )
    row = page.locator("#endpoints tr[data-endpoint='serving/echo']")
    expect(row.locator("td").nth(0)).to_have_text("serving")
    expect(row.locator("td").nth(1)).to_have_text("local")
    expect(row.locator("td").nth(2)).to_have_text("ready", timeout=60_000)
    (gpr,) = [g for g in admin.get("gprs?slice=serving")["gprs"] if g["status"] in LIVE]
    expect(row.locator("td").nth(7)).to_have_text(f"{gpr['id']} ready")
    expect(row.get_by_role("link")).to_have_attribute("href", "/services/egs/endpoints/serving/echo/")

    page.once("dialog", lambda dialog: dialog.accept("2"))
    row.get_by_role("button", name="Scale endpoint echo").click()
    expect(page.get_by_role("status")).to_have_text("Endpoint echo scaled to 2")
    expect(row.locator("td").nth(3)).to_have_text("2 ready of 2 (1 to 2)", timeout=60_000)

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete endpoint echo").click()
    expect(page.get_by_role("status")).to_have_text("Endpoint echo deleted")
    expect(row).to_have_count(0)
    wait_for(
        lambda: not [g for g in admin.get("gprs?slice=serving")["gprs"] if g["status"] in LIVE], 30, "its GPRs to end"
    )
    admin.call("DELETE", "slices/serving", expect=204)
    assert watched.errors == []


def serve(page) -> dict:
    """Click Serve; the body the page POSTed to /endpoints."""
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/endpoints")) as posted:
        page.locator("#serve-form").get_by_role("button", name="Serve").click()
    return posted.value.post_data_json
