"""GPU metrics end to end: a real Prometheus scrapes a recorded DCGM-exporter exposition that the
test changes, a real egs-hub (hub, proxy, service) reads it as its metric source, and users see
what they may through the API: GPUs and their readings, time series, the used utilisation of the
last day, workloads, alerts, the idle release of a GPR, and the Prometheus scrape of the service
itself.

The hub's declared inventory (inventory_dcgm.yaml) is the recorded exposition's node and UUIDs.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests

from egs_hub.client import EGSClient
from egs_hub.core.units import format_time

from ..conftest import DATABASES, new_db_url
from ..metrics.prometheus_server import ExpositionServer
from .hub import Hub, dcgm_hub, until_status, wait_for

FIVE = timedelta(minutes=5)
BUSY, IDLE = "GPU-3f6e2a1c-8b7d-4e55-a0c2-9d1b7e4f6a10", "GPU-b81c4d92-07ae-4f3b-9e61-52c8d0a7e3f4"


def with_reading(text: str, metric: str, uuid: str, value: float) -> str:
    """The exposition with ``metric`` of GPU ``uuid`` set to ``value``."""
    pattern = re.compile(rf'^({metric}{{[^}}]*UUID="{uuid}"[^}}]*}}) \S+$', re.MULTILINE)
    changed, count = pattern.subn(rf"\g<1> {value}", text)
    assert count == 1, f"{metric} of {uuid} is not in the exposition"
    return changed


@pytest.fixture(scope="module", params=DATABASES)
def metrics_hub(request, tmp_path_factory, postgres) -> Iterator[tuple[Hub, ExpositionServer]]:
    data_dir = tmp_path_factory.mktemp(f"metrics-hub-{request.param}")
    with dcgm_hub(data_dir, new_db_url(request.param, data_dir, postgres)) as running:
        yield running.hub, running.exporter


def readings(client, sort: str = "node") -> dict[str, dict]:
    answer = client.get(f"gpus?sort={sort}", expect=200)
    assert answer["source"]["name"] == "prometheus"
    return {g["uuid"]: g for g in answer["gpus"]}


def test_gpus_workloads_alerts_idle_release_and_scrape(metrics_hub):
    hub, exporter = metrics_hub
    admin = hub.admin()
    alice = hub.client(hub.user_token("alice"))
    hub.user_token("mallory")
    mallory = hub.client(hub.user_token("mallory"))

    # Every GPU with the exporter's readings, for an admin; hottest first on request.
    gpus = wait_for(lambda: (g := readings(admin)) and all(x["sample"] for x in g.values()) and g, 40, "samples")
    assert gpus[BUSY]["sample"]["utilization"] == 97 and gpus[BUSY]["sample"]["pod"] == "jupyter-alice"
    assert gpus[IDLE]["sample"]["temperature_c"] == 29 and gpus[IDLE]["sample"]["processes"] is None
    assert list(readings(admin, "temperature")) == [BUSY, IDLE]
    assert admin.get("gpus?sort=hotness", expect=400)["field"] == "sort"
    assert readings(alice) == {}  # holds nothing yet

    # GPU 1's recorded XID 31 is an alert on a GPU nobody holds: admins see it, members don't.
    xid = wait_for(lambda: admin.get("alerts?active=true", expect=200)["alerts"], 20, "the XID alert")
    assert [(a["kind"], a["gpu"], a["slice"]) for a in xid] == [("xid", IDLE, None)]
    assert alice.get("alerts", expect=200)["alerts"] == []

    # alice's slice, with the recorded pod's namespace and a short idle timeout, gets the busy GPU.
    admin.post(
        "slices",
        {
            "name": "ml",
            "members": ["alice"],
            "namespaces": {"local": ["egs-ml-team"]},
            "policy": {"idle_timeout": "6s", "max_idle_timeout": "1h"},
        },
        expect=201,
    )
    assert (
        alice.post("gprs", {"slice": "ml", "gpus": 1, "duration": "1h", "idle_timeout": "2h"}, expect=422)["field"]
        == "idle_timeout"
    )
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_GPU_UTIL", IDLE, 88)  # both busy: no idle release yet
    gpr = alice.post("gprs", {"slice": "ml", "gpus": 1, "duration": "1h"}, expect=201)
    gpr = until_status(alice, gpr["id"], "provisioned")
    (held,) = gpr["bound_gpus"]
    mine = wait_for(lambda: readings(alice), 10, "alice to see her GPU")
    assert list(mine) == [held] and mine[held]["slice"] == "ml" and mine[held]["gpr"] == gpr["id"]
    assert mallory.get(f"gpus/{held}/metrics", expect=404)["status"] == 404

    # Her GPU's time series, and her slice's workload: the recorded pod in its namespace.
    series = wait_for(lambda: alice.get(f"gpus/{held}/metrics?step=1", expect=200)["points"], 10, "points")
    assert all(p["utilization"] in (97, 88) for p in series)
    assert alice.get(f"gpus/{held}/metrics?step=2h", expect=400)["field"] == "step"
    (pod,) = alice.get("workloads?slice=ml", expect=200)["workloads"]
    assert (pod["kind"], pod["name"], pod["gpus"]) == ("pod", "egs-ml-team/jupyter-alice", [BUSY])
    assert pod["hottest_gpu"] == {"uuid": BUSY, "node": "gpu-node-1", "temperature_c": 57}
    assert mallory.get("workloads?slice=ml", expect=404)["message"] == "no slice named 'ml'"

    # A hot GPU she holds is her alert too.
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_GPU_TEMP", held, 93)
    hot = wait_for(lambda: alice.get("alerts?slice=ml&active=true", expect=200)["alerts"], 20, "the alert")
    assert [(a["kind"], a["gpu"], a["gpr"], a["value"]) for a in hot] == [("temperature", held, gpr["id"], 93)]

    # Idle: warned at once (6 s is less than the 10-minute warning), released after 6 s idle.
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_GPU_UTIL", held, 0)
    done = until_status(alice, gpr["id"], "complete", timeout=40)
    assert done["end_reason"] == "idle-released"
    kinds = [e["kind"] for e in admin.get(f"events?gpr={gpr['id']}", expect=200)["events"]]
    assert kinds[-4:] == ["idle-warning", "idle-released", "node-quarantined", "complete"]

    # Its node passed the default checklist's gpu-health at entry; at exit its GPU was still hot, so the
    # node is quarantined: nothing is planned on it until its checks pass again.
    runs = alice.get(f"gprs/{gpr['id']}/checks", expect=200)["checks"]
    assert [(r["node"], r["name"], r["phase"], r["status"]) for r in runs] == [
        ("gpu-node-1", "gpu-health", "entry", "passed"),
        ("gpu-node-1", "gpu-health", "exit", "failed"),
    ]
    assert runs[0]["values"]["gpus_read"] == 1 and runs[0]["duration"] >= 0
    assert f"GPU {held} is at 93 C" in runs[1]["log"] and runs[1]["values"]["temperature_c_max"] == 93
    assert mallory.get(f"gprs/{gpr['id']}/checks", expect=404)["message"] == f"no GPR with id {gpr['id']}"
    node = admin.get("nodes/local/gpu-node-1", expect=200)
    assert node["health"] == "quarantined" and f"exit checks after GPR {gpr['id']} failed" in node["quarantine_reason"]
    assert [(c["phase"], c["status"]) for c in node["checks"]] == [("entry", "passed"), ("exit", "failed")]
    assert [n["name"] for n in admin.get("nodes?health=quarantined", expect=200)["nodes"]] == ["gpu-node-1"]
    assert alice.get("nodes", expect=200)["nodes"] == []  # her slices hold none now
    refused = alice.post("gprs", {"slice": "ml", "gpus": 1, "duration": "1h"}, expect=422)
    assert "2 of their GPUs are unhealthy or on quarantined nodes" in refused["message"]

    # Cooled down, the node passes its checks again when an admin asks, which clears it.
    exporter.text = with_reading(exporter.text, "DCGM_FI_DEV_GPU_TEMP", held, 40)
    wait_for(lambda: readings(admin)[held]["sample"]["temperature_c"] == 40, 20, "the GPU to cool down")
    assert admin.post("nodes/local/gpu-node-1/checks", expect=202)["checks"][0]["status"] in ("pending", "running")
    wait_for(lambda: admin.get("nodes/local/gpu-node-1")["health"] == "healthy", 20, "the node to be cleared")
    cleared = admin.get("events?limit=5", expect=200)["events"]
    assert any(e["kind"] == "node-cleared" and "its checks passed" in e["reason"] for e in cleared)

    # Prometheus can scrape the service, with an admin's token only.
    metrics_url = f"{hub.url}/services/egs/metrics"
    assert requests.get(metrics_url, timeout=10).status_code == 401
    scraped = requests.get(metrics_url, headers={"Authorization": f"Bearer {hub.admin_token}"}, timeout=10)
    assert scraped.status_code == 200 and scraped.headers["Content-Type"].startswith("text/plain")
    assert f'egs_gpu_temperature_celsius{{cluster="local",gpr="",node="gpu-node-1",slice="",uuid="{held}"}} 40.0' in (
        scraped.text
    )
    assert 'egs_gprs_finished_total{slice="ml",status="complete"} 1.0' in scraped.text
    assert "egs_gpr_wait_seconds_count 1.0" in scraped.text


def test_used_utilization_of_the_last_day_per_step(metrics_hub):
    hub, _ = metrics_hub
    admin = hub.admin()
    ursula = hub.client(hub.user_token("ursula"))

    # Admins: every GPU. The default is the last day (rounded down to 5 minutes) in 5-minute steps, up to now.
    used = wait_for(lambda: (u := admin.get("gpus/utilization", expect=200))["points"][-1]["gpus"] == 2 and u, 20, "2")
    assert used["source"]["name"] == "prometheus" and used["step"] == 300
    since = datetime.fromisoformat(used["since"])
    # (the 5 minutes since rounds down to may have ended between the answer and now: a second's margin)
    assert since.minute % 5 == 0 and since.second == 0
    assert datetime.now(UTC) - since <= timedelta(hours=24, minutes=5, seconds=1)
    assert [p["time"] for p in used["points"]] == [format_time(since + k * FIVE) for k in range(len(used["points"]))]
    assert used["points"][0] == {"time": used["since"], "utilization": None, "gpus": 0}  # before the service started

    # A point is the mean of the GPUs' readings in the step (sampled together: as many each), as their series say.
    def agrees() -> bool:
        last = admin.get("gpus/utilization?step=5m", expect=200)["points"][-1]
        means = [admin.get(f"gpus/{g}/metrics?since={last['time']}&step=300", expect=200) for g in (BUSY, IDLE)]
        if last["gpus"] != 2 or not all(m["points"] for m in means):
            return False  # a new 5 minutes began between the calls
        return last["utilization"] == pytest.approx(sum(m["points"][0]["utilization"] for m in means) / 2)

    wait_for(agrees, 10, "the day's point to agree with the GPUs' series")
    with EGSClient(hub.api, hub.admin_token) as egs:  # the Python client's typed answer
        ten = egs.gpu_utilization(since=used["points"][-1]["time"], step=timedelta(minutes=10))
    assert ten.step == timedelta(minutes=10) and ten.since == datetime.fromisoformat(used["points"][-1]["time"])
    assert len(ten.points) == 1 and ten.points[0].gpus == 2 and 0 <= ten.points[0].utilization <= 100

    # Members: the GPUs their slices hold now, as /gpus shows them.
    admin.post("slices", {"name": "used", "members": ["ursula"]}, expect=201)
    assert {p["gpus"] for p in ursula.get("gpus/utilization", expect=200)["points"]} == {0}
    gpr = until_status(
        ursula, ursula.post("gprs", {"slice": "used", "gpus": 1, "duration": "1h"}, expect=201)["id"], "provisioned"
    )
    wait_for(lambda: ursula.get("gpus/utilization", expect=200)["points"][-1]["gpus"] == 1, 10, "ursula's GPU")
    ursula.post(f"gprs/{gpr['id']}/release", expect=200)

    # Bad input names its field.
    old = format_time(datetime.now(UTC) - timedelta(hours=25))
    for query, field, message in [
        (f"since={old}", "since", "at most 24 h ago"),
        ("since=yesterday", "since", "not an ISO-8601 time"),
        ("step=60", "step", "multiple of 5m (300 s)"),
        ("step=7m", "step", "multiple of 5m (300 s)"),
        ("step=2d", "step", "at most 24 h"),
    ]:
        error = admin.get(f"gpus/utilization?{query}", expect=400)
        assert error["field"] == field and message in error["message"], (query, error)


def test_used_utilization_without_a_metrics_source(hub, user):
    _, someone = user()
    answer = hub.admin().get("gpus/utilization?step=1h", expect=200)
    assert answer["source"]["name"] is None and answer["source"]["error"] == "no metric source is configured"
    assert answer["step"] == 3600 and len(answer["points"]) == 25  # 289 buckets (a day and the current one), 12 a step
    assert {(p["utilization"], p["gpus"]) for p in answer["points"]} == {(None, 0)}
    assert someone.get("gpus/utilization", expect=200)["source"]["error"] == "no metric source is configured"


def test_an_endpoint_says_its_gpus_utilisation(metrics_hub):
    hub, _ = metrics_hub
    admin = hub.admin()
    erin = hub.client(hub.user_token("erin"))
    # The recorded GPU's memory in use failed the exit checks of the tests before: the node is quarantined.
    if admin.get("nodes/local/gpu-node-1", expect=200)["health"] == "quarantined":
        admin.post("nodes/local/gpu-node-1/clear", {"reason": "the recorded memory in use is the test's"}, expect=200)
    admin.post("slices", {"name": "serving", "members": ["erin"]}, expect=201)
    server = os.path.join(os.path.dirname(__file__), "endpoint_server.py")
    body = {"slice": "serving", "name": "echo", "runtime": "command", "command": [sys.executable, server, "{port}"]}
    erin.post("endpoints", {**body, "min_replicas": 1, "duration": "1h"}, expect=202)
    ready = wait_for(lambda: (e := erin.get("endpoints/serving/echo"))["status"] == "ready" and e, 60, "the endpoint")
    (uuid,) = erin.get(f"gprs/{ready['gprs'][0]}", expect=200)["bound_gpus"]
    wait_for(lambda: readings(admin)[uuid]["sample"], 40, "its GPU's sample")
    utilization = readings(admin)[uuid]["sample"]["utilization"]
    assert erin.get("endpoints/serving/echo", expect=200)["gpu_utilization"] == utilization
    erin.call("DELETE", "endpoints/serving/echo", expect=204)
    wait_for(lambda: erin.get(f"gprs/{ready['gprs'][0]}")["status"] == "complete", 30, "its GPR to end")
    admin.call("DELETE", "slices/serving", expect=204)
