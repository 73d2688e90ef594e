"""The README walkthrough in a browser, as a person follows it.

1. The admin opens the hub, logs in, opens the portal at /services/egs/ (through
   JupyterHub OAuth, no confirmation page), sees the declared-inventory notice,
   creates workspace "team-a", adds member "alice" on its card, and makes her a
   signup invite at /hub/invite.
2. Alice signs up through the invite link (authorized at once: the invite is
   the admin's approval), opens the portal, logs in, asks for 2 GPUs for 30m:
   wait times for every shape, then "Request GPUs"; the GPR becomes provisioned
   with its GPU UUIDs.
3. From /hub/home she starts her server; JupyterLab loads, and the server's
   process has CUDA_VISIBLE_DEVICES = the UUIDs the portal shows.
4. Back on the portal she releases the GPR: it completes and her server is
   restarted without GPUs.
5. Alice, not an admin, gets no "Create a workspace" form and sees no other
   workspace (a "team-b" made through the API) nor its GPRs.

Each step is one function below, in README order; screenshots of the main ones
go to the artifacts directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Locator, Page, expect

from ..service.hub import ADMIN_PASSWORD, Hub, wait_for
from .conftest import BROWSER_TIMEZONE

ALICE_PASSWORD = "alice-walks-through"
UUID_LIST = re.compile(r"^GPU-[0-9a-f-]+( GPU-[0-9a-f-]+)*$")


def log_in(page: Page, user: str, password: str) -> None:
    """Fill and submit the hub's login form (the page must show it)."""
    expect(page.get_by_role("button", name="Sign In")).to_be_visible()
    page.get_by_label("Username:").fill(user)
    page.get_by_label("Password:", exact=True).fill(password)
    page.get_by_role("button", name="Sign In").click()


def sign_up(page: Page, invite_link: str, user: str, password: str) -> None:
    """Sign ``user`` up through an admin's invite link (authorized at once)."""
    page.goto(invite_link)
    expect(page.get_by_role("alert")).to_contain_text(f"This invitation lets you sign up as {user} until")
    page.get_by_label("Username:").fill(user)
    page.get_by_label("Password:", exact=True).fill(password)
    # nativeauthenticator's "Confirm password:" label points at no input (for="password_confirm").
    page.locator("#password_confirmation_input").fill(password)
    page.get_by_role("button", name="Create User").click()
    expect(page.get_by_role("alert")).to_contain_text("The signup was successful! You can now log in.")


def portal_url(hub: Hub) -> str:
    return f"{hub.url}/services/egs/"


def expect_portal(page: Page, hub: Hub, user: str) -> None:
    expect(page).to_have_url(portal_url(hub))
    expect(page.get_by_role("heading", name="My workspaces")).to_be_visible()
    expect(page.get_by_role("navigation", name="hub")).to_contain_text(user)


def region(page: Page, name: str) -> Locator:
    return page.get_by_role("region", name=name, exact=True)


def gpr_row(page: Page, gpr_id: str) -> Locator:
    return region(page, "GPU requests").locator(f"tbody tr[data-gpr='{gpr_id}']")


def server_model(hub: Hub, user: str) -> dict:
    return hub.hub_api("GET", f"users/{user}")["servers"].get("") or {}


def server_environment(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    return {k.decode(): v.decode() for k, v in pairs}


def local_time(iso: str) -> str:
    """An API time as the portal shows it in this browser: its zone, its locale (en-GB)."""
    return datetime.fromisoformat(iso).astimezone(ZoneInfo(BROWSER_TIMEZONE)).strftime("%d/%m/%Y, %H:%M:%S")


@dataclass
class Provisioned:
    gpr_id: str
    uuids: list[str]


def admin_creates_team_a(hub: Hub, admin: Page, artifacts: Path) -> str:
    """1. The admin logs in at the hub, opens the portal, creates team-a, adds alice and invites her;
    returns the invite link."""
    admin.goto(hub.url + "/")
    expect(admin).to_have_url(re.compile(r"/hub/login"))
    # The login page's own errors render (nativeauthenticator on JupyterHub 6 answered 500).
    log_in(admin, "admin", "not-the-password")
    expect(admin.get_by_text("Invalid username or password.")).to_be_visible()
    admin.context.clear_cookies()  # as if the form had expired
    log_in(admin, "admin", ADMIN_PASSWORD)
    expect(admin.get_by_text("Login form invalid or expired. Try again.")).to_be_visible()
    log_in(admin, "admin", ADMIN_PASSWORD)
    expect(admin).not_to_have_url(re.compile(r"/hub/login"))

    admin.goto(portal_url(hub))  # JupyterHub OAuth, no confirmation page
    expect_portal(admin, hub, "admin")
    expect(admin.get_by_text("Declared inventory: these GPUs come from config, not NVML.")).to_be_visible()
    expect(region(admin, "My workspaces")).to_contain_text("No workspaces yet: create one below.")

    create = region(admin, "Create a workspace")
    create.get_by_label("Name", exact=True).fill("team-a")
    create.get_by_label("Display name").fill("Team A")
    create.get_by_role("button", name="Create workspace").click()
    notice = admin.get_by_role("status")
    expect(notice).to_have_text("Workspace team-a created")
    card = region(admin, "My workspaces").locator("[data-slice='team-a']")
    expect(card.get_by_role("heading")).to_contain_text("Team A (team-a, hub group team-a)")
    expect(card).to_contain_text("Members: none")

    # What the admin types into "Add member" survives the refresh every 5 s (text and focus).
    member = card.get_by_label("Add member")
    member.press_sequentially("ali")
    updated = admin.get_by_text(re.compile(r"^Updated .*; refreshes every 5 s\.$"))
    expect(updated).not_to_have_text(updated.inner_text(), timeout=10_000)
    expect(member).to_be_focused()
    expect(member).to_have_value("ali")
    member.press_sequentially("ce")
    member.press("Enter")
    expect(notice).to_have_text("alice added to team-a")
    expect(card.get_by_role("listitem")).to_contain_text(["alice"])
    expect(card.get_by_role("button", name="Remove alice from team-a")).to_be_visible()
    expect(member).to_have_value("")
    admin.screenshot(path=artifacts / "portal-admin.png", full_page=True)

    admin.goto(f"{hub.url}/hub/invite")
    admin.get_by_label("User name:").fill("alice")
    admin.get_by_role("button", name="Create invite link").click()
    expect(admin.get_by_role("alert")).to_contain_text("Invite for alice, valid until")
    return admin.locator("#invite-link").inner_text()


def alice_gets_gpus(hub: Hub, alice: Page, invite_link: str, artifacts: Path) -> Provisioned:
    """2. Alice signs up through her invite, logs in on her way to the portal, sees wait times and asks for 2 GPUs."""
    sign_up(alice, invite_link, "alice", ALICE_PASSWORD)

    # Opening the portal first sends her to /hub/login and, logged in, back to the portal.
    alice.goto(portal_url(hub))
    log_in(alice, "alice", ALICE_PASSWORD)
    expect_portal(alice, hub, "alice")
    card = region(alice, "My workspaces").locator("[data-slice='team-a']")
    expect(card).to_contain_text("Team A")

    ask = region(alice, "Ask for GPUs")
    expect(ask.get_by_label("Workspace")).to_have_value("team-a")
    ask.get_by_label("GPUs", exact=True).fill("2")
    ask.get_by_label("For", exact=True).fill("30m")
    ask.get_by_role("button", name="Get wait times").click()
    waits = ask.get_by_role("table", name="Estimated start if you ask now")
    shapes = waits.locator("tbody tr td:nth-child(3)")
    expect(shapes).to_have_count(2)  # one row per shape of the test inventory
    assert sorted(shapes.all_inner_texts()) == ["A100-40GB x4", "H100-80GB x8"]
    expect(waits.locator("tbody tr td:nth-child(5)")).to_have_text(["now", "now"])
    waits.get_by_role("radio", name="local H100-80GB x8").check()
    expect(ask.get_by_label("Shape")).to_have_value("H100-80GB x8")
    alice.screenshot(path=artifacts / "portal-wait-times.png", full_page=True)

    ask.get_by_role("button", name="Request GPUs").click()
    notice = alice.get_by_role("status")
    expect(notice).to_have_text(re.compile(r"^GPR \d+ is (queued|provisioning|provisioned)$"))
    gpr_id = re.search(r"\d+", notice.inner_text()).group()
    row = gpr_row(alice, gpr_id)
    expect(row.locator("td").nth(4)).to_have_text("provisioned")  # within a refresh (5 s)
    gpus = row.locator("td").nth(6)
    expect(gpus).to_have_text(UUID_LIST)
    uuids = gpus.inner_text().split()
    assert len(uuids) == 2
    expect(row.locator("td").nth(3)).to_have_text("2 GPUs · 30m · H100-80GB x8 · p101")
    window_start = hub.admin().get(f"gprs/{gpr_id}")["window_start"]
    expect(row.locator("td").nth(5)).to_contain_text(local_time(window_start))  # the browser's zone
    expect(card).to_contain_text(f"2 GPU(s) bound now: {' '.join(uuids)}")
    alice.screenshot(path=artifacts / "portal-provisioned.png", full_page=True)
    return Provisioned(gpr_id, uuids)


def alice_starts_jupyterlab(hub: Hub, alice: Page, gpr: Provisioned, artifacts: Path) -> int:
    """3. From the hub home page she starts her server; its process sees the bound GPUs."""
    alice.get_by_role("link", name="Hub home").click()
    expect(alice).to_have_url(f"{hub.url}/hub/home")
    alice.get_by_role("button", name="Start My Server").click()
    # The spawn form asks for GPUs, starting at those her workspace holds now.
    expect(alice.get_by_role("heading", name="Server Options")).to_be_visible()
    expect(alice.get_by_label("GPUs")).to_have_value(str(len(gpr.uuids)))
    alice.get_by_role("button", name="Start").click()
    expect(alice).to_have_url(re.compile(r"/user/alice/lab"), timeout=60_000)
    expect(alice.locator(".jp-Launcher")).to_be_visible(timeout=60_000)
    alice.screenshot(path=artifacts / "jupyterlab.png")
    pid = server_model(hub, "alice")["state"]["pid"]
    environment = server_environment(pid)
    assert environment["CUDA_VISIBLE_DEVICES"] == ",".join(gpr.uuids)
    assert environment["EGS_SLICE"] == "team-a"
    return pid


def alice_releases(hub: Hub, alice: Page, gpr: Provisioned, pid: int, artifacts: Path) -> None:
    """4. Back on the portal she releases early; her server is restarted without GPUs."""
    alice.goto(portal_url(hub))
    row = gpr_row(alice, gpr.gpr_id)
    # the row's checks come in after it is drawn and widen its cell: a click before they did could land
    # where the button was
    expect(row.get_by_role("list", name=f"Checks of GPR {gpr.gpr_id}")).to_be_visible()
    row.get_by_role("button", name="Release").click()
    expect(alice.get_by_role("status")).to_have_text(f"GPR {gpr.gpr_id} released")
    expect(row.locator("td").nth(4)).to_have_text("complete", timeout=60_000)
    expect(row.locator("td").nth(5)).to_contain_text("released-early")
    expect(row.get_by_role("button")).to_have_count(0)
    expect(region(alice, "My workspaces")).to_contain_text("No GPUs bound now.")
    alice.screenshot(path=artifacts / "portal-released.png", full_page=True)

    restarted = wait_for(
        lambda: (s := server_model(hub, "alice")).get("ready") and s["state"].get("pid") not in (None, pid) and s,
        60,
        "alice's server to be restarted",
        interval=0.5,
    )
    assert server_environment(restarted["state"]["pid"])["CUDA_VISIBLE_DEVICES"] == ""


def alice_sees_only_her_workspace(alice: Page) -> None:
    """5. No admin forms for alice, and nothing of team-b (bob's) on her portal."""
    expect(alice.get_by_role("heading", name="Create a workspace")).to_have_count(0)
    expect(alice.locator("form#slice-form")).to_have_count(0)
    expect(alice.get_by_label("Add member")).to_have_count(0)
    expect(alice.get_by_role("button", name=re.compile("^Remove "))).to_have_count(0)
    expect(region(alice, "My workspaces").locator("[data-slice]")).to_have_count(1)
    expect(region(alice, "Ask for GPUs").get_by_label("Workspace").locator("option")).to_have_text(["Team A"])
    expect(region(alice, "GPU requests").locator("tbody tr")).to_have_count(1)
    expect(region(alice, "GPU requests")).not_to_contain_text("team-b")


@pytest.mark.browser
def test_readme_walkthrough_in_a_browser(hub: Hub, new_page, artifacts: Path) -> None:
    admin, alice = new_page(), new_page()
    invite_link = admin_creates_team_a(hub, admin, artifacts)
    # Another workspace, with a GPR, which alice must not see.
    hub.admin().post("slices", {"name": "team-b", "members": ["bob"]}, expect=201)
    as_bob = hub.client(hub.user_token("bob"))
    as_bob.post("gprs", {"slice": "team-b", "gpus": 1, "duration": "30m", "shape": "A100"}, expect=201)

    gpr = alice_gets_gpus(hub, alice, invite_link, artifacts)
    pid = alice_starts_jupyterlab(hub, alice, gpr, artifacts)
    alice_releases(hub, alice, gpr, pid, artifacts)
    alice_sees_only_her_workspace(alice)
