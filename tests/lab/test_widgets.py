"""RequestForm and GpuMonitor driven through their Python objects (values set, buttons clicked)
against a real egs-hub whose GPU metrics come from a real Prometheus scraping a recorded
DCGM-exporter exposition (the hub's declared inventory is that exposition's node: 2 H100s)."""

from __future__ import annotations

import html
import secrets
import time
from collections.abc import Iterator

import pytest

from egs_hub.client import EGSClient
from egs_hub.lab.widgets import GpuMonitor, RequestForm

from ..client.helpers import end_gprs
from ..metrics.prometheus_server import Prometheus
from ..service.hub import Hub, dcgm_hub, wait_for

HOT, COOL = "GPU-3f6e2a1c-8b7d-4e55-a0c2-9d1b7e4f6a10", "GPU-b81c4d92-07ae-4f3b-9e61-52c8d0a7e3f4"  # 57 °C, 29 °C


@pytest.fixture(scope="module")
def metrics_hub(tmp_path_factory) -> Iterator[tuple[Hub, Prometheus]]:
    with dcgm_hub(tmp_path_factory.mktemp("widgets-hub")) as running:
        yield running.hub, running.prometheus


@pytest.fixture(scope="module")
def admin(metrics_hub) -> Iterator[EGSClient]:
    hub, _ = metrics_hub
    with EGSClient(hub.api, hub.admin_token) as client:
        # The recorded exposition keeps a pod's 60 GB on GPU 0 for good: an exit check would quarantine the
        # node after the first GPR (as it should on a real node), so these tests check it at entry only.
        client.set_cluster_checks("local", [{"name": "gpu-health", "kind": "gpu-health", "at": ["entry"]}])
        yield client


@pytest.fixture
def alice(metrics_hub, admin, monkeypatch) -> Iterator[tuple[str, EGSClient]]:
    """A member of a new slice, as the widgets' environment (EGS_API_URL, EGS_API_TOKEN)."""
    hub, _ = metrics_hub
    name, slice_name = f"alice-{secrets.token_hex(3)}", f"w-{secrets.token_hex(3)}"
    token = hub.user_token(name)
    admin.create_slice(slice_name, members=[name], policy={"max_priority": 250})
    monkeypatch.delenv("EGS_SLICE", raising=False)
    monkeypatch.setenv("EGS_API_URL", hub.api)
    monkeypatch.setenv("EGS_API_TOKEN", token)
    with EGSClient(hub.api, token) as client:
        yield slice_name, client
    wait_for(lambda: end_gprs(admin, slice_name), 60, f"slice {slice_name}'s GPRs to finish")
    admin.delete_slice(slice_name)


def test_request_form_shows_wait_times_and_submits_the_picked_row(alice):
    slice_name, client = alice
    form = RequestForm()
    assert form.slice.options == (slice_name,) and form.slice.value == slice_name
    assert [value for _, value in form.shape.options] == ["", "H100-80GB x2"]
    assert form.request_button.disabled

    form.count.value = 2
    form.duration.value = "30 min"
    form.priority.value = "high"
    form.wait_times_button.click()
    assert form.message.value == ""
    ((option),) = form.options
    assert (option.cluster, option.shape.name) == ("local", "H100-80GB x2")
    assert "<table class='egs-table'>" in form.wait_table.value and "H100-80GB x2" in form.wait_table.value
    assert form.pick.value == 0 and form.pick.options[0][0].startswith("local · H100-80GB x2 · starts ")
    assert not form.request_button.disabled

    form.request_button.click()
    gpr = form.submitted
    assert gpr is not None and (gpr.slice, gpr.gpus, gpr.shape, gpr.cluster) == (slice_name, 2, "H100-80GB x2", "local")
    assert gpr.priority == 201  # high: its band's lowest priority
    assert f"GPR {gpr.id} submitted" in form.result.value and form.message.value == ""
    assert client.gpr(gpr.id).requested_by.startswith("alice-")


def test_request_form_shows_errors_as_messages(alice):
    form = RequestForm()
    form.duration.value = "2 parsecs"
    form.wait_times_button.click()
    assert "the duration &#x27;2 parsecs&#x27; is not a duration" in form.message.value and form.options == ()

    form.duration.value = "1h"
    form.count.value = 4  # the only node has 2 GPUs: the service refuses
    form.wait_times_button.click()
    assert form.options == () and form.request_button.disabled
    assert html.unescape(form.message.value).startswith(
        "<p style='color:#b00020'>4 GPUs of any shape cannot be placed: the inventory has 1 such node(s)"
    )

    form.count.value = 1
    form.wait_times_button.click()
    form.count.value = 3  # changed after the wait times: the service refuses it when submitted
    form.request_button.click()
    assert form.submitted is None
    assert "3 GPUs of shape 'H100-80GB x2' in cluster 'local' cannot be placed" in html.unescape(form.message.value)


def test_request_form_without_a_service_says_so(monkeypatch):
    monkeypatch.delenv("EGS_API_URL", raising=False)
    form = RequestForm()
    assert "no EGS service URL" in form.message.value and form.wait_times_button.disabled and form.client is None
    form.wait_times_button.click()
    form.request_button.click()
    assert "no EGS service URL" in form.message.value and form.submitted is None


def test_gpu_monitor_shows_my_gpus_hottest_first_and_stops_when_closed(metrics_hub, alice):
    _, prometheus = metrics_hub
    slice_name, client = alice
    gpr = client.create_gpr(slice_name, "10m", gpus=2)
    wait_for(lambda: client.gpr(gpr.id).status == "provisioned", 15, "the GPR to be provisioned")

    monitor = GpuMonitor(interval=0.2)
    try:
        wait_for(lambda: monitor.answer and all(g.sample for g in monitor.answer.gpus), 40, "readings of both GPUs")
        assert [g.uuid for g in monitor.answer.gpus] == [HOT, COOL]
        table = monitor.table.value
        assert (
            table.index("57 °C") < table.index("29 °C") and "512 W" in table and f"{slice_name} (GPR {gpr.id})" in table
        )
        assert "No GPU metrics" not in table and "refreshes every 0.2 s" in monitor.status.value
        seen = monitor.refreshes
        wait_for(lambda: monitor.refreshes >= seen + 2, 10, "two more refreshes")

        prometheus.stop()  # the service's metric source fails: the monitor says so
        wait_for(lambda: "No GPU metrics: " in monitor.table.value, 30, "the monitor to say metrics are missing")
    finally:
        monitor.close()
    monitor._timer.join(5)
    assert not monitor.running
    stopped_at = monitor.refreshes
    time.sleep(1)  # five intervals
    assert monitor.refreshes == stopped_at
