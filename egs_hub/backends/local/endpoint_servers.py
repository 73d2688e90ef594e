"""The servers of inference endpoints' replicas on this host: one process per replica, on the port the
service picked, with its GPR's GPUs in ``CUDA_VISIBLE_DEVICES`` (service/endpoints.py says which).

A server is *starting* until its health path answers 200, then *ready*; a ready one's metrics path
(where it has one) is read at each check for the requests waiting in its queue. One that exits is started
again after a delay that doubles (1 s to ``MAX_DELAY``); one that exited FAILED_STARTS times in a row
before it was ready is *failed* (and still started again: a model download may come back). Its output
goes to a log file, whose last lines say why it exited. Each server runs in a session of its own,
stopped with its children (SIGTERM, then SIGKILL after ``STOP_GRACE``); it gets SIGTERM when the
service dies (Linux), so that no server outlives the service that knows its port.

A server starts the way its member's JupyterLab servers do (system_users.py): as the system account
of the hub user who made the endpoint (isolation ``system-users``), in that account's home, or (isolation
``none``) as the service's OS user in the member's home. Its environment is the endpoint's ``env`` and
the EGS variables over a few of the service's own (``PASSED``), with the member's HOME, USER, LOGNAME
and SHELL: never the service's tokens, identity or database URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from tornado.httpclient import AsyncHTTPClient

from ...core.endpoints import FAILED_STARTS, queued_in
from ...ports import free_port
from ...system_users import AccountError, Isolation, MemberProcess

log = logging.getLogger(__name__)

PASSED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
MAX_DELAY = 30.0
STOP_GRACE = 10.0
HEALTH_TIMEOUT = 2.0
LOG_TAIL = 2000  # characters of a server's log said when it exits
PR_SET_PDEATHSIG = 1
Key = tuple[int, int]  # (endpoint id, GPR id)


def _die_with_service() -> None:
    """In the server's process, before it runs (and after it took its member's uid, which would clear
    the setting): SIGTERM when the service dies."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def server_environment(env: Mapping[str, str], egs: Mapping[str, str]) -> dict[str, str]:
    passed = {name: os.environ[name] for name in PASSED if name in os.environ}
    return {**passed, **env, **egs}


@dataclass
class Server:
    """One replica's server. ``exits``: times it exited since it was last ready."""

    argv: list[str]
    env: dict[str, str]
    member: str  # the hub user it runs for (the endpoint's created_by)
    port: int
    health_path: str
    metrics_path: str | None
    log_path: str
    process: asyncio.subprocess.Process | None = None
    state: str = "starting"
    exits: int = 0
    message: str = ""
    delay: float = 0.0
    next_start: float = 0.0
    in_flight: int = field(default=0)
    queued: int = 0  # requests waiting in its own queue, as its metrics said at the last check

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class EndpointServers:
    """The replicas' servers on this host, by (endpoint id, GPR id), each run as ``isolation`` says for its
    member; their logs under ``log_dir`` (the service's, which the servers need not read: each gets its
    log as its output)."""

    def __init__(self, log_dir: str, isolation: Isolation):
        self.log_dir = log_dir
        self.isolation = isolation
        self.servers: dict[Key, Server] = {}

    def get(self, key: Key) -> Server | None:
        return self.servers.get(key)

    async def ensure(
        self, key: Key, argv_of, env: dict[str, str], paths: tuple[str, str | None], log_name: str, member: str
    ) -> Server:
        """The server of ``key``, started now for hub user ``member`` if it is not known; started again
        when its command (``argv_of(port)``), environment, ``paths`` (health, metrics) or member changed."""
        server = self.servers.get(key)
        if server is not None and (server.argv, server.env, server.health_path, server.metrics_path, server.member) != (
            argv_of(server.port),
            env,
            *paths,
            member,
        ):
            await self.stop(key)
            server = None
        if server is None:
            port = free_port()
            os.makedirs(self.log_dir, mode=0o700, exist_ok=True)
            log_path = os.path.join(self.log_dir, f"{log_name}.log")
            server = Server(argv_of(port), env, member, port, *paths, log_path)
            self.servers[key] = server
            await self._start(server)
        return server

    async def _start(self, server: Server) -> None:
        try:
            # each start: an admin may have removed the account meanwhile (it is made again)
            how: MemberProcess = await asyncio.to_thread(self.isolation.member_process, server.member)
        except (AccountError, OSError) as e:
            server.process = None
            self._exited(server, f"could not start it for {server.member}: {e}")
            return
        env = {**server.env, **how.environment(), "PORT": str(server.port)}
        with open(server.log_path, "ab") as out:
            try:
                server.process = await asyncio.create_subprocess_exec(
                    *server.argv,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_service,
                    **how.popen_options(),
                )
            except OSError as e:
                server.process = None
                self._exited(server, f"could not start {server.argv[0]!r} as {how.user}: {e.strerror or e}")
                return
        server.state = "failed" if server.exits >= FAILED_STARTS else "starting"
        log.info("started %s (pid %d) as %s on port %d", server.argv[0], server.process.pid, how.user, server.port)

    def _exited(self, server: Server, why: str) -> None:
        server.exits += 1
        server.delay = min(MAX_DELAY, max(1.0, server.delay * 2))
        server.next_start = time.monotonic() + server.delay
        server.state = "failed" if server.exits >= FAILED_STARTS else "starting"
        server.message = f"{why}; starting it again in {server.delay:.0f} s{self._tail(server.log_path)}"
        log.warning("endpoint server %s: %s", server.argv[0], server.message)

    @staticmethod
    def _tail(path: str) -> str:
        with contextlib.suppress(OSError), open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - LOG_TAIL))
            text = f.read().decode(errors="replace").strip()
            if text:
                return f". Its log ends:\n{text}"
        return ""

    async def check(self) -> None:
        """Notice servers that exited (and start them again when their delay is over), and ask the
        starting ones' health paths whether they are ready."""
        client = AsyncHTTPClient()
        for server in list(self.servers.values()):
            process = server.process
            if process is not None and process.returncode is not None:
                server.process = None
                self._exited(server, f"{server.argv[0]} exited with status {process.returncode}")
            if server.process is None:
                if time.monotonic() >= server.next_start:
                    await self._start(server)
                continue
            if server.state == "ready":
                await self._read_queue(client, server)
                continue
            try:
                answer = await client.fetch(
                    server.url + server.health_path, raise_error=False, request_timeout=HEALTH_TIMEOUT
                )
            except OSError:  # not listening yet
                continue
            if answer.code == 200:
                server.state, server.exits, server.delay, server.message = "ready", 0, 0.0, ""

    @staticmethod
    async def _read_queue(client: AsyncHTTPClient, server: Server) -> None:
        """The requests waiting in a ready server's queue, from its metrics (0 when it does not say)."""
        if server.metrics_path is None:
            return
        try:
            answer = await client.fetch(
                server.url + server.metrics_path, raise_error=False, request_timeout=HEALTH_TIMEOUT
            )
        except OSError:
            return
        server.queued = queued_in(answer.body.decode(errors="replace")) if answer.code == 200 else 0

    async def stop(self, key: Key) -> None:
        server = self.servers.pop(key, None)
        if server is not None and server.process is not None:
            await self._terminate(server.process)

    async def stop_all(self) -> None:
        await asyncio.gather(*(self.stop(key) for key in list(self.servers)))

    @staticmethod
    async def _terminate(process: asyncio.subprocess.Process) -> None:
        """SIGTERM to the server's session, SIGKILL after STOP_GRACE."""
        for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), wait)
                return
            except TimeoutError:
                continue
