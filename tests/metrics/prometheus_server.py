"""A real Prometheus for tests, scraping an exposition that the test controls.

Vocabulary: an *exposition* is Prometheus text format as an exporter serves it
at ``/metrics`` (``ExpositionServer`` plays the DCGM exporter); *Prometheus* is
Debian's ``/usr/bin/prometheus`` run on a free loopback port with its config
and storage in a test's temporary folder; a *scrape* is Prometheus reading the
exposition (job ``dcgm``, every ``scrape_interval``), so a changed exposition
shows up in queries after the next scrape: ``wait_for_scrape`` waits for it.
The first scrape comes about 5 s after Prometheus is ready (its target
discovery hands over new targets every 5 s), later ones every interval.

Nothing is skipped: without the binary, tests fail saying how to install it.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from egs_hub.embedded import free_port

PROMETHEUS = "/usr/bin/prometheus"
RECORDED_EXPOSITION = os.path.join(os.path.dirname(__file__), "dcgm_exposition.txt")


def read_recorded_exposition() -> str:
    """The recorded dcgm-exporter exposition: node gpu-node-1, two H100 80GB, GPU 0 used by a pod."""
    with open(RECORDED_EXPOSITION, encoding="utf-8") as f:
        return f.read()


class ExpositionServer:
    """Serves ``text`` (reassignable while running) at ``/metrics`` on 127.0.0.1, on a free port."""

    def __init__(self, text: str = ""):
        self.text = text
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if urllib.parse.urlsplit(self.path).path != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                body = owner.text.encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # scrapes every second: keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def start(self) -> ExpositionServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="exposition", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ExpositionServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Prometheus:
    """A running Prometheus process; ``url`` is its web/API address."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log_path: str):
        self.process = process
        self.url = url
        self.log_path = log_path

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_prometheus(data_dir: str, targets: list[str], scrape_interval: str = "1s") -> Prometheus:
    """Start Prometheus scraping ``targets`` (``host:port``) as job ``dcgm``; return once it is ready."""
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.fail(f"{PROMETHEUS} is missing: install Debian's prometheus package (make install-test does)")
    config = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval},
        "scrape_configs": [
            {
                "job_name": "dcgm",
                "honor_labels": True,  # keep the exporter's Hostname, pod and namespace as they are
                "metrics_path": "/metrics",
                "static_configs": [{"targets": targets}],
            }
        ],
    }
    config_path = os.path.join(data_dir, "prometheus.yml")
    with open(config_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    port = free_port()
    log_path = os.path.join(data_dir, "prometheus.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={os.path.join(data_dir, 'tsdb')}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    prometheus = Prometheus(process, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=1) as response:
                if response.status == 200:
                    return prometheus
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    prometheus.stop()
    tail = "\n".join(prometheus.log().splitlines()[-20:])
    pytest.fail(f"Prometheus did not become ready at {prometheus.url} (exit code {process.poll()}); log tail:\n{tail}")


def instant_query(prom_url: str, promql: str) -> list[dict[str, Any]]:
    """The ``data.result`` of an instant query."""
    url = f"{prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)["data"]["result"]


def wait_for_scrape(
    prom_url: str, query: str, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 30
) -> list[dict[str, Any]]:
    """Poll the instant ``query`` until ``predicate(result)`` holds; return that result (fail after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    result: list[dict[str, Any]] = []
    while True:
        result = instant_query(prom_url, query)
        if predicate(result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"after {timeout} s, Prometheus at {prom_url} still answers {query!r} with {result!r}")
        time.sleep(0.2)
