"""The admin pages in a browser, as an admin runs the GPU service for a day, and a member's view.

The hub reads GPU metrics from a real Prometheus scraping a recorded DCGM-exporter exposition
(one node, gpu-node-1, with two H100s; its pod jupyter-alice runs in namespace egs-ml-team), so
the workloads page has live readings and a time series to chart.

1. The admin opens the dashboard (nothing bound, no Kubernetes cluster configured).
2. On the Slices page they create "research" (approval above 1 GPU), add carol, edit it, and
   delete a scratch workspace.
3. bob holds both GPUs with a low-priority preemptible GPR (slice "batch"); dave's high-priority
   GPR (slice "urgent", eviction confirmed by an admin) waits; carol's 2-GPU GPR waits for approval.
4. On GPU requests the admin approves carol's GPR with a reason, reprioritises it, moves it up and
   down the queue, and evicts bob's GPR through the eviction list: dave's GPR starts.
5. The schedule shows the windows; a click on dave's window opens his GPR. The workloads page
   shows the pod with live readings and a chart; the events page finds the eviction. A second
   project, "vision" (workspace vision-team, erin's), tries the project filter of each page.
6. carol, not an admin, is refused the admin pages (403) and sees only research's GPRs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from ..service.hub import Client, Hub, dcgm_hub, until_status
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in, sign_up

CAROL_PASSWORD = "carol-reads-her-queue"


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with dcgm_hub(tmp_path_factory.mktemp("admin-pages-hub")) as running:
        yield running.hub


class Watched:
    """A page whose script errors and CSP violations are collected (none may happen; a 403
    answer logs a console error too, so other console errors do not count)."""

    def __init__(self, page: Page):
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", lambda m: "Content Security Policy" in m.text and self.errors.append(m.text))


def open_page(page: Page, hub: Hub, path: str, heading: str) -> None:
    page.goto(f"{hub.url}/services/egs/{path}")
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page.locator("#updated")).to_contain_text("Updated")  # the first refresh is drawn


def row_of(page: Page, gpr_id: int):
    return page.locator(f"#requests tbody tr[data-gpr='{gpr_id}']")


def dashboard_before(hub: Hub, admin: Page, artifacts: Path) -> None:
    admin.goto(hub.url + "/")
    log_in(admin, "admin", ADMIN_PASSWORD)
    expect(admin).not_to_have_url(re.compile(r"/hub/login"))
    open_page(admin, hub, "admin/", "Dashboard")
    expect(admin.get_by_role("navigation", name="pages").get_by_role("link")).to_have_text(
        [
            "GPUs",
            "Dashboard",
            "GPU requests",
            "Inventory schedule",
            "Slices",
            "Clusters",
            "Nodes",
            "AI workloads",
            "Endpoints",
            "Events",
            "Cost and usage",
            "Capacity planning",
            "Workspace requests",
        ]
    )
    capacity = admin.get_by_role("table", name="GPUs per cluster and shape now")
    expect(capacity.locator("tbody tr").first).to_have_text(re.compile(r"^localH100-80GB x22020$"))
    expect(admin.locator("[data-figure='bound-now']")).to_have_text("0% (0 of 2 GPUs)")
    expect(admin.locator("[data-figure='queued']")).to_have_text("0")
    expect(admin.get_by_text("No Kubernetes cluster is configured: GPUs come from this host only.")).to_be_visible()
    projects = admin.get_by_role("table", name="Projects this month")
    expect(projects.locator("tbody tr[data-project='default'] td").first).to_have_text(re.compile(r"^\d+$"))


def slices_page(hub: Hub, admin: Page, artifacts: Path) -> None:
    open_page(admin, hub, "admin/slices", "Slices")
    roles = admin.get_by_role("table", name="Role templates")
    expect(roles.locator("tbody tr")).to_have_count(2)
    expect(roles.locator("[data-template='deployment']")).to_contain_text("ServiceAccount {service_account}")
    expect(roles.locator("[data-template='reader']")).to_contain_text("Group egs:{slice}")
    editor = admin.get_by_role("region", name="Create a workspace")
    editor.get_by_label("Name", exact=True).fill("research")
    editor.get_by_label("Approve above").fill("1")
    editor.get_by_label("Max duration").fill("1d")
    editor.get_by_label("Namespaces per cluster").fill("local: research-ns")
    editor.get_by_role("button", name="Create workspace").click()
    notice = admin.get_by_role("status")
    expect(notice).to_have_text("Workspace research created")
    card = admin.locator("[data-slice='research']")
    expect(card).to_contain_text("approval above 1 GPUs")
    expect(card).to_contain_text("Namespaces: local: research-ns")

    card.get_by_label("Add member to research").fill("carol")
    card.get_by_label("Add member to research").press("Enter")
    expect(notice).to_have_text("carol added to research")
    expect(card.get_by_role("listitem")).to_contain_text(["carol"])
    expect(card.get_by_role("button", name="Remove carol from research")).to_be_visible()

    card.get_by_role("button", name="Edit research").click()
    editor = admin.get_by_role("region", name="Edit workspace research")
    expect(editor.get_by_label("Max duration")).to_have_value("1d")
    editor.get_by_label("Display name").fill("Research")
    editor.get_by_label("Max GPUs at once").fill("2")
    editor.get_by_role("button", name="Save changes").click()
    expect(notice).to_have_text("Workspace research saved")
    expect(card.get_by_role("heading")).to_have_text("Research (research, hub group research)")
    expect(card).to_contain_text("max 2 GPUs at once")

    hub.admin().post("slices", {"name": "scratch"}, expect=201)
    scratch = admin.locator("[data-slice='scratch']")
    expect(scratch).to_be_visible()
    admin.once("dialog", lambda dialog: dialog.accept())
    scratch.get_by_role("button", name="Delete scratch").click()
    expect(notice).to_have_text("Workspace scratch deleted")
    expect(scratch).to_have_count(0)
    admin.screenshot(path=artifacts / "admin-slices.png", full_page=True)


def fill_the_queue(hub: Hub) -> dict[str, int]:
    """bob holds both GPUs (low, preemptible); dave waits (high); carol waits for approval."""
    admin = hub.admin()
    # The recorded exposition's pod keeps 60 GB on GPU 0 for good: an exit check would quarantine the
    # node when bob's GPR is evicted (as it should on a real node), so the node is checked at entry only.
    entry_only = [{"name": "gpu-health", "kind": "gpu-health", "at": ["entry"]}]
    admin.call("PUT", "clusters/local/checks", {"checks": entry_only}, expect=200)
    admin.post("slices", {"name": "batch", "members": ["bob"]}, expect=201)
    admin.post(
        "slices",
        {
            "name": "urgent",
            "members": ["dave"],
            "policy": {"eviction": "confirm"},
            "namespaces": {"local": ["egs-ml-team"]},
        },
        expect=201,
    )
    as_bob, as_dave = hub.client(hub.user_token("bob")), hub.client(hub.user_token("dave"))
    as_carol = hub.client(hub.user_token("carol"))
    held = as_bob.post("gprs", {"slice": "batch", "gpus": 2, "duration": "1h", "priority": 50}, expect=201)
    until_status(as_bob, held["id"], "provisioned")
    urgent = as_dave.post("gprs", {"slice": "urgent", "gpus": 2, "duration": "1h", "priority": 250}, expect=201)
    pending = as_carol.post("gprs", {"slice": "research", "gpus": 2, "duration": "30m"}, expect=201)
    assert (urgent["status"], pending["status"]) == ("queued", "pending-approval")
    return {"held": held["id"], "urgent": urgent["id"], "carol": pending["id"]}


def second_project(hub: Hub) -> Client:
    """Project "vision" with workspace "vision-team" (erin), beside the default project's workspaces; erin's client."""
    api = hub.admin()
    api.post("projects", {"name": "vision", "display_name": "Vision"}, expect=201)
    api.post("slices", {"name": "vision-team", "project": "vision", "members": ["erin"]}, expect=201)
    return hub.client(hub.user_token("erin"))


def requests_page(hub: Hub, admin: Page, gprs: dict[str, int], artifacts: Path) -> None:
    open_page(admin, hub, "admin/requests?status=pending-approval", "GPU requests")
    notice = admin.get_by_role("status")
    rows = admin.locator("#requests tbody tr[data-gpr]")
    expect(rows).to_have_count(1)
    carol = row_of(admin, gprs["carol"])
    carol.get_by_label(f"Reason for GPR {gprs['carol']}").fill("research deadline")
    carol.get_by_role("button", name=f"Approve GPR {gprs['carol']}").click()
    expect(notice).to_have_text(f"GPR {gprs['carol']} approved")

    filters = admin.get_by_role("search", name="Filter GPU requests")
    filters.get_by_label("Status").select_option("active")
    expect(rows).to_have_count(3)
    api = hub.admin()
    api.post("projects", {"name": "lab"}, expect=201)
    api.post("slices", {"name": "lab-team", "project": "lab"}, expect=201)
    filters.get_by_label("Project").select_option("lab")  # a project whose workspace asked for nothing
    expect(rows).to_have_count(0)
    filters.get_by_label("Project").select_option("default")  # the others' project
    expect(rows).to_have_count(3)
    filters.get_by_label("Project").select_option("")
    api.call("DELETE", "slices/lab-team", expect=204)
    api.call("DELETE", "projects/lab", expect=204)
    filters.get_by_label("Workspace").select_option("research")
    expect(rows).to_have_count(1)
    expect(carol.locator("td").nth(4)).to_have_text("queued")
    carol.get_by_label(f"Priority of GPR {gprs['carol']}", exact=True).fill("150")
    carol.get_by_role("button", name=f"Set priority of GPR {gprs['carol']}").click()
    expect(notice).to_have_text(f"GPR {gprs['carol']} now has priority 150")
    expect(carol.locator("td").nth(3)).to_have_text("2 GPUs · 30m · p150")
    expect(carol.locator("td").nth(5)).to_contain_text("#2")
    carol.get_by_role("button", name=f"Move GPR {gprs['carol']} up the queue").click()
    expect(notice).to_have_text(f"GPR {gprs['carol']} moved up (priority 251)")
    expect(carol.locator("td").nth(5)).to_contain_text("#1")
    carol.get_by_role("button", name=f"Move GPR {gprs['carol']} down the queue").click()
    expect(notice).to_have_text(f"GPR {gprs['carol']} moved down (priority 249)")
    expect(carol.locator("td").nth(5)).to_contain_text("#2")

    filters.get_by_label("Workspace").select_option("")
    eviction = admin.locator(f"[data-eviction='{gprs['urgent']}']")
    expect(eviction.locator("tbody tr")).to_have_count(1)
    expect(eviction.locator(f"tr[data-victim='{gprs['held']}']")).to_contain_text("batch")
    admin.screenshot(path=artifacts / "admin-requests-eviction.png", full_page=True)
    eviction.get_by_role("button", name=f"Evict 1 GPR for GPR {gprs['urgent']}").click()
    expect(notice).to_have_text(f"Evicted GPR {gprs['held']} for GPR {gprs['urgent']}")
    urgent = row_of(admin, gprs["urgent"])
    expect(urgent.locator("td").nth(4)).to_have_text("provisioned", timeout=30_000)
    expect(row_of(admin, gprs["held"]).locator("td").nth(4)).to_have_text("queued", timeout=30_000)

    urgent.get_by_role("button", name=f"Details of GPR {gprs['urgent']}").click()
    events = admin.get_by_role("table", name=f"Events of GPR {gprs['urgent']}")
    # Carol moved up the band for a while: the urgent GPR's estimate moved past the start it was told,
    # and its events say so and why.
    expect(events.locator("tbody td:nth-child(2)")).to_have_text(
        ["submitted", "estimate-moved", "admitted", "provisioned"]
    )
    moved = events.locator("tbody tr", has_text="estimate-moved")
    expect(moved).to_contain_text("an admin changed priorities in its band")
    admin.screenshot(path=artifacts / "admin-requests.png", full_page=True)


def schedule_page(hub: Hub, admin: Page, gprs: dict[str, int], erin: Client, artifacts: Path) -> None:
    open_page(admin, hub, "admin/schedule", "Inventory schedule")
    node = admin.locator(".gantt-rows li[data-node='gpu-node-1']")
    expect(node.locator(f"a.window.current[data-gpr='{gprs['urgent']}']")).to_be_visible()
    # bob's evicted GPR was re-queued: the schedule plans it again (its evicted window is not kept).
    expect(node.locator("a.window.planned")).to_have_count(2)
    expect(node.locator(f"a.window.planned[data-gpr='{gprs['held']}']")).to_be_visible()
    expect(admin.locator("#legend .legend")).to_have_text(["batch", "research", "urgent"])
    expect(admin.locator("#page-of")).to_have_text("Nodes 1-1 of 1")
    admin.screenshot(path=artifacts / "admin-schedule.png", full_page=True)

    # erin's GPR in project vision is planned too; the project filter keeps its slices' bars, and every node.
    vision = erin.post("gprs", {"slice": "vision-team", "gpus": 1, "duration": "30m"}, expect=201)
    open_page(admin, hub, "admin/schedule", "Inventory schedule")
    windows, legend, project = node.locator("a.window"), admin.locator("#legend .legend"), admin.get_by_label("Project")
    expect(windows).to_have_count(4)
    project.select_option("vision")
    expect(windows).to_have_count(1)
    expect(node.locator(f"a.window.planned[data-gpr='{vision['id']}']")).to_be_visible()
    expect(legend).to_have_text(["vision-team"])
    expect(admin.locator("#page-of")).to_have_text("Nodes 1-1 of 1")
    project.select_option("default")
    expect(windows).to_have_count(3)
    expect(legend).to_have_text(["batch", "research", "urgent"])
    project.select_option("")
    expect(windows).to_have_count(4)
    expect(legend).to_have_text(["batch", "research", "urgent", "vision-team"])
    erin.call("DELETE", f"gprs/{vision['id']}", expect=200)
    node.locator(f"a.window.current[data-gpr='{gprs['urgent']}']").click()
    expect(admin).to_have_url(re.compile(rf"/services/egs/admin/requests\?gpr={gprs['urgent']}$"))
    expect(admin.get_by_role("button", name=f"Details of GPR {gprs['urgent']}")).to_have_attribute(
        "aria-expanded", "true"
    )


def workloads_page(hub: Hub, admin: Page, artifacts: Path) -> None:
    open_page(admin, hub, "admin/workloads", "AI workloads")
    expect(admin.locator("#source")).to_contain_text("Live readings from prometheus")
    pod = admin.locator("#workloads tr[data-workload='urgent/pod/egs-ml-team/jupyter-alice']")
    expect(pod).to_contain_text("gpu-node-1 #0")
    expect(pod.locator("td").nth(6)).to_have_text("57°C on gpu-node-1 #0")
    admin.get_by_role("button", name="Chart of gpu-node-1 #0").click()
    chart = admin.get_by_role("img", name=re.compile(r"^Utilisation: \d+ points from .*, last 97%$"))
    expect(chart).to_be_visible(timeout=30_000)
    admin.get_by_label("Metric").select_option("temperature_c")
    expect(admin.get_by_role("img", name=re.compile(r"^Temperature: .*, last 57°C$"))).to_be_visible()
    admin.screenshot(path=artifacts / "admin-workloads.png", full_page=True)

    # erin's server (no GPUs) in project vision beside urgent's pod; a project keeps its slices' workloads and GPUs.
    api = hub.admin()
    api.call("PUT", "servers/erin", {"slice": "vision-team"}, expect=200)
    workspaces = admin.locator("#workloads tbody tr[data-workload] td:first-child")
    gpus, project = admin.locator("#gpus tbody tr[data-gpu]"), admin.get_by_label("Project")
    expect(workspaces).to_have_text(["urgent", "vision-team"])  # the next refresh
    project.select_option("vision")
    expect(workspaces).to_have_text(["vision-team"])
    expect(gpus).to_have_count(0)
    project.select_option("default")
    expect(workspaces).to_have_text(["urgent"])
    expect(gpus).to_have_count(2)
    project.select_option("")
    expect(workspaces).to_have_text(["urgent", "vision-team"])
    api.call("DELETE", "servers/erin", expect=204)


def events_page(hub: Hub, admin: Page, gprs: dict[str, int], artifacts: Path) -> None:
    open_page(admin, hub, "admin/events", "Events")
    filters = admin.get_by_role("search", name="Filter events")
    filters.get_by_label("Kind").select_option("evicted")
    rows = admin.locator("#events tbody tr[data-event]")
    expect(rows).to_have_count(1)
    expect(rows.locator("td").nth(2)).to_have_text("admin")
    expect(rows.locator("td").nth(4)).to_have_text(str(gprs["held"]))
    filters.get_by_label("Kind").select_option("")
    filters.get_by_label("GPR").fill(str(gprs["carol"]))
    filters.get_by_label("GPR").press("Enter")
    # newest first: the three priority changes (set, up, down), the approval, the submission
    expect(rows.locator("td:nth-child(2)")).to_have_text(
        ["priority-changed", "priority-changed", "priority-changed", "approved", "submitted"]
    )
    admin.screenshot(path=artifacts / "admin-events.png", full_page=True)

    # A project keeps the events of its slices: not those of the other project, of deleted slices, or of none.
    filters.get_by_label("GPR").fill("")
    filters.get_by_label("GPR").press("Enter")
    # "^": the Kind select's label holds its choices, project-created among them
    workspaces, project = rows.locator("td:nth-child(4)"), filters.get_by_label(re.compile("^Project"))
    expect(workspaces.filter(has_text="vision-team")).not_to_have_count(0)
    slices_of_every_event = set(workspaces.all_inner_texts())
    assert {"", "batch", "research", "urgent", "vision-team", "scratch"} <= slices_of_every_event
    project.select_option("vision")
    expect(rows.locator("td:nth-child(2)")).to_have_text(["server-started", "cancelled", "submitted", "slice-created"])
    expect(workspaces).to_have_text(["vision-team"] * 4)
    project.select_option("default")
    expect(workspaces.filter(has_text="urgent")).not_to_have_count(0)
    assert set(workspaces.all_inner_texts()) == {"batch", "research", "urgent"}
    project.select_option("")
    expect(workspaces.filter(has_text="vision-team")).to_have_count(4)
    expect(workspaces.filter(has_text=re.compile("^urgent$"))).not_to_have_count(0)


def dashboard_after(hub: Hub, admin: Page, artifacts: Path) -> None:
    open_page(admin, hub, "admin/", "Dashboard")
    expect(admin.locator("[data-figure='bound-now']")).to_have_text("100% (2 of 2 GPUs)")
    expect(admin.locator("[data-figure='queued']")).to_have_text("2")
    expect(admin.locator("[data-figure='pending']")).to_have_text("none")
    expect(admin.locator("[data-figure='used-now']")).to_have_text(re.compile(r"% mean over 2 GPU\(s\) with readings"))
    used_day = admin.locator("[data-figure='used-24h']")
    expect(used_day).to_have_text(
        re.compile(r"^\d+% mean over [\dhm]+ with readings \(prometheus; kept in memory since the service started\)")
    )
    expect(used_day.get_by_role("img")).to_have_attribute(
        "aria-label", re.compile(r"^Used utilisation: \d+ points from .* to .*, last \d+%$")
    )
    users = admin.get_by_role("table", name="Users by GPU-hours (rolling 7 days)")
    expect(users.locator("tbody td:first-child")).to_have_text(["dave"])
    admin.screenshot(path=artifacts / "admin-dashboard.png", full_page=True)


def carol_sees_her_workspace_only(hub: Hub, carol: Page, gprs: dict[str, int], artifacts: Path) -> None:
    sign_up(carol, hub.invite_link("carol"), "carol", CAROL_PASSWORD)
    carol.goto(f"{hub.url}/services/egs/admin/")
    log_in(carol, "carol", CAROL_PASSWORD)
    expect(carol.get_by_role("heading", name="403: Forbidden")).to_be_visible()
    expect(carol.get_by_text(re.compile("need the JupyterHub scope custom:egs:admin"))).to_be_visible()
    carol.screenshot(path=artifacts / "admin-refused.png", full_page=True)
    for path in ("admin/requests", "admin/slices", "admin/schedule"):
        assert carol.goto(f"{hub.url}/services/egs/{path}").status == 403

    open_page(carol, hub, "requests", "GPU requests")
    expect(carol.get_by_role("navigation", name="pages").get_by_role("link")).to_have_text(
        ["GPUs", "GPU requests", "AI workloads", "Endpoints", "Workspaces"]
    )
    rows = carol.locator("#requests tbody tr[data-gpr]")
    expect(rows).to_have_count(1)
    expect(rows.locator("td").nth(1)).to_have_text("research")
    expect(carol.get_by_role("button", name=re.compile("^(Approve|Deny|Move|Set priority)"))).to_have_count(0)
    expect(carol.get_by_role("heading", name="Evictions")).to_have_count(0)
    expect(carol.get_by_role("button", name=f"Cancel GPR {gprs['carol']}")).to_be_visible()
    carol.screenshot(path=artifacts / "user-requests.png", full_page=True)

    open_page(carol, hub, "workloads", "AI workloads")
    expect(carol.get_by_label("Workspace")).to_have_text("allresearch")
    expect(carol.locator("#workloads")).not_to_contain_text("urgent")
    expect(carol.locator("#gpus tbody")).to_have_text("No GPUs to show.")


@pytest.mark.browser
def test_an_admin_runs_the_service_from_the_admin_pages(hub: Hub, new_page, artifacts: Path) -> None:
    admin, carol = Watched(new_page()), Watched(new_page())
    dashboard_before(hub, admin.page, artifacts)
    slices_page(hub, admin.page, artifacts)
    gprs = fill_the_queue(hub)
    requests_page(hub, admin.page, gprs, artifacts)
    erin = second_project(hub)
    schedule_page(hub, admin.page, gprs, erin, artifacts)
    workloads_page(hub, admin.page, artifacts)
    events_page(hub, admin.page, gprs, artifacts)
    dashboard_after(hub, admin.page, artifacts)
    carol_sees_her_workspace_only(hub, carol.page, gprs, artifacts)
    assert admin.errors == [] and carol.errors == []
