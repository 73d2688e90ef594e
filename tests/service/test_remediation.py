"""A GPU failing in a provisioned GPR, end to end: a real Prometheus scrapes the recorded DCGM-exporter
exposition, the test makes a held GPU report XID 79 (fallen off the bus); the service quarantines its
node, tells the GPR's holders, and (the slice's default ``remediation: replace``) moves the GPR's GPUs
to the spare node of the same shape for the rest of its window."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from ..conftest import DATABASES, new_db_url
from ..metrics.prometheus_server import ExpositionServer
from .hub import Hub, dcgm_hub, until_status, wait_for
from .test_gpu_metrics import with_reading


@pytest.fixture(scope="module", params=DATABASES)
def spare_hub(request, tmp_path_factory, postgres) -> Iterator[tuple[Hub, ExpositionServer]]:
    data_dir = tmp_path_factory.mktemp(f"remediation-hub-{request.param}")
    with dcgm_hub(data_dir, new_db_url(request.param, data_dir, postgres), "inventory_dcgm_spare.yaml") as running:
        yield running.hub, running.exporter


def xid_of(client, uuid: str) -> int | None:
    return {g["uuid"]: g["sample"] for g in client.get("gpus")["gpus"]}[uuid]["xid"]


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def test_a_failed_gpu_quarantines_its_node_and_the_gpr_moves_to_a_healthy_one(spare_hub):
    hub, exporter = spare_hub
    admin = hub.admin()
    carol = hub.client(hub.user_token("carol"))
    admin.post("slices", {"name": "fix", "members": ["carol"], "policy": {"max_active_gprs": 3}}, expect=201)
    assert admin.get("slices/fix")["policy"]["remediation"] == "replace"

    # The GPR lands on the exposition's node: the spare one is under maintenance for the next hour.
    now = datetime.now(UTC)
    window = {"start": iso(now - timedelta(minutes=1)), "end": iso(now + timedelta(hours=1)), "reason": "spare"}
    admin.post("nodes/local/gpu-node-2/maintenance", window, expect=201)
    gpr = carol.post("gprs", {"slice": "fix", "gpus": 2, "duration": "30m"}, expect=201)
    held = until_status(carol, gpr["id"], "provisioned")
    assert held["bound_nodes"] == ["gpu-node-1"]
    admin.call("DELETE", "nodes/local/gpu-node-2/maintenance", expect=204)

    # One of its GPUs falls off the bus.
    failing = held["bound_gpus"][0]
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_XID_ERRORS", failing, 79)
    moved = wait_for(
        lambda: (g := carol.get(f"gprs/{gpr['id']}"))["bound_nodes"] == ["gpu-node-2"] and g, 40, "the GPR to move"
    )
    assert moved["status"] == "provisioned" and moved["window_end"] == held["window_end"]
    (replacement,) = moved["replaced"]
    assert (replacement["failed_node"], replacement["node"]) == ("gpu-node-1", "gpu-node-2")
    assert len(moved["bound_gpus"]) == 2 and not set(moved["bound_gpus"]) & set(held["bound_gpus"])

    events = {e["kind"]: e for e in carol.get(f"events?gpr={gpr['id']}")["events"]}
    assert f"GPU {failing}: XID 79 (fallen off the bus)" in events["gpu-failed"]["reason"]
    replaced = events["node-replaced"]["reason"]
    assert replaced.startswith("node gpu-node-1 was replaced by gpu-node-2 at ") and "checkpoint" in replaced
    quarantined = [e for e in admin.get("events?limit=50")["events"] if e["kind"] == "node-quarantined"]
    assert quarantined[0]["actor"] == "remediation" and quarantined[0]["gpr"] == gpr["id"]
    node = admin.get("nodes/local/gpu-node-1")
    assert node["health"] == "quarantined" and "XID 79" in node["quarantine_reason"] and node["held_by"] == []
    entry = [r for r in carol.get(f"gprs/{gpr['id']}/checks")["checks"] if r["node"] == "gpu-node-2"]
    assert [(r["name"], r["phase"]) for r in entry] == [("gpu-health", "entry")]  # the new node was checked

    # A slice whose policy says notify keeps its node when a GPU fails there: its holders are told.
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_XID_ERRORS", failing, 0)
    wait_for(lambda: xid_of(admin, failing) == 0, 20, "the GPU to report no XID")  # else its entry check fails
    admin.post("nodes/local/gpu-node-1/clear", {"reason": "GPU reseated"}, expect=200)
    admin.post("slices", {"name": "note", "members": ["carol"], "policy": {"remediation": "notify"}}, expect=201)
    kept = until_status(carol, carol.post("gprs", {"slice": "note", "gpus": 2, "duration": "30m"})["id"], "provisioned")
    assert kept["bound_nodes"] == ["gpu-node-1"]  # the spare node is carol's other GPR's
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_XID_ERRORS", kept["bound_gpus"][1], 95)
    told = wait_for(
        lambda: [e for e in carol.get(f"events?gpr={kept['id']}")["events"] if e["kind"] == "gpu-failed"], 40, "told"
    )
    assert "XID 95 (uncontained ECC error)" in told[0]["reason"] and "save your work" in told[0]["reason"]
    assert carol.get(f"gprs/{kept['id']}")["bound_nodes"] == ["gpu-node-1"]
    assert admin.get("nodes/local/gpu-node-1")["health"] == "quarantined"
    for gpr_id in (gpr["id"], kept["id"]):
        carol.post(f"gprs/{gpr_id}/release", expect=200)
        until_status(carol, gpr_id, "complete")
