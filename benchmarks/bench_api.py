"""The API at scale: the real stack, as a user's script sees it through the hub's proxy.

The scenario (issue 18): ``egs-hub up`` with a declared inventory of 2,000 nodes x 8
H100 (16,000 GPUs) and 10,000 queued GPRs in the store; an async client measures, at
1, 8, 32 and 64 concurrent clients, POST /gprs (submit), POST /wait-times (estimate),
GET /gprs?limit=100 (list: a page of 100; ``--list-query``; the level's ``items`` say how
many GPRs the answer held), GET /gprs/{id} (get) and GET /queue (what
the portal's GPU requests page fetches besides the list: static/requests.js), on
SQLite and on PostgreSQL, and GET /health, the floor: the cheapest answer the service
gives (no token to check, one SELECT 1), through the same proxy and client. Targets
at 32 clients: submit >= 500/s with p99 <= 50 ms; estimate, list and get p99 <= 20 ms;
the service's RSS <= 1 GB. (bench_floor.py measures what a server that does nothing
gets through the same proxy and client.)

How a run goes, per database:

1. ``egs-hub up`` on a fresh data directory (and a fresh PostgreSQL database); the
   hub admin ``admin`` logs in at /hub/login with the password given at first start
   and takes a hub API token (POST /hub/api/users/admin/tokens), as a script's author
   would; the admin creates the slices (policy: queue, no approval, up to 1,000 GPRs
   holding GPUs at once) with the user ``bench`` as member, and a token for ``bench``.
   Then the stack is stopped (Ctrl-C).
2. Preload, while the service is down, with the store's own functions
   (queries.new_gpr_row, lifecycle.submit/admit/mark_provisioned, queries.apply and
   bind): through today's API 10,000 GPRs would take many minutes. First every node
   is held by a provisioned GPR (one whole node each, its window ending 1 to 3 days
   from now), then the queued GPRs (1 to 16 GPUs for 1 to 24 hours, mixed priorities)
   wait behind them, as in bench_planner.py: nothing ends or starts during the run, so
   every figure is the API's and the planner's, not the binding's. (With
   ``--start-after-days D`` the queued GPRs also start after a random time up to D
   days ahead; with nodes left free (``--provisioned``) some would start at once.)
3. ``egs-hub up`` again on the same data. Each operation runs at each client count for
   ``--seconds``: every client sends its next request as soon as its last is answered.
   Requests in flight at the end may take ``--drain`` seconds more; the rest are given up
   on and count in the percentiles with the time they had waited (a lower bound). Before
   each level the service is let go quiet: /health answers about as fast as it did
   before the run (within ``--quiet-timeout``), so the service is done with the last
   level's requests. Each operation runs on a freshly started stack (same data), so
   what one operation left the service busy with does not count against the next.
   ``rps`` is answers / time until the last answer. Submits run last, so the reads see
   the preloaded store; submitted GPRs stay queued too.

The service's RSS is its peak resident set (VmHWM of /proc/PID/status), the highest of its runs;
``service_cpu`` the service process's CPU seconds per wall second in each level (1.0:
one core busy), ``client_cpu`` the benchmark's own and ``machine_cpu`` the whole machine's
(at most its number of cores). ``reference_loop_s`` is the machine's speed at the time (as in
bench_planner.py): compare figures taken on different days through it. Client, proxy,
hub and service share the machine's cores.

    python benchmarks/bench_api.py --json api.json
    python benchmarks/bench_api.py --nodes 100 --preload 500 --clients 1 8 --seconds 3  # small
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import aiohttp  # kubernetes_asyncio's HTTP client; far lighter per request than httpx on a shared 2-core machine
import httpx
import psycopg
import yaml
from bench_planner import bench_reference, percentile
from sqlalchemy import select
from sqlalchemy.engine import make_url

from egs_hub.core import lifecycle
from egs_hub.core.model import GPRSpec
from egs_hub.embedded import free_port
from egs_hub.store import queries
from egs_hub.store.db import make_engine, make_sessions, transaction, upgrade
from egs_hub.store.models import GPU, Node

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [1, 1, 2, 4, 8, 8, 16]  # GPUs; 16 spans two nodes
HOURS = [1, 2, 4, 8, 12, 24]  # window lengths
PRIORITIES = [50, 101, 101, 101, 150, 250]
USER = "bench"
# health is the floor: the cheapest answer (no token, one SELECT 1) through the same proxy and client.
OPERATIONS = ("estimate", "get", "list", "queue", "submit", "health")
TARGETS = {  # figure -> (target, "min" or "max"), at --target-clients
    "submit_rps": (500, "min"),
    "submit_p99_ms": (50, "max"),
    "estimate_p99_ms": (20, "max"),
    "list_p99_ms": (20, "max"),
    "get_p99_ms": (20, "max"),
    "service_rss_mb": (1024, "max"),
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# The stack


def chp_path() -> str:
    """PATH with configurable-http-proxy: the one on PATH, else the one `make` installs in the checkout."""
    local = os.path.join(ROOT, ".cache", "node", "node_modules", ".bin")
    return os.pathsep.join(p for p in (local if os.path.isdir(local) else "", os.environ.get("PATH", "")) if p)


def write_inventory(path: str, nodes: int) -> None:
    data = {"nodes": [{"name": f"node-{i:04d}", "model": "H100", "memory_gb": 80, "gpus": 8} for i in range(nodes)]}
    with open(path, "w") as f:
        yaml.safe_dump(data, f)


@dataclass
class Stack:
    """``egs-hub up`` in a subprocess, with its data directory and database."""

    data_dir: str
    db_url: str
    inventory: str
    admin_password: str
    process: subprocess.Popen | None = None
    url: str = ""

    @property
    def api(self) -> str:
        return f"{self.url}/services/egs/api/v1/"

    def start(self, timeout: float) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "PATH": chp_path(),
            "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
            "EGS_ADMIN_PASSWORD": self.admin_password,
        }
        command = [sys.executable, "-m", "egs_hub.cli", "up", "--port", str(port), "--data-dir", self.data_dir]
        command += ["--db-url", self.db_url, "--inventory", self.inventory]
        with open(os.path.join(self.data_dir, "hub.log"), "a") as out:
            self.process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.data_dir)
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if self.process.poll() is not None:
                raise RuntimeError(f"egs-hub up exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"egs-hub did not answer /health within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.5)
        log(f"egs-hub answers at {self.url} after {timeout - (deadline - time.monotonic()):.0f} s")

    def _healthy(self) -> bool:
        try:
            # A service busy planning answers late (seconds at 10,000 GPRs today), but it answers.
            return httpx.get(self.api + "health", timeout=60).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        """Ctrl-C, as a person stops it; killed if it does not exit within a minute."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        deadline = time.monotonic() + 30
        while (pid := self.service_pid()) is not None:
            if time.monotonic() > deadline:
                log(f"the EGS service (pid {pid}) outlived the hub by 30 s; killing it")
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 30
            time.sleep(0.2)

    def log_tail(self) -> str:
        with open(os.path.join(self.data_dir, "hub.log")) as f:
            return f.read()[-3000:]

    def service_pid(self) -> int | None:
        """The pid of this stack's EGS service process (JupyterHub runs its supervisor with EGS_DATA_DIR
        set, and the supervisor the service with the same environment)."""
        marker = f"EGS_DATA_DIR={self.data_dir}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read()
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environment = f.read().split(b"\0")
            except OSError:
                continue
            # The service itself, not its supervisor (egs_hub.service.supervise)
            if command.split(b"\0")[1:3] == [b"-m", b"egs_hub.service"] and marker in environment:
                return int(entry)
        return None


def hub_admin_token(stack: Stack) -> str:
    """Log in at /hub/login as ``admin`` and take an API token, as a person writing a script would."""
    with httpx.Client(base_url=stack.url, timeout=30) as hub:
        page = hub.get("/hub/login")
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        form = {"username": "admin", "password": stack.admin_password, "_xsrf": xsrf.group(1) if xsrf else ""}
        login = hub.post("/hub/login", data=form)
        if login.status_code != 302:
            raise RuntimeError(f"admin login answered {login.status_code}: {login.text[:300]}")
        made = hub.post(
            "/hub/api/users/admin/tokens",
            json={"note": "bench_api"},
            headers={"X-XSRFToken": hub.cookies.get("_xsrf", "")},
        )
        made.raise_for_status()
        return made.json()["token"]


def set_up_slices(stack: Stack, slices: list[str]) -> str:
    """Create the slices with ``bench`` as member; return a hub API token of ``bench``."""
    admin = {"Authorization": f"token {hub_admin_token(stack)}"}
    policy = {"max_active_gprs": 1000, "eviction": "off"}
    for name in slices:
        made = httpx.post(
            stack.api + "slices", json={"name": name, "members": [USER], "policy": policy}, headers=admin, timeout=60
        )
        if made.status_code != 201:
            raise RuntimeError(f"POST slices {name} answered {made.status_code}: {made.text[:300]}")
    made = httpx.post(f"{stack.url}/hub/api/users/{USER}/tokens", json={"note": "bench_api"}, headers=admin, timeout=30)
    made.raise_for_status()
    return made.json()["token"]


# The GPRs


def random_spec(rng: random.Random, slices: list[str], now: datetime, start_after_days: float) -> GPRSpec:
    """A GPR of the queue: 1 to 16 H100 for hours, some at higher priority; with ``start_after_days``, not
    before a time that far ahead at most."""
    later = now + timedelta(days=rng.uniform(0, start_after_days)) if start_after_days else None
    return GPRSpec(
        slice=rng.choice(slices),
        duration=timedelta(hours=rng.choice(HOURS)),
        gpus=rng.choice(SIZES),
        priority=rng.choice(PRIORITIES),
        shape=rng.choice([None, "H100"]),
        start_after=later.replace(microsecond=0) if later else None,
    )


def spec_body(spec: GPRSpec) -> dict:
    body = {"slice": spec.slice, "duration": int(spec.duration.total_seconds()), "gpus": spec.gpus}
    body["priority"] = spec.priority
    body |= {"shape": spec.shape} if spec.shape else {}
    return body | ({"start_after": spec.start_after.isoformat()} if spec.start_after else {})


def preload(db_url: str, slices: list[str], args) -> list[int]:
    """Write ``args.provisioned`` provisioned GPRs (a whole node each, windows ending 1 to 3 days from now),
    then ``args.preload`` queued GPRs, all of ``bench``, with the store's own functions; the queued ones' ids.

    The inventory must be in the store already (the service's first start put it there).
    """
    rng = random.Random(args.seed)
    sessions = make_sessions(make_engine(db_url))
    with sessions() as session:
        gpus: dict[str, list[str]] = {}
        for uuid, node in session.execute(select(GPU.uuid, Node.name).join(Node).order_by(Node.name, GPU.index)):
            gpus.setdefault(node, []).append(uuid)
    if args.provisioned > len(gpus):
        raise SystemExit(f"--provisioned {args.provisioned} is more than the {len(gpus)} nodes")
    nodes = sorted(gpus)[: args.provisioned]
    with transaction(sessions) as session:
        for node in nodes:
            now = datetime.now(UTC)
            spec = GPRSpec(
                slice=rng.choice(slices),
                duration=timedelta(hours=rng.uniform(24, 72)),
                gpus=len(gpus[node]),
                priority=rng.choice(PRIORITIES),
                shape="H100",
            )
            row = queries.new_gpr_row(session, spec, USER, now)
            gpr = queries.apply(session, row, lifecycle.submit(row.id, spec, USER, [], now))
            gpr = queries.apply(session, row, lifecycle.admit(gpr, tuple(gpus[node]), (node,), now))
            gpr = queries.apply(session, row, lifecycle.mark_provisioned(gpr, "local", now))
            queries.bind(session, gpr)
    ids: list[int] = []
    while len(ids) < args.preload:
        with transaction(sessions) as session:
            for _ in range(min(1000, args.preload - len(ids))):
                now = datetime.now(UTC)
                spec = random_spec(rng, slices, now, args.start_after_days)
                row = queries.new_gpr_row(session, spec, USER, now)
                ids.append(queries.apply(session, row, lifecycle.submit(row.id, spec, USER, [], now)).id)
    sessions.kw["bind"].dispose()
    return ids


# Measuring


@dataclass
class Level:
    clients: int
    latencies: list[float] = field(default_factory=list)
    unanswered: list[float] = field(default_factory=list)  # how long each had waited when given up
    errors: int = 0
    first_error: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0
    quiet: bool = True
    items: int | None = None  # list: GPRs in the first answer

    @contextmanager
    def counting_cpu(self, pid: int) -> Iterator[None]:
        """The CPU seconds the service (``pid``), this client and the whole machine spend in the block."""
        service, client, machine = cpu_seconds(pid), time.process_time(), machine_cpu_seconds()
        yield
        self.cpu_s = cpu_seconds(pid) - service
        self.client_cpu_s = time.process_time() - client
        self.machine_cpu_s = machine_cpu_seconds() - machine

    def figures(self) -> dict:
        # Requests given up on count in the percentiles with the time they had waited: a lower bound.
        waits = self.latencies + self.unanswered or [float("nan")]
        return {
            "clients": self.clients,
            "requests": len(self.latencies),
            "unanswered": len(self.unanswered),
            "errors": self.errors,
            "rps": round(len(self.latencies) / self.wall_s, 2) if self.wall_s else 0.0,
            "p50_ms": round(1000 * statistics.median(waits), 2),
            "p99_ms": round(1000 * percentile(waits, 0.99), 2),
            "max_ms": round(1000 * max(waits), 2),
            "service_cpu": round(self.cpu_s / self.wall_s, 2) if self.wall_s else 0.0,
            "client_cpu": round(self.client_cpu_s / self.wall_s, 2) if self.wall_s else 0.0,
            "machine_cpu": round(self.machine_cpu_s / self.wall_s, 2) if self.wall_s else 0.0,
            **({"first_error": self.first_error} if self.errors else {}),
            **({"items": self.items} if self.items is not None else {}),
            **({"quiet_before": False} if not self.quiet else {}),
        }


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU seconds spent busy by the whole machine, all cores (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (peak) of a process, in MB."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


class Bench:
    def __init__(self, stack: Stack, token: str, slices: list[str], gpr_ids: list[int], args):
        self.stack, self.slices, self.gpr_ids, self.args = stack, slices, gpr_ids, args
        self.headers = {"Authorization": f"token {token}"}
        self.rng = random.Random(args.seed + 1)

    def request(self, operation: str) -> tuple[str, str, dict | None, int]:
        """(method, path, body, expected status) of one request of ``operation``."""
        if operation == "submit":
            return (
                "POST",
                "gprs",
                spec_body(random_spec(self.rng, self.slices, datetime.now(UTC), self.args.start_after_days)),
                201,
            )
        if operation == "estimate":
            spec = random_spec(self.rng, self.slices, datetime.now(UTC), self.args.start_after_days)
            body = {"slice": spec.slice, "duration": int(spec.duration.total_seconds()), "gpus": spec.gpus}
            return "POST", "wait-times", body, 200
        if operation == "list":
            return "GET", f"gprs?{self.args.list_query}", None, 200
        if operation == "get":
            return "GET", f"gprs/{self.rng.choice(self.gpr_ids)}", None, 200
        if operation == "health":
            return "GET", "health", None, 200
        return "GET", "queue", None, 200

    async def health_s(self, session: aiohttp.ClientSession, timeout: float = 60.0) -> float:
        """How long /health took to answer; ``timeout`` when it did not answer within it."""
        started = time.perf_counter()
        try:
            async with session.get(self.stack.api + "health", timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                await response.read()
        except TimeoutError:
            return timeout
        return time.perf_counter() - started

    async def quiet(self, session: aiohttp.ClientSession, usual_s: float) -> bool:
        """Wait until /health answers about as fast as before the run: requests given up on in the last
        level are done with. False when it did not within ``--quiet-timeout``."""
        deadline = time.monotonic() + self.args.quiet_timeout
        while (left := deadline - time.monotonic()) > 0:
            if await self.health_s(session, left) <= max(0.2, 2 * usual_s):
                return True
        return False

    async def level(self, session: aiohttp.ClientSession, operation: str, clients: int, pid: int) -> Level:
        result = Level(clients)
        timeout = aiohttp.ClientTimeout(total=self.args.seconds + self.args.drain)

        async def client() -> None:
            while time.perf_counter() < stop_at:
                method, path, body, expect = self.request(operation)
                started = time.perf_counter()
                try:
                    async with session.request(
                        method, self.stack.api + path, json=body, headers=self.headers, timeout=timeout
                    ) as response:
                        data = await response.read()
                        status = response.status
                except asyncio.CancelledError:
                    result.unanswered.append(time.perf_counter() - started)
                    raise
                except (aiohttp.ClientError, TimeoutError) as e:
                    result.errors += 1
                    result.first_error = result.first_error or f"{type(e).__name__}: {e}"
                    continue
                if status != expect:
                    result.errors += 1
                    result.first_error = result.first_error or f"{method} {path}: {status} {data[:200]!r}"
                    continue
                result.latencies.append(time.perf_counter() - started)
                last_answer[0] = time.perf_counter()
                if operation == "list" and result.items is None:
                    result.items = len(json.loads(data)["gprs"])

        with result.counting_cpu(pid):
            started = time.perf_counter()
            stop_at, last_answer = started + self.args.seconds, [started]
            tasks = [asyncio.ensure_future(client()) for _ in range(clients)]
            # In flight at the end: answers within --drain count, the rest are given up on.
            _, pending = await asyncio.wait(tasks, timeout=self.args.seconds + self.args.drain)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            result.wall_s = (time.perf_counter() if pending else last_answer[0]) - started
        return result

    async def run(self, operations: tuple[str, ...]) -> dict[str, list[dict]]:
        pid = self.stack.service_pid()
        levels: dict[str, list[dict]] = {}
        connector = aiohttp.TCPConnector(limit=max(self.args.clients) + 1)
        async with aiohttp.ClientSession(connector=connector) as session:
            # A service that has run a while has planned: the first plan of the preloaded store is not measured.
            async with session.get(self.stack.api + "queue", headers=self.headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"GET queue answered {response.status} before the run")
            usual_s = statistics.median([await self.health_s(session) for _ in range(3)])
            log(f"  /health answers in {1000 * usual_s:.0f} ms before the run")
            for operation in operations:
                levels[operation] = []
                for clients in self.args.clients:
                    quiet = await self.quiet(session, usual_s)
                    result = await self.level(session, operation, clients, pid)
                    result.quiet = quiet
                    figures = result.figures()
                    levels[operation].append(figures)
                    shown = " ".join(f"{k}={v}" for k, v in figures.items() if k != "clients")
                    log(f"  {operation:<8} {clients:>3} clients: {shown}")
        if self.stack.service_pid() != pid:
            raise RuntimeError(f"the service restarted during the run (pid {pid} is gone):\n{self.stack.log_tail()}")
        return levels


# One database


def postgres_database(server_url: str) -> tuple[str, str]:
    """Create a database on the server; (its name, its URL)."""
    name = f"egs_bench_{secrets.token_hex(4)}"
    url = make_url(server_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, url.set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(server_url: str, name: str) -> None:
    url = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench_database(kind: str, args) -> dict:
    work = tempfile.mkdtemp(prefix=f"egs-bench-{kind}-")
    pg_name = None
    try:
        if kind == "postgresql":
            pg_name, db_url = postgres_database(args.postgres_url)
        else:
            db_url = f"sqlite:///{work}/egs.sqlite"
        inventory = os.path.join(work, "inventory.yaml")
        write_inventory(inventory, args.nodes)
        data_dir = os.path.join(work, "data")
        os.makedirs(data_dir)
        stack = Stack(data_dir, db_url, inventory, admin_password=secrets.token_urlsafe(12))
        slices = [f"team-{i:02d}" for i in range(args.slices)]
        try:
            log(f"{kind}: egs-hub up with {args.nodes} nodes x 8 H100; slices and tokens through the API")
            stack.start(args.start_timeout)
            token = set_up_slices(stack, slices)
        finally:
            stack.stop()
        log(f"{kind}: writing {args.preload} queued GPRs into the store (service down)")
        started = time.perf_counter()
        upgrade(make_engine(db_url))
        gpr_ids = preload(db_url, slices, args)
        preload_s = time.perf_counter() - started
        levels, peaks = {}, []
        for operation in args.operations:
            # A fresh service per operation: one that could not keep up with the last operation's
            # requests would still be answering them (a quiet wait bounds that only within one).
            try:
                log(f"{kind}: egs-hub up again; measuring {operation} at {args.clients} clients")
                stack.start(args.start_timeout)
                pid = stack.service_pid()
                levels |= asyncio.run(Bench(stack, token, slices, gpr_ids, args).run((operation,)))
                peaks.append(memory_mb(pid)["VmHWM"])
            finally:
                stack.stop()
        reference = bench_reference()
        queued = count_queued(db_url)
    finally:
        if pg_name is not None:
            drop_postgres_database(args.postgres_url, pg_name)
        if args.keep:
            log(f"{kind}: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return summarize(levels, args) | {
        "service_rss_mb": max(peaks),
        "nodes": args.nodes,
        "gpus": args.nodes * 8,
        "preloaded": args.preload,
        "preload": "store functions, service down",
        "preload_s": round(preload_s, 1),
        "queued_at_end": queued,
        "reference_loop_s": round(reference, 3),
        "levels": levels,
    }


def count_queued(db_url: str) -> int:
    engine = make_engine(db_url)
    with make_sessions(engine)() as session:
        queued = len(queries.gpr_rows(session, statuses=["queued"]))
    engine.dispose()
    return queued


def summarize(levels: dict[str, list[dict]], args) -> dict:
    """The headline figures: each operation at ``--target-clients`` (else at the most clients measured)."""
    at = args.target_clients if args.target_clients in args.clients else max(args.clients)
    figures: dict = {"at_clients": at}
    for operation, rows in levels.items():
        row = next(r for r in rows if r["clients"] == at)
        for key in ("rps", "p50_ms", "p99_ms", "errors"):
            figures[f"{operation}_{key}"] = row[key]
    return figures


def met(value: float, target: float, kind: str) -> bool:
    return value >= target if kind == "min" else value <= target


def print_report(results: dict) -> None:
    for kind, figures in results.items():
        if kind == "targets":
            continue
        print(
            f"\n{kind}: {figures['nodes']} nodes x 8 GPUs, {figures['preloaded']} GPRs preloaded "
            f"({figures['preload']}, {figures['preload_s']} s); figures at {figures['at_clients']} clients"
        )
        print(f"  {'figure':<18} {'measured':>10} {'target':>10}  ")
        for key, (target, kind_of) in TARGETS.items():
            value = figures.get(key)
            if value is None:  # an operation not measured (--operations)
                continue
            verdict = "met" if met(value, target, kind_of) else "NOT met"
            sign = ">=" if kind_of == "min" else "<="
            print(f"  {key:<18} {value:>10} {sign + ' ' + str(target):>10}  {verdict}")
        for key in ("queue_p99_ms", "health_rps", "health_p99_ms"):
            if key in figures:
                print(f"  {key:<18} {figures[key]:>10} {'-':>10}")
        print(f"  {'reference_loop_s':<18} {figures['reference_loop_s']:>10} {'-':>10}")
        print(
            f"\n  {'operation':<9} {'clients':>7} {'requests':>8} {'given up':>8} {'errors':>6} {'rps':>9} "
            f"{'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'svc cpu':>7} {'client':>6} {'machine':>7}"
        )
        for operation, rows in figures["levels"].items():
            for r in rows:
                print(
                    f"  {operation:<9} {r['clients']:>7} {r['requests']:>8} {r['unanswered']:>8} {r['errors']:>6} "
                    f"{r['rps']:>9} {r['p50_ms']:>9} {r['p99_ms']:>9} {r['max_ms']:>9} {r['service_cpu']:>7} "
                    f"{r['client_cpu']:>6} {r['machine_cpu']:>7}"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "postgresql"], default=["sqlite", "postgresql"])
    parser.add_argument("--nodes", type=int, default=2000, help="declared nodes of 8 H100 (default 2000)")
    parser.add_argument("--preload", type=int, default=10000, help="queued GPRs written before the run (10000)")
    parser.add_argument(
        "--provisioned", type=int, default=None, help="nodes held by a provisioned GPR each (default: all)"
    )
    parser.add_argument(
        "--start-after-days",
        type=float,
        default=0.0,
        help="queued GPRs start after a random time up to this many days ahead (default 0: none)",
    )
    parser.add_argument("--slices", type=int, default=10, help="slices the GPRs are spread over (10)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64], help="concurrency levels")
    parser.add_argument("--target-clients", type=int, default=32, help="the level the targets apply at (32)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per operation and level (10)")
    parser.add_argument(
        "--drain", type=float, default=20.0, help="seconds the requests in flight at a level's end may take (20)"
    )
    parser.add_argument(
        "--quiet-timeout", type=float, default=120.0, help="longest wait for the service to be quiet (120)"
    )
    parser.add_argument("--start-timeout", type=float, default=180.0, help="longest wait for egs-hub up (180)")
    parser.add_argument("--list-query", default="limit=100", help="query of the list request (limit=100)")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument(
        "--operations", nargs="+", choices=OPERATIONS, default=list(OPERATIONS), help="what to measure (all)"
    )
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--keep", action="store_true", help="keep the data directories (hub.log)")
    args = parser.parse_args()
    args.clients = sorted(set(args.clients))
    if args.provisioned is None:
        args.provisioned = args.nodes

    results: dict = {"targets": {key: {"target": t, "kind": k} for key, (t, k) in TARGETS.items()}}
    for kind in args.databases:
        results[kind] = bench_database(kind, args)
        if args.json:  # after each database, so that a long run's first half is kept
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
