"""Two replicas of the service on one database: one leads, the other forwards to it and takes over
within 15 s of the leader's ``kill -9``, with nothing acknowledged lost, nothing stored twice and no
GPU bound to two GPRs.

Replica A listens where the hub's proxy sends /services/egs/, replica B on a port of its own; the
clients submit through the standby (the proxy when A stands by, B's port when B does), as a
Kubernetes Service would send them to either pod. Each cycle kills the leader at a seeded random
moment of the load, waits for the standby to lead (its /health says so and a submit through it is
answered 201), starts the killed replica again (it stands by) and checks the database as the crash
test does (test_crash.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from egs_hub.embedded import free_port

from ..conftest import DATABASES, new_db_url
from .hub import UNMANAGED_SERVICE_CONFIG, start_hub, stop_hub, wait_for
from .test_crash import Load, Outage, Service, check_database, overdue, submitting

SEED = 6
CYCLES = 4
CLIENTS = 2
TAKEOVER_SECONDS = 15.0


@dataclass
class Replica:
    name: str
    service: Service
    api: str  # where a client reaches it
    url: str  # where it serves, as it tells the other replica when it leads

    async def health(self) -> dict | None:
        try:
            async with httpx.AsyncClient(timeout=2) as http:
                response = await http.get(self.api + "health")
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    async def until(self, role: str, timeout: float) -> None:
        """Return once its /health says it has ``role``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.service.process.poll() is None, f"replica {self.name} exited:\n{self.service.log()}"
            health = await self.health()
            if health is not None and health.get("role") == role:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"replica {self.name} was not {role} within {timeout:.0f} s:\n{self.service.log()}")


@pytest.fixture(params=DATABASES)
def two_replicas(request, tmp_path, postgres):
    db_url = new_db_url(request.param, tmp_path, postgres)
    hub = start_hub(str(tmp_path), db_url, free_port(), config=UNMANAGED_SERVICE_CONFIG)
    with open(os.path.join(hub.data_dir, "egs_service.json")) as f:
        a_url = json.load(f)["environment"]["JUPYTERHUB_SERVICE_URL"]
    b_url = f"http://127.0.0.1:{free_port()}"
    a = Replica("A", Service(hub, str(tmp_path / "a.log")), hub.api, a_url)
    moved = {"JUPYTERHUB_SERVICE_URL": b_url, "EGS_ADVERTISE_URL": b_url}
    b = Replica("B", Service(hub, str(tmp_path / "b.log"), overrides=moved), f"{b_url}/services/egs/api/v1/", b_url)
    try:
        yield hub, a, b, db_url
    finally:
        a.service.stop()
        b.service.stop()
        stop_hub(hub)


async def test_the_standby_takes_over_within_15_s_of_the_leaders_kill_losing_nothing(two_replicas):
    hub, a, b, db_url = two_replicas
    rng = random.Random(SEED)
    a.service.start()
    await a.until("leader", 60)
    b.service.start()
    await b.until("standby", 60)

    alice = f"alice-{secrets.token_hex(3)}"
    slice_name = f"replicas-{secrets.token_hex(3)}"
    hub.admin().post("slices", {"name": slice_name, "members": [alice]}, expect=201)
    load = Load(b.api, hub.user_token(alice), slice_name, rng)
    leader, standby = a, b
    outages: list[Outage] = []
    takeovers: list[float] = []
    async with submitting(load, CLIENTS):
        for _ in range(CYCLES):
            assert (await standby.health())["leader"] == leader.url
            load.api = standby.api  # forwarded to the leader
            load.go.set()
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            killed, killed_at = time.monotonic(), datetime.now(UTC)
            leader.service.kill()
            await standby.until("leader", TAKEOVER_SECONDS)
            answered = len(load.acked)
            while len(load.acked) == answered:  # a submit through the new leader is answered
                assert time.monotonic() - killed < TAKEOVER_SECONDS, "no submit was answered by the new leader in time"
                await asyncio.sleep(0.05)
            takeovers.append(time.monotonic() - killed)
            outages.append(Outage(killed_at, datetime.now(UTC)))
            await load.pause()
            leader.service.start()
            await leader.until("standby", 60)
            wait_for(lambda: not overdue(db_url, datetime.now(UTC)), 10, "overdue windows to end")
            check_database(db_url, load, outages)
            leader, standby = standby, leader

    rows = check_database(db_url, load, outages)
    assert len(takeovers) == CYCLES and max(takeovers) < TAKEOVER_SECONDS, takeovers
    assert len(load.acked) >= 10 * CYCLES, f"only {len(load.acked)} submits were acknowledged"
    assert not load.refused, f"submits refused: {load.refused[:5]}"
    assert any(r.status == "complete" for r in rows.values()), "no GPR was provisioned and ended during the test"
