"""The Clusters page and kubeconfig downloads in a browser, with the Kubernetes API emulator as the cluster.

One hub and one emulated cluster, "east" (two 8-GPU nodes), whose API emulator runs on an event
loop in a thread (tests/service/test_clusters.py); the hub reaches it through a kubeconfig file.
The tests share the hub and run in order (the later ones use the cluster the first registers).

1. On the Clusters page the admin registers east (health ok, its nodes, GPUs and shape) and a
   cluster whose API server does not answer (unavailable, with the reason), then removes that one.
   While a GPR holds a node of east, removing east is refused with the service's reason.
2. On the Slices page the admin creates workspace "team" (member alice) with a namespace on east and
   downloads its kubeconfig valid for one hour (the emulator issued its token for that long); alice
   downloads hers from her portal's workspace card. Each file loads with
   kubernetes_asyncio's config loader and lists the pods of team's namespace on the emulator.
3. On the Clusters page the admin adds a node pool to east (refused first, naming why), sees it, deletes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client, config
from playwright.sync_api import Page, expect

from ..k8s.builders import gpu_node, pod
from ..k8s.kubeconfig import write_kubeconfig
from ..service.hub import Hub, sqlite_hub, until_status
from ..service.test_clusters import CONTEXT, EmulatorThread, closed_port
from .test_admin_pages import Watched, open_page
from .test_walkthrough_browser import ADMIN_PASSWORD, log_in, sign_up

ALICE_PASSWORD = "alice-downloads-a-kubeconfig"
NAMESPACE = "team-east"


@pytest.fixture(scope="module")
def emulators() -> Iterator[EmulatorThread]:
    with EmulatorThread() as running:
        yield running


@pytest.fixture(scope="module")
def world(tmp_path_factory, emulators) -> Iterator[dict]:
    directory = tmp_path_factory.mktemp("clusters-page")
    emulator, kube, path = emulators.cluster(directory, "east", gpu_node("gpu-e1"), gpu_node("gpu-e2"))
    gone = write_kubeconfig(directory / "gone.kubeconfig", f"http://127.0.0.1:{closed_port()}", "t", CONTEXT)
    with sqlite_hub(directory) as hub:
        yield {"hub": hub, "emulator": emulator, "kube": kube, "east": path, "gone": str(gone), "dir": directory}


def cluster_row(page: Page, name: str):
    return page.locator(f"#clusters tbody tr[data-cluster='{name}']")


def register(page: Page, name: str, kubeconfig: str) -> None:
    form = page.get_by_role("region", name="Register a Kubernetes cluster")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Kubeconfig path").fill(kubeconfig)
    form.get_by_label("Context").fill(CONTEXT)
    form.get_by_label("Context").press("Enter")


def pods_seen_with(kubeconfig: str, namespace: str):
    """The pod names the kubeconfig's own credentials may list in ``namespace`` (run on the emulators' loop)."""

    async def listed() -> list[str]:
        configuration = client.Configuration()
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            pods = await client.CoreV1Api(api).list_namespaced_pod(namespace)
        return [p.metadata.name for p in pods.items]

    return listed()


def download_kubeconfig(page: Page, who: str, slice_name: str, cluster: str, into: Path) -> Path:
    """Click the workspace's download button; the saved file (its name as the browser offers it is checked)."""
    with page.expect_download() as started:
        page.get_by_role("button", name=f"Download kubeconfig of {slice_name} for {cluster}").click()
        # Inside the block: when the service refuses, this fails showing its reason (the notice).
        expect(page.get_by_role("status")).to_have_text(
            re.compile(rf"^Saved {slice_name}-{cluster}\.kubeconfig \(namespace {NAMESPACE}\); its token expires .+\.$")
        )
    download = started.value
    assert download.suggested_filename == f"{slice_name}-{cluster}.kubeconfig"
    saved = into / f"{who}-{download.suggested_filename}"
    download.save_as(saved)
    return saved


@pytest.mark.browser
def test_an_admin_registers_and_removes_clusters_on_the_clusters_page(world, emulators, new_page, artifacts):
    hub: Hub = world["hub"]
    watched = Watched(new_page())
    admin = watched.page
    admin.goto(hub.url + "/")
    log_in(admin, "admin", ADMIN_PASSWORD)
    expect(admin).not_to_have_url(re.compile(r"/hub/login"))
    open_page(admin, hub, "admin/clusters", "Clusters")
    expect(admin.get_by_role("navigation", name="pages").get_by_role("link", name="Clusters")).to_have_attribute(
        "aria-current", "page"
    )
    local = cluster_row(admin, "local")
    expect(local.locator("td").nth(4)).to_have_text("ok")
    expect(local.locator("td").last).to_have_text("this host: not removable")
    notice = admin.get_by_role("status")

    register(admin, "east", world["east"])
    expect(notice).to_have_text("Cluster east registered: 2 node(s), 16 GPU(s)")
    east = cluster_row(admin, "east")
    expect(east.locator("td")).to_have_text(
        [
            *("kubernetes", "api", "default", re.compile(r"\S"), "ok", "2", "16"),
            *("H100-80GB x8: 16 of 16 GPUs free", "Remove"),
        ]
    )

    register(admin, "north", world["gone"])
    expect(notice).to_have_text(re.compile(r"^Cluster north registered, but it is unavailable: .*cannot list nodes"))
    north = cluster_row(admin, "north")
    expect(north).to_have_class("unavailable")
    expect(north.locator("td").nth(4)).to_have_text(re.compile(r"^unavailable.*cannot list nodes"))
    expect(north.locator("td").nth(5)).to_have_text("0")
    admin.screenshot(path=artifacts / "admin-clusters.png", full_page=True)

    # A cluster moves to a project: only that project's workspaces are planned there from then on.
    hub.admin().post("projects", {"name": "weather"}, expect=201)
    north.get_by_label("Project of cluster north").select_option("weather")
    expect(notice).to_have_text("Cluster north is project weather's")
    assert hub.admin().get("projects/weather")["clusters"] == ["north"]

    admin.once("dialog", lambda dialog: dialog.accept())
    north.get_by_role("button", name="Remove cluster north").focus()
    admin.keyboard.press("Enter")
    expect(notice).to_have_text("Cluster north removed")
    expect(north).to_have_count(0)
    assert hub.admin().get("projects/weather")["clusters"] == []  # a removed cluster holds no project up

    api = hub.admin()
    api.post("slices", {"name": "holders", "policy": {"max_active_gprs": 5}}, expect=201)
    held = api.post("gprs", {"slice": "holders", "gpus": 1, "duration": "1h", "cluster": "east"}, expect=201)
    until_status(api, held["id"], "provisioned")
    admin.once("dialog", lambda dialog: dialog.accept())
    east.get_by_role("button", name="Remove cluster east").click()
    expect(notice).to_have_text(re.compile(r"^Cluster east was not removed: .+"))
    expect(notice).to_have_class("error")
    expect(east).to_have_count(1)
    api.post(f"gprs/{held['id']}/release", {}, expect=200)
    until_status(api, held["id"], "complete", timeout=20)
    assert watched.errors == []


@pytest.mark.browser
def test_the_admin_and_a_member_download_the_kubeconfig_of_a_workspace(world, emulators, new_page, artifacts):
    hub: Hub = world["hub"]
    admin_watched, alice_watched = Watched(new_page()), Watched(new_page())
    admin, alice = admin_watched.page, alice_watched.page
    admin.goto(hub.url + "/")
    log_in(admin, "admin", ADMIN_PASSWORD)
    expect(admin).not_to_have_url(re.compile(r"/hub/login"))
    open_page(admin, hub, "admin/slices", "Slices")
    editor = admin.get_by_role("region", name="Create a workspace")
    editor.get_by_label("Name", exact=True).fill("team")
    editor.get_by_label("Members").fill("alice")
    editor.get_by_label("Namespaces per cluster").fill(f"east: {NAMESPACE}")
    editor.get_by_role("button", name="Create workspace").click()
    expect(admin.get_by_role("status")).to_have_text("Workspace team created")
    card = admin.locator("[data-slice='team']")
    expect(card.get_by_role("list", name="Kubeconfigs of team").get_by_role("listitem")).to_have_count(1)
    card.get_by_label("Kubeconfig of team on east valid for").select_option(label="1 hour")
    admin_file = download_kubeconfig(admin, "admin", "team", "east", world["dir"])
    expect(card.locator("[data-kubeconfig='team/east']")).to_contain_text(
        re.compile(rf"last one: namespace {NAMESPACE}, expires ")
    )
    admin.screenshot(path=artifacts / "admin-slices-kubeconfig.png", full_page=True)
    # The token is the one the emulator issued for the chosen hour.
    token = yaml.safe_load(admin_file.read_text())["users"][0]["user"]["token"]
    lifetime = world["emulator"].issued[token].expires - datetime.now(UTC)
    assert timedelta(minutes=58) < lifetime <= timedelta(hours=1)
    emulators.run(world["kube"].add_pod(NAMESPACE, pod("trainer")))
    assert emulators.run(pods_seen_with(str(admin_file), NAMESPACE)) == ["trainer"]

    sign_up(alice, hub.invite_link("alice"), "alice", ALICE_PASSWORD)
    alice.goto(f"{hub.url}/services/egs/")
    log_in(alice, "alice", ALICE_PASSWORD)
    expect(alice.locator("#updated")).to_contain_text("Updated")
    alice_file = download_kubeconfig(alice, "alice", "team", "east", world["dir"])
    alice.screenshot(path=artifacts / "portal-kubeconfig.png", full_page=True)
    assert emulators.run(pods_seen_with(str(alice_file), NAMESPACE)) == ["trainer"]
    assert admin_watched.errors == [] and alice_watched.errors == []


def add_pool(page: Page, cluster: str, min_nodes: str, max_nodes: str) -> None:
    form = page.get_by_role("form", name="Add a node pool")
    form.get_by_label("Cluster").select_option(cluster)
    form.get_by_label("Pool name").fill("burst")
    form.get_by_label("Shape").fill("H100-80GB x8")
    form.get_by_label("Min nodes").fill(min_nodes)
    form.get_by_label("Max nodes").fill(max_nodes)
    form.get_by_role("button", name="Add pool").click()


@pytest.mark.browser
def test_an_admin_adds_and_deletes_a_node_pool_on_the_clusters_page(world, emulators, new_page, artifacts):
    """3. On the Clusters page the admin adds a node pool to east: refused with min above max (naming the
    field) and on this host (no autoscaler); added on east, it shows its size, delays and that nothing
    was asked yet; deleted, it is gone."""
    hub: Hub = world["hub"]
    watched = Watched(new_page())
    admin = watched.page
    admin.goto(hub.url + "/")
    log_in(admin, "admin", ADMIN_PASSWORD)
    expect(admin).not_to_have_url(re.compile(r"/hub/login"))
    open_page(admin, hub, "admin/clusters", "Clusters")
    notice = admin.get_by_role("status")
    rows = admin.locator("#pools tbody tr")
    expect(rows).to_have_text(["No node pools."])

    add_pool(admin, "east", "3", "2")
    expect(notice).to_have_text("Pool burst was not added: min_nodes (3) must not exceed max_nodes (2) (min_nodes)")
    expect(notice).to_have_class("error")
    add_pool(admin, "local", "0", "2")
    expect(notice).to_have_text(re.compile(r"^Pool burst was not added: cluster 'local' \(local\) has no autoscaler"))

    add_pool(admin, "east", "0", "2")
    expect(notice).to_have_text("Pool burst added to east: up to 2 node(s) of H100-80GB x8")
    pool = admin.locator("#pools tbody tr[data-pool='east/burst']")
    expect(pool.locator("th, td")).to_have_text(
        ["burst", "east", "H100-80GB x8", "0 (min 0, max 2)", "0", "10m", "30m", "never", "Delete"]
    )
    assert [p["name"] for p in hub.admin().get("clusters/east/pools")["pools"]] == ["burst"]
    admin.screenshot(path=artifacts / "admin-clusters-pools.png", full_page=True)

    admin.once("dialog", lambda dialog: dialog.accept())
    pool.get_by_role("button", name="Delete pool burst").click()
    expect(notice).to_have_text("Pool burst deleted")
    expect(rows).to_have_text(["No node pools."])
    assert watched.errors == []
