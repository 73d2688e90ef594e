"""The "Cost and usage" admin page in a browser against a real hub: the admin sets a price per
GPU-hour, a GPR held at it shows in the usage table and the chart, and the CSV downloads."""

from __future__ import annotations

from playwright.sync_api import expect

from ..service.hub import Hub, until_status
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in


def test_the_admin_sets_prices_and_reads_usage_and_cost(hub: Hub, new_page, tmp_path) -> None:
    admin = hub.admin()
    admin.post("slices", {"name": "costly", "members": []}, expect=201)

    page = new_page()
    watched = Watched(page)
    page.goto(hub.url + "/")
    log_in(page, "admin", ADMIN_PASSWORD)
    open_page(page, hub, "admin/cost", "Cost and usage")
    shape = admin.get("inventory")["shapes"][0]
    price = page.get_by_label(f"Price per GPU-hour of {shape['name']} on {shape['cluster']}")
    price.fill("3.5")
    page.get_by_role("button", name=f"Save prices of {shape['cluster']}").click()
    expect(page.get_by_role("status")).to_have_text(f"Prices of {shape['cluster']} saved")
    assert admin.get(f"clusters/{shape['cluster']}/prices")["prices"] == {shape["name"]: 3.5}
    expect(price).to_have_value("3.5")  # kept across the refresh

    gpr = admin.post("gprs", {"slice": "costly", "gpus": 1, "duration": "1h", "shape": shape["model"]}, expect=201)
    until_status(admin, gpr["id"], "provisioned")
    admin.post(f"gprs/{gpr['id']}/release", expect=200)
    until_status(admin, gpr["id"], "complete")

    page.locator("#usage-form select[name=period]").select_option("week")
    row = page.locator("#usage tbody tr", has_text="costly")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("1")  # GPU-hours reserved: one GPU for the hour
    expect(page.get_by_role("img", name="GPU-hours used per week, 6 periods", exact=False)).to_be_visible()

    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    saved = tmp_path / "usage.csv"
    download.value.save_as(saved)
    lines = saved.read_text().splitlines()
    assert lines[0].startswith("period_start,key,gpu_hours_reserved") and any(",costly," in line for line in lines)
    assert watched.errors == []
    admin.call("PUT", f"clusters/{shape['cluster']}/prices", {}, expect=200)
