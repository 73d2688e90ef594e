"""Re-partitioning a node's GPUs end to end (issue 23): a real JupyterHub and proxy, a declared inventory.

An admin splits a free whole-GPU H100 node into 1g.10gb instances through the API: the node is out of
service for the configured time (a maintenance window on each of its planning nodes), a member asking for
instances meanwhile is told they start when it is back, and gets them then; the node's layout, its change
and the events say what happened. A node that a GPR holds, a layout that does not fit its GPUs, a
time-sliced node and a second change while one runs are refused, each saying why, and change nothing; a
restarted service keeps the new layout.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from egs_hub.store import queries
from egs_hub.store.db import make_engine, make_sessions

from .hub import sqlite_hub, wait_for

MIG_SHAPE = "H100-80GB 1g.10gb"
SECONDS = 4  # hub_repartition_config.py


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with sqlite_hub(
        tmp_path_factory.mktemp("hub-repartition"),
        inventory="inventory_sharing.yaml",
        config="hub_repartition_config.py",
    ) as running:
        yield running


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def node_names(admin, host: str) -> set[str]:
    nodes = admin.get("nodes", params={"cluster": "local"})["nodes"]
    return {n["name"] for n in nodes if n["name"].split(":")[0] == host and n["present"]}


def test_an_admin_splits_a_free_node_and_its_instances_are_planned_after_it(hub):
    admin = hub.admin()
    layout = admin.get("nodes/local/h100-a/layout", expect=200)
    assert (layout["mig"], layout["layout"], layout["changes"]) == (None, "whole GPUs", [])

    change = admin.post(
        "nodes/local/h100-a/layout", {"mig": {"1g.10gb": 7}, "reason": "notebooks need small GPUs"}, expect=202
    )
    assert change["state"] == "pending" and change["layout"] == "7 x 1g.10gb per GPU"
    assert change["mig_config"] is None  # a declared node has no mig-parted config
    ready_by = parse(change["ready_by"])
    assert (ready_by - parse(change["created_at"])).total_seconds() == pytest.approx(SECONDS)
    # The declared node is split at once, and out of service until ready_by.
    assert node_names(admin, "h100-a") == {"h100-a:1g.10gb"}
    split = admin.get("nodes/local/h100-a:1g.10gb", expect=200)
    assert len(split["gpus"]) == 56 and all(g["uuid"].startswith("MIG-") for g in split["gpus"])
    assert [parse(m["end"]) for m in split["maintenance"]] == [ready_by]

    alice = "alice-split"
    as_alice = hub.client(hub.user_token(alice))
    team = admin.post("slices", {"name": "split-team", "members": [alice]}, expect=201)
    asked = {"slice": team["name"], "gpus": 20, "duration": "20s", "shape": MIG_SHAPE}  # only h100-a has 20
    gpr = as_alice.post("gprs", asked, expect=201)
    if parse(gpr["estimated_start"]) < ready_by:
        raise AssertionError(f"GPR estimated to start at {gpr['estimated_start']}, before the node is back")

    done = wait_for(
        lambda: (c := admin.get("nodes/local/h100-a/layout")["changes"][0])["state"] != "pending" and c,
        30,
        "the change to finish",
    )
    assert done["state"] == "done" and parse(done["finished_at"]) >= ready_by
    gpr = wait_for(lambda: (g := as_alice.get(f"gprs/{gpr['id']}"))["status"] == "provisioned" and g, 30, "provisioned")
    assert gpr["bound_nodes"] == ["h100-a:1g.10gb"] and parse(gpr["window_start"]) >= ready_by
    layout = admin.get("nodes/local/h100-a:1g.10gb/layout", expect=200)
    assert (layout["node"], layout["mig"], layout["changes"][0]["id"]) == ("h100-a", {"1g.10gb": 7}, change["id"])
    events = admin.get("events", params={"limit": 500})["events"]
    kinds = [e["kind"] for e in events if e["data"].get("node") == "h100-a"]
    assert "layout-change-started" in kinds and "layout-change-done" in kinds
    # What a restarted service gives the declared inventory again (service/app.py).
    engine = make_engine(hub.db_url)
    with make_sessions(engine)() as session:
        assert queries.declared_layouts(session, "local") == {"h100-a": {"1g.10gb": 7}}
    engine.dispose()

    # Held: its layout cannot change, and nothing changed.
    held = admin.post("nodes/local/h100-a/layout", {"mig": None}, expect=409)
    assert f"held by GPR(s) {gpr['id']}" in held["message"]
    assert node_names(admin, "h100-a") == {"h100-a:1g.10gb"}
    as_alice.post(f"gprs/{gpr['id']}/release", {"reason": "done"}, expect=200)


def test_changes_that_cannot_be_made_are_refused_and_change_nothing(hub):
    admin = hub.admin()
    before = admin.get("nodes/local/mig-a/layout", expect=200)
    too_big = admin.post("nodes/local/mig-a/layout", {"mig": {"3g.40gb": 3}}, expect=422)
    assert "compute slices" in too_big["message"]
    same = admin.post("nodes/local/mig-a/layout", {"mig": {"1g.10gb": 7}}, expect=409)
    assert "in that layout already" in same["message"]
    shared = admin.post("nodes/local/shared-a/layout", {"mig": {"1g.10gb": 7}}, expect=409)
    assert "time-sliced" in shared["message"]
    admin.post("nodes/local/mig-a/layout", {"mig": {}}, expect=400)
    admin.post("nodes/local/mig-a/layout", {"mig": {"9g.10gb": 1}}, expect=400)
    admin.post("nodes/local/mig-a/layout", {"mig": {"1g.10gb": 8}}, expect=400)
    admin.post("nodes/local/nowhere/layout", {"mig": None}, expect=404)
    assert admin.get("nodes/local/mig-a/layout", expect=200) == before

    member = hub.client(hub.user_token("bob-split"))
    member.post("nodes/local/mig-a/layout", {"mig": None}, expect=403)

    # One change at a time: a second one while the first runs is refused.
    admin.post("nodes/local/mig-a/layout", {"mig": {"3g.40gb": 2}}, expect=202)
    again = admin.post("nodes/local/mig-a/layout", {"mig": None}, expect=409)
    assert "being re-partitioned already" in again["message"]
    assert node_names(admin, "mig-a") == {"mig-a:3g.40gb"}
