"""The floor under bench_api.py: what the same client gets through the same proxy from a server that does nothing.

A bare Tornado application (the server framework egs-hub's service runs on) answers
every GET with ``{"status": "ok"}``, behind configurable-http-proxy (JupyterHub's
proxy); the client is bench_api.py's (aiohttp, every client sends its next request as
soon as its last is answered). No request of the service can be faster than this on
the same machine, so these figures bound what bench_api.py's targets can ask for:
by Little's law, ``clients / rps`` is the mean wait at a level.

    python benchmarks/bench_floor.py --json floor.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import aiohttp
from bench_api import Level, chp_path, log
from bench_planner import bench_reference

from egs_hub.embedded import free_port

SERVER = """
import sys, tornado.ioloop, tornado.web

class Ok(tornado.web.RequestHandler):
    def get(self, _):
        self.set_header("Content-Type", "application/json")
        self.write(b'{"status": "ok"}')

tornado.web.Application([(r"/(.*)", Ok)]).listen(int(sys.argv[1]), "127.0.0.1")
tornado.ioloop.IOLoop.current().start()
"""


async def wait_for(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer 200 within {timeout} s")
            await asyncio.sleep(0.1)


async def level(url: str, clients: int, seconds: float, pid: int, headers: dict | None = None) -> Level:
    result = Level(clients)
    connector = aiohttp.TCPConnector(limit=clients + 1)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def client() -> None:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                async with session.get(url) as response:
                    await response.read()
                    if response.status != 200:
                        result.errors += 1
                        continue
                result.latencies.append(time.perf_counter() - started)

        with result.counting_cpu(pid):
            started = time.perf_counter()
            stop_at = started + seconds
            await asyncio.gather(*(client() for _ in range(clients)))
            result.wall_s = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64], help="concurrency levels")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per level (10)")
    args = parser.parse_args()

    server_port, proxy_port, api_port = free_port(), free_port(), free_port()
    environment = {**os.environ, "PATH": chp_path()}
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(server_port)])
    proxy = subprocess.Popen(
        [
            "configurable-http-proxy",
            f"--port={proxy_port}",
            "--ip=127.0.0.1",
            f"--api-port={api_port}",
            f"--default-target=http://127.0.0.1:{server_port}",
            "--log-level=warn",
        ],
        env=environment | {"CONFIGPROXY_AUTH_TOKEN": "floor"},
    )
    url = f"http://127.0.0.1:{proxy_port}/services/egs/api/v1/health"
    rows = []
    try:
        asyncio.run(wait_for(url))
        for clients in sorted(set(args.clients)):
            figures = asyncio.run(level(url, clients, args.seconds, server.pid)).figures()
            log(" ".join(f"{k}={v}" for k, v in figures.items()))
            rows.append(figures)
    finally:
        for process in (proxy, server):
            process.terminate()
            process.wait(timeout=10)
    results = {"levels": rows, "reference_loop_s": round(bench_reference(), 3)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    print(f"\nA bare Tornado server behind configurable-http-proxy (reference_loop_s {results['reference_loop_s']})")
    print(f"  {'clients':>7} {'rps':>9} {'p50 ms':>9} {'p99 ms':>9} {'server cpu':>10} {'client':>6} {'machine':>7}")
    for r in rows:
        print(
            f"  {r['clients']:>7} {r['rps']:>9} {r['p50_ms']:>9} {r['p99_ms']:>9} {r['service_cpu']:>10} "
            f"{r['client_cpu']:>6} {r['machine_cpu']:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
