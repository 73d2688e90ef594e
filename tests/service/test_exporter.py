"""The Prometheus exporter and its /metrics handler, in-process on both databases.

Vocabulary: ``fill`` builds a store with two clusters, three slices and GPRs in
every interesting status; ``SAMPLES`` are the newest readings of three GPUs
(one the store does not know); a *scrape* is the parsed exposition, and
``values`` reads one metric of it as {label values: value}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from tornado import web
from tornado.httpclient import AsyncHTTPClient
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from egs_hub.core import lifecycle
from egs_hub.core import model as core
from egs_hub.core.samples import GpuSample
from egs_hub.roles import ADMIN_SCOPE
from egs_hub.service.exporter import GPU_LABELS, Exporter
from egs_hub.service.handlers.prometheus import MetricsHandler
from egs_hub.store import db, queries
from egs_hub.store.db import transaction
from egs_hub.store.models import Slice

START = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
H100 = core.Shape("H100", 80, 4)
A100 = core.Shape("A100", 40, 2)
MIB = 2**20


def make_node(name: str, cluster: str, shape: core.Shape, uuids: list[str], schedulable: bool = True) -> core.Node:
    return core.Node(name=name, cluster=cluster, shape=shape, gpus=tuple(uuids), schedulable=schedulable)


def gpus_of(node: core.Node, unhealthy: tuple[str, ...] = ()) -> list[core.GPU]:
    return [
        core.GPU(
            uuid=uuid,
            index=i,
            node=node.name,
            cluster=node.cluster,
            model=node.shape.model,
            memory_mib=node.shape.memory_gb * 1024,
            healthy=uuid not in unhealthy,
        )
        for i, uuid in enumerate(node.gpus)
    ]


def submit(session, slice_name: str, gpus: int, reasons: tuple[str, ...] = (), reject: bool = False):
    spec = core.GPRSpec(slice=slice_name, duration=timedelta(hours=1), gpus=gpus)
    row = queries.new_gpr_row(session, spec, "alice", START)
    queries.apply(session, row, lifecycle.submit(row.id, spec, "alice", list(reasons), START, reject=reject))
    return row


def step(session, row, transition, *args) -> core.GPR:
    """Apply one lifecycle transition (all take the GPR first and the time last) to a stored GPR."""
    return queries.apply(session, row, transition(queries.to_gpr(row), *args, START))


def hold(session, slice_name: str, gpus: tuple[str, ...]):
    """A GPR of ``slice_name`` admitted to ``gpus`` on n1 and bound: provisioning."""
    row = submit(session, slice_name, len(gpus))
    queries.bind(session, step(session, row, lifecycle.admit, gpus, ("n1",)))
    return row


def fill(sessions) -> dict[str, int]:
    """The store the tests read; returns GPR ids by role.

    local/n1 (H100 x4): GPU-0 and GPU-1 bound to slice a, GPU-2 bound to b and then
    failing, GPU-3 free again after a completed GPR. east/e1 (A100 x2): E-0 free, E-1 unhealthy;
    east/e2, cordoned: E-2 unschedulable, E-3 gone (not present).
    """
    n1 = make_node("n1", "local", H100, [f"GPU-{i}" for i in range(4)])
    e1 = make_node("e1", "east", A100, ["E-0", "E-1"])
    e2 = make_node("e2", "east", A100, ["E-2", "E-3"], schedulable=False)
    e2_now = make_node("e2", "east", A100, ["E-2"], schedulable=False)
    with transaction(sessions) as session:
        queries.sync_inventory(session, "local", "local", [n1], gpus_of(n1, ("GPU-2",)), START)
        queries.sync_inventory(session, "east", "kubernetes", [e1, e2], gpus_of(e1, ("E-1",)) + gpus_of(e2), START)
        queries.sync_inventory(
            session, "east", "kubernetes", [e1, e2_now], gpus_of(e1, ("E-1",)) + gpus_of(e2_now), START
        )
        for name in ("a", "b", "c"):
            row = Slice(
                name=name,
                group_name=name,
                project_id=queries.project_id(session, START),
                created_at=START,
                updated_at=START,
            )
            queries.write_slice_policy(row, core.SlicePolicy(max_active_gprs=2))
            session.add(row)
        running = hold(session, "a", ("GPU-0", "GPU-1"))
        step(session, running, lifecycle.mark_provisioned, "local")
        binding = hold(session, "b", ("GPU-2",))
        done = hold(session, "a", ("GPU-3",))
        step(session, done, lifecycle.mark_provisioned, "local")
        step(session, done, lifecycle.begin_release, core.EndReason.RELEASED_EARLY, "alice", "done")
        step(session, done, lifecycle.complete, "local")
        queries.unbind(session, done.id)
        for slice_name in ("b", "b", "a"):
            submit(session, slice_name, 1)
        submit(session, "a", 8, reasons=("more than max_gpus",))
        step(session, submit(session, "b", 1), lifecycle.cancel, "alice", "")
        submit(session, "a", 8, reasons=("more than max_gpus",), reject=True)
        return {"running": running.id, "binding": binding.id}


SAMPLES = [
    GpuSample(
        uuid="GPU-0",
        time=START,
        node="n1",
        utilization=87.5,
        memory_used_mib=1024,
        memory_total_mib=81559,
        temperature_c=71,
        power_w=512.5,
        power_limit_w=700,
        sm_clock_mhz=1980,
    ),
    GpuSample(uuid="GPU-3", time=START, node="n1", utilization=0, power_w=60),
    GpuSample(uuid="GPU-X", time=START, node="x9", temperature_c=40),
]


@pytest.fixture
def sessions(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    yield db.make_sessions(engine)
    engine.dispose()


Scrape = dict[tuple[str, frozenset], float]


def scrape(exporter: Exporter) -> Scrape:
    body, content_type = exporter.exposition()
    assert content_type == CONTENT_TYPE_LATEST
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def values(scraped: Scrape, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """Every series of ``name``, keyed by the values of the labels ``keys``."""
    out = {}
    for (sample_name, labels), value in scraped.items():
        if sample_name == name:
            by_name = dict(labels)
            out[tuple(by_name[k] for k in keys)] = value
    return out


def test_an_empty_store_without_samples_exposes_only_totals(sessions):
    scraped = scrape(Exporter(sessions, list))
    assert values(scraped, "egs_queue_length") == {(): 0}
    assert values(scraped, "egs_gprs", "status", "slice") == {}
    assert values(scraped, "egs_gpus", "cluster", "shape", "state") == {}
    assert values(scraped, "egs_gpu_temperature_celsius", *GPU_LABELS) == {}
    assert values(scraped, "egs_estimates_total", "outcome") == {("early",): 0, ("on_time",): 0, ("late",): 0}
    assert set(values(scraped, "egs_estimates_moved_total", "cause").values()) == {0}


def test_gprs_are_counted_by_status_and_slice(sessions):
    fill(sessions)
    scraped = scrape(Exporter(sessions, list))
    want = {(status.value, name): 0 for status in core.Status if not status.is_final for name in ("a", "b", "c")}
    # want: a holds one window and has one queued and one pending; b is binding one, two queued; c nothing.
    want |= {
        ("provisioned", "a"): 1,
        ("queued", "a"): 1,
        ("pending-approval", "a"): 1,
        ("provisioning", "b"): 1,
        ("queued", "b"): 2,
    }
    assert values(scraped, "egs_gprs", "status", "slice") == want
    assert values(scraped, "egs_gprs_finished_total", "status", "slice") == {
        ("complete", "a"): 1,
        ("rejected", "a"): 1,
        ("cancelled", "b"): 1,
    }
    assert values(scraped, "egs_queue_length") == {(): 3}


def test_gpus_are_counted_by_cluster_shape_and_state(sessions):
    fill(sessions)
    scraped = scrape(Exporter(sessions, list))
    assert values(scraped, "egs_gpus", "cluster", "shape", "state") == {
        # want: GPU-2 counts as unhealthy though bound
        ("local", "H100-80GB x4", "bound"): 2,
        ("local", "H100-80GB x4", "free"): 1,
        ("local", "H100-80GB x4", "unschedulable"): 0,
        ("local", "H100-80GB x4", "unhealthy"): 1,
        # want: E-3 is gone and not counted at all
        ("east", "A100-40GB x2", "bound"): 0,
        ("east", "A100-40GB x2", "free"): 1,
        ("east", "A100-40GB x2", "unschedulable"): 1,
        ("east", "A100-40GB x2", "unhealthy"): 1,
    }


def test_gpu_readings_are_labelled_with_the_slice_and_gpr_holding_the_gpu(sessions):
    ids = fill(sessions)
    scraped = scrape(Exporter(sessions, lambda: SAMPLES))
    held = ("GPU-0", "n1", "local", "a", str(ids["running"]))
    free = ("GPU-3", "n1", "local", "", "")
    unknown = ("GPU-X", "x9", "", "", "")
    # want: a series only where the sample has the reading
    assert values(scraped, "egs_gpu_utilization_percent", *GPU_LABELS) == {held: 87.5, free: 0}
    assert values(scraped, "egs_gpu_memory_used_bytes", *GPU_LABELS) == {held: 1024 * MIB}
    assert values(scraped, "egs_gpu_memory_total_bytes", *GPU_LABELS) == {held: 81559 * MIB}
    assert values(scraped, "egs_gpu_temperature_celsius", *GPU_LABELS) == {held: 71, unknown: 40}
    assert values(scraped, "egs_gpu_power_watts", *GPU_LABELS) == {held: 512.5, free: 60}
    assert values(scraped, "egs_gpu_power_limit_watts", *GPU_LABELS) == {held: 700}
    assert values(scraped, "egs_gpu_sm_clock_hertz", *GPU_LABELS) == {held: 1.98e9}


def test_each_scrape_reads_the_store_and_samples_again(sessions):
    ids = fill(sessions)
    samples = list(SAMPLES)
    exporter = Exporter(sessions, lambda: samples)
    assert values(scrape(exporter), "egs_gpus", "cluster", "shape", "state")[("local", "H100-80GB x4", "free")] == 1
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, ids["running"])
        step(session, row, lifecycle.begin_release, core.EndReason.WINDOW_ENDED, "planner", "window ended")
        step(session, row, lifecycle.complete, "local")
        queries.unbind(session, row.id)
    samples.pop(0)
    scraped = scrape(exporter)
    assert values(scraped, "egs_gpus", "cluster", "shape", "state")[("local", "H100-80GB x4", "free")] == 3
    assert values(scraped, "egs_gprs_finished_total", "status", "slice")[("complete", "a")] == 2
    assert values(scraped, "egs_gpu_temperature_celsius", *GPU_LABELS) == {("GPU-X", "x9", "", "", ""): 40}


def test_histograms_count_observations_and_estimates_by_outcome(sessions):
    exporter = Exporter(sessions, list)
    exporter.observe_pass(0.002)
    exporter.observe_pass(0.3)
    exporter.observe_start(120, 30)
    exporter.observe_start(600, -300)
    exporter.observe_start(3600, 900)
    exporter.observe_start(10, None)
    exporter.observe_start(90, 60)
    scraped = scrape(exporter)
    assert values(scraped, "egs_planner_pass_seconds_count") == {(): 2}
    assert values(scraped, "egs_planner_pass_seconds_sum") == {(): pytest.approx(0.302)}
    assert values(scraped, "egs_planner_pass_seconds_bucket", "le")[("0.0025",)] == 1
    assert values(scraped, "egs_gpr_wait_seconds_count") == {(): 5}
    assert values(scraped, "egs_gpr_wait_seconds_sum") == {(): 4420}
    # want: the error histogram holds absolute errors, of the four starts that had an estimate
    assert values(scraped, "egs_estimate_error_seconds_count") == {(): 4}
    assert values(scraped, "egs_estimate_error_seconds_sum") == {(): 1290}
    errors = values(scraped, "egs_estimate_error_seconds_bucket", "le")
    assert (errors[("60.0",)], errors[("300.0",)], errors[("+Inf",)]) == (2, 3, 4)
    assert values(scraped, "egs_estimates_total", "outcome") == {("early",): 1, ("on_time",): 2, ("late",): 1}


# The handler, served in-process with doubles for the service and the hub.


@dataclass
class ServiceDouble:
    """What MetricsHandler reads of EGSService."""

    exporter: Exporter
    authenticate_prometheus: bool
    service_name: str = "egs"


class TokenAuth:
    """Stands in for HubOAuth: the hub's model of each token's owner."""

    access_scopes = None  # any identified caller gets through check_hub_user; the handler checks scopes

    def __init__(self, owners: dict[str, dict]):
        self.owners = owners

    async def get_user(self, handler, sync: bool = True) -> dict | None:
        token = handler.request.headers.get("Authorization", "").removeprefix("Bearer ")
        owner = self.owners.get(token)
        return None if owner is None else dict(owner)


OWNERS = {
    "admin-token": {"name": "root", "kind": "user", "scopes": [ADMIN_SCOPE]},
    "user-token": {"name": "alice", "kind": "user", "scopes": ["access:services"]},
    "service-token": {"name": "egs", "kind": "service", "scopes": []},
}


@dataclass(frozen=True)
class Case:
    authenticate: bool  # authenticate_prometheus
    token: str | None
    want_status: int


CASES = {
    "an admin scrapes": Case(True, "admin-token", 200),
    "the service itself scrapes": Case(True, "service-token", 200),
    "a user without the admin scope is refused": Case(True, "user-token", 403),
    "a caller without a token is refused": Case(True, None, 401),
    "anyone scrapes when authentication is off": Case(False, None, 200),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_metrics_handler(sessions, case: Case):
    fill(sessions)
    service = ServiceDouble(Exporter(sessions, lambda: SAMPLES), case.authenticate)
    app = web.Application([(r"/services/egs/metrics", MetricsHandler)], egs=service, hub_auth=TokenAuth(OWNERS))
    sock, port = bind_unused_port()
    server = HTTPServer(app)
    server.add_sockets([sock])
    headers = {"Authorization": f"Bearer {case.token}"} if case.token else {}
    try:
        response = await AsyncHTTPClient().fetch(
            f"http://127.0.0.1:{port}/services/egs/metrics", headers=headers, raise_error=False
        )
    finally:
        server.stop()
        await server.close_all_connections()
    assert response.code == case.want_status, response.body
    if case.want_status == 200:
        assert response.headers["Content-Type"] == CONTENT_TYPE_LATEST
        families = {f.name for f in text_string_to_metric_families(response.body.decode())}
        assert {"egs_queue_length", "egs_gpus", "egs_gpu_temperature_celsius"} <= families
    else:
        assert response.headers["Content-Type"] == "application/json; charset=UTF-8"
        body = json.loads(response.body)
        assert body["status"] == case.want_status and body["message"]
