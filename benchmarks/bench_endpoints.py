"""Inference endpoints' proxy path at load: what a request through the hub to an endpoint costs.

``egs-hub up`` (SQLite, a declared node of 8 GPUs) with one endpoint of the ``command`` runtime whose
server is a bare Tornado application answering every GET with ``{"status": "ok"}`` (bench_floor.py's),
one replica held at one (min = max = 1). An async client (bench_api.py's: every client sends its next
request as soon as its last is answered) measures at each client count, for ``--seconds``:

- ``endpoint``: GET <hub>/services/egs/endpoints/<slice>/<name>/ping with a member's hub token: through
  configurable-http-proxy, the EGS service (hub-token check, the endpoint's replica chosen, its answer
  streamed back) and the server;
- ``direct``: the same server, started beside the stack, asked directly: the floor of the server itself.

``service_cpu`` is the EGS service's CPU seconds per wall second during a level (1.0: one core busy).
The endpoint's own figures (requests/s, latency p50/p95 over the last minute) are read back from its
GET /endpoints/... answer at the end. Client, proxy, hub, service and server share the machine's cores.

    python benchmarks/bench_endpoints.py --json endpoints.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time

import httpx
from bench_api import Stack, log, set_up_slices, write_inventory
from bench_floor import SERVER, level, wait_for
from bench_planner import bench_reference

from egs_hub.embedded import free_port

SLICE, ENDPOINT = "serve", "ping"


def make_endpoint(stack: Stack, token: str) -> str:
    """The endpoint, ready; its URL at the hub."""
    headers = {"Authorization": f"token {token}"}
    body = {
        "slice": SLICE,
        "name": ENDPOINT,
        "runtime": "command",
        "command": [sys.executable, "-c", SERVER, "{port}"],
        "min_replicas": 1,
        "max_replicas": 1,
        "duration": "1d",
    }
    made = httpx.post(stack.api + "endpoints", json=body, headers=headers, timeout=60)
    if made.status_code != 202:
        raise RuntimeError(f"POST endpoints answered {made.status_code}: {made.text[:300]}")
    deadline = time.monotonic() + 120
    while (answer := endpoint_answer(stack, token))["status"] != "ready":
        if time.monotonic() > deadline:
            raise RuntimeError(f"the endpoint is not ready after 120 s: {answer}")
        time.sleep(0.5)
    return stack.url + answer["url"]


def endpoint_answer(stack: Stack, token: str) -> dict:
    headers = {"Authorization": f"token {token}"}
    return httpx.get(f"{stack.api}endpoints/{SLICE}/{ENDPOINT}", headers=headers, timeout=60).json()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrency levels")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per level (10)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-endpoints-") as data_dir:
        inventory = f"{data_dir}/inventory.yaml"
        write_inventory(inventory, 1)
        stack = Stack(data_dir, f"sqlite:///{data_dir}/egs.sqlite", inventory, "bench-endpoints-admin")
        direct_port = free_port()
        direct = subprocess.Popen([sys.executable, "-c", SERVER, str(direct_port)])
        rows: dict[str, list[dict]] = {"endpoint": [], "direct": []}
        try:
            stack.start(timeout=180)
            token = set_up_slices(stack, [SLICE])
            url = make_endpoint(stack, token) + "ping"
            direct_url = f"http://127.0.0.1:{direct_port}/ping"
            asyncio.run(wait_for(direct_url))
            pid = stack.service_pid()
            for clients in sorted(set(args.clients)):
                for path, target, headers in (
                    ("endpoint", url, {"Authorization": f"token {token}"}),
                    ("direct", direct_url, {}),
                ):
                    figures = asyncio.run(level(target, clients, args.seconds, pid, headers)).figures()
                    log(f"{path}: " + " ".join(f"{k}={v}" for k, v in figures.items()))
                    rows[path].append(figures)
            seen = endpoint_answer(stack, token)
        finally:
            direct.terminate()
            direct.wait(timeout=10)
            stack.stop()
    results = {
        "levels": rows,
        "endpoint_says": {k: seen[k] for k in ("requests_per_second", "latency_p50", "latency_p95", "errors")},
        "reference_loop_s": round(bench_reference(), 3),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    print(f"\nAn endpoint's path at the hub, and its server directly (reference_loop_s {results['reference_loop_s']})")
    print(f"  {'path':<9} {'clients':>7} {'rps':>9} {'p50 ms':>9} {'p99 ms':>9} {'errors':>6} {'service cpu':>11}")
    for path, levels in rows.items():
        for r in levels:
            print(
                f"  {path:<9} {r['clients']:>7} {r['rps']:>9} {r['p50_ms']:>9} {r['p99_ms']:>9} {r['errors']:>6} "
                f"{r['service_cpu']:>11}"
            )
    print(f"  the endpoint's own figures over its last minute: {results['endpoint_says']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
