"""Node checklists through the live service (local cluster): an admin sets the cluster's checks; they
run before a GPR's nodes are bound and after they are returned, each GPR shows its checklist, a
failed entry check fails the GPR (its slice's bind_failure), a failed exit check quarantines the node
until an admin clears it or its checks pass again."""

from __future__ import annotations

import pytest

from egs_hub.client import EGSClient

from .hub import until_status, wait_for


@pytest.fixture
def checklist(admin):
    """Set the local cluster's checklist for a test; the default again after it, and no node quarantined."""

    def put(checks: list[dict]) -> dict:
        return admin.call("PUT", "clusters/local/checks", {"checks": checks}, expect=200)

    yield put
    assert admin.call("DELETE", "clusters/local/checks", expect=200)["default"] is True
    for node in admin.get("nodes?health=quarantined")["nodes"]:
        admin.post(f"nodes/{node['cluster']}/{node['name']}/clear", {"reason": "test over"}, expect=200)


def shell(script: str) -> list[str]:
    return ["sh", "-c", script]


def test_the_checklist_is_the_default_until_an_admin_sets_one(admin, checklist, user):
    _, someone = user()
    answer = someone.get("clusters/local/checks", expect=200)
    assert answer["default"] is True and answer["checks"] == [
        {
            "name": "gpu-health",
            "kind": "gpu-health",
            "at": ["entry", "exit"],
            "timeout": 300,
            "thresholds": {},
            "command": None,
            "image": None,
        }
    ]
    assert set(answer["runs_here"]) == {"gpu-health", "nccl", "rdma", "custom"}

    mine = checklist([{"name": "smoke", "kind": "custom", "command": ["true"], "timeout": "30s"}])
    assert mine["default"] is False and [(c["name"], c["timeout"]) for c in mine["checks"]] == [("smoke", 30)]
    assert any(e["kind"] == "checks-set" for e in admin.get("events?limit=10")["events"])

    for body, status, field in [
        ({"checks": [{"name": "v", "kind": "pvc"}]}, 422, "checks.0.kind"),  # no volume claims on this host
        ({"checks": [{"name": "h", "kind": "gpu-health", "thresholds": {"hot": 1}}]}, 400, "checks.0.thresholds.hot"),
        ({"checks": [{"name": "c", "kind": "custom"}]}, 400, "checks.0.command"),
        ({"checks": "gpu-health"}, 400, "checks"),
    ]:
        assert admin.call("PUT", "clusters/local/checks", body, expect=status)["field"] == field, body
    assert admin.get("clusters/local/checks")["checks"][0]["name"] == "smoke"  # nothing changed
    someone.call("PUT", "clusters/local/checks", {"checks": []}, expect=403)
    admin.call("PUT", "clusters/nowhere/checks", {"checks": []}, expect=404)


def test_a_failed_entry_check_fails_the_gpr_and_says_why(admin, checklist, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,), policy={"bind_failure": "fail"})["name"]
    checklist(
        [
            {
                "name": "env",
                "kind": "custom",
                "command": shell('echo "node=$EGS_NODE phase=$EGS_PHASE gpr=$EGS_GPR"; echo "{\\"gpus\\": $EGS_GPUS}"'),
            },
            {"name": "burn-in", "kind": "custom", "command": shell("echo 'HBM test: 3 bad rows'; exit 3")},
        ]
    )
    gpr = as_alice.post("gprs", {"slice": team, "gpus": 2, "shape": "A100", "duration": "1h"}, expect=201)
    failed = until_status(as_alice, gpr["id"], "failed")
    assert "entry checks failed: node a100-a: burn-in: exit code 3" in failed["status_reason"]

    runs = as_alice.get(f"gprs/{gpr['id']}/checks", expect=200)["checks"]
    assert [(r["node"], r["name"], r["phase"], r["status"]) for r in runs] == [
        ("a100-a", "env", "entry", "passed"),
        ("a100-a", "burn-in", "entry", "failed"),
    ]
    assert f"node=a100-a phase=entry gpr={gpr['id']}" in runs[0]["log"] and runs[0]["values"] == {"gpus": 2}
    assert runs[1]["log"] == "exit code 3\nHBM test: 3 bad rows\n" and runs[1]["duration"] >= 0
    node = admin.get("nodes/local/a100-a", expect=200)
    ours = [(c["name"], c["status"]) for c in node["checks"] if c["name"] in ("env", "burn-in")]
    assert node["health"] == "healthy" and ours == [("burn-in", "failed"), ("env", "passed")]


def test_a_failed_exit_check_quarantines_the_node_until_it_is_cleared(admin, checklist, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    checklist(
        [
            {"name": "leftovers", "kind": "custom", "at": ["exit"], "command": shell("echo 'pid 4242 on GPU'; exit 1")},
            {"name": "slow", "kind": "custom", "at": ["exit"], "timeout": 1, "command": ["sleep", "30"]},
        ]
    )
    gpr = as_alice.post("gprs", {"slice": team, "gpus": 1, "shape": "A100", "duration": "1h"}, expect=201)
    until_status(as_alice, gpr["id"], "provisioned")
    assert as_alice.get(f"gprs/{gpr['id']}/checks")["checks"] == []  # nothing to check at entry
    as_alice.post(f"gprs/{gpr['id']}/release", expect=200)
    until_status(as_alice, gpr["id"], "complete")

    runs = as_alice.get(f"gprs/{gpr['id']}/checks")["checks"]
    assert [(r["name"], r["phase"], r["status"]) for r in runs] == [
        ("leftovers", "exit", "failed"),
        ("slow", "exit", "failed"),
    ]
    assert runs[1]["log"].startswith("did not finish within 1 s")
    node = admin.get("nodes/local/a100-a")
    assert node["health"] == "quarantined" and "leftovers: exit code 1" in node["quarantine_reason"]
    assert "node-quarantined" in [e["kind"] for e in as_alice.get(f"events?gpr={gpr['id']}")["events"]]
    refused = as_alice.post("gprs", {"slice": team, "gpus": 1, "shape": "A100", "duration": "1h"}, expect=422)
    assert "unhealthy or on quarantined nodes" in refused["message"]

    # An admin runs its checks: they are the entry checks, and the failing ones are exit checks, so none
    # runs, which clears it; quarantined again by hand and cleared, it is planned on again.
    assert admin.post("nodes/local/a100-a/checks", expect=202)["health"] == "quarantined"
    wait_for(lambda: admin.get("nodes/local/a100-a")["health"] == "healthy", 15, "its checks to clear it")
    admin.post("nodes/local/a100-a/quarantine", {"reason": "fan noise"}, expect=200)
    assert "fan noise" in admin.get("nodes/local/a100-a")["quarantine_reason"]
    admin.post("nodes/local/a100-a/quarantine", {"reason": "again"}, expect=409)
    as_alice.post("nodes/local/a100-a/clear", {}, expect=403)
    cleared = admin.post("nodes/local/a100-a/clear", {"reason": "fan replaced"}, expect=200)
    assert cleared["health"] == "healthy" and cleared["quarantine_reason"] is None
    admin.post("nodes/local/a100-a/clear", {}, expect=409)
    again = as_alice.post("gprs", {"slice": team, "gpus": 1, "shape": "A100", "duration": "1h"}, expect=201)
    until_status(as_alice, again["id"], "provisioned")
    assert "is held by GPR" in admin.post("nodes/local/a100-a/checks", expect=409)["message"]


def test_the_python_client_reads_and_acts_on_nodes_and_checks(hub, checklist, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    gpr = as_alice.post("gprs", {"slice": team, "gpus": 1, "shape": "A100", "duration": "1h"}, expect=201)
    until_status(as_alice, gpr["id"], "provisioned")
    with EGSClient(hub.api, hub.admin_token) as egs:
        assert egs.cluster_checks("local").default is True
        mine = egs.set_cluster_checks("local", [{"name": "ok", "kind": "custom", "command": ["true"], "at": ["exit"]}])
        assert [(c.name, c.at) for c in mine.checks] == [("ok", ("exit",))]
        runs = egs.gpr_checks(gpr["id"])
        assert [(r.name, r.status) for r in runs] == [("gpu-health", "skipped")]  # the hub has no GPU metrics
        assert "no metric source" in runs[0].log and runs[0].finished_at >= runs[0].started_at
        assert {n.name for n in egs.nodes(cluster="local")} == {"h100-a", "h100-b", "a100-a"}
        quarantined = egs.quarantine_node("local", "h100-b", "bad fan")
        assert quarantined.health == "quarantined" and [n.name for n in egs.nodes(health="quarantined")] == ["h100-b"]
        assert egs.clear_node("local", "h100-b", "fan replaced").health == "healthy"
        assert egs.check_node("local", "h100-b").name == "h100-b"
        assert egs.node("local", "a100-a").held_by == (gpr["id"],)


def test_nodes_list_their_health_and_holders(admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    gpr = as_alice.post("gprs", {"slice": team, "gpus": 8, "shape": "H100", "duration": "1h"}, expect=201)
    held = until_status(as_alice, gpr["id"], "provisioned")
    nodes = {n["name"]: n for n in admin.get("nodes?cluster=local", expect=200)["nodes"]}
    assert set(nodes) == {"h100-a", "h100-b", "a100-a"}
    (holder,) = held["bound_nodes"]
    assert nodes[holder]["held_by"] == [gpr["id"]] and nodes[holder]["shape"] == "H100-80GB x8"
    assert len(nodes[holder]["gpus"]) == 8 and all(g["healthy"] for g in nodes[holder]["gpus"])
    assert admin.get("nodes?cluster=nowhere")["nodes"] == []
    (mine,) = as_alice.get("nodes", expect=200)["nodes"]  # a member sees the nodes her slices hold
    assert (mine["name"], mine["held_by"]) == (holder, [gpr["id"]])
    _, bob = user("bob")
    assert bob.get("nodes", expect=200)["nodes"] == [] and bob.get(f"nodes/local/{holder}", expect=403)
    assert admin.get("nodes?health=sick", expect=400)["field"] == "health"
    admin.get("nodes/local/no-such-node", expect=404)
