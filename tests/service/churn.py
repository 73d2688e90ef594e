"""Churn: users who submit short GPRs, release and cancel them, edit them and read the queue and schedule,
as fast as they get answers, against a real egs-hub; and a watch on the EGS service process.

``python -m tests.service.churn SECONDS [sqlite|postgresql]`` runs it against a fresh
egs-hub and prints what happened (the soak test, test_churn.py, runs it in CI).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from egs_hub.embedded import free_port

from ..conftest import DEFAULT_POSTGRES_URL, PostgresDatabases, new_db_url
from .hub import Hub, start_hub, stop_hub

SLICES = ("churn-a", "churn-b", "churn-c", "churn-d")
MEMBERS = int(os.environ.get("EGS_CHURN_MEMBERS", "2"))  # per slice: each is one client in a loop
GATEWAY_ERRORS = {502, 503, 504}
OUTSTANDING = 8  # a user ends their oldest GPR before submitting more, so the queue stays bounded
STEP_SECONDS = 0.05  # a user takes a step at most this often (a step is one or two requests)


@dataclass
class Tally:
    """What the churn saw: answers by request and status, service restarts, 5xx bodies."""

    answers: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)  # 5xx from the service itself
    gateway: int = 0  # 502-504 from the proxy: the service was not there
    service_pids: list[int] = field(default_factory=list)

    def saw(self, what: str, response: httpx.Response) -> None:
        self.answers[f"{what} {response.status_code}"] += 1
        if response.status_code in GATEWAY_ERRORS:
            self.gateway += 1
        elif response.status_code >= 500:
            self.errors.append(f"{what} {response.status_code}: {response.text[:300]}")

    @property
    def restarts(self) -> int:
        return len(self.service_pids) - 1


class User:
    """One member of a slice, doing what impatient users do."""

    def __init__(self, api: str, token: str, slice_name: str, rng: random.Random, tally: Tally):
        self.api, self.slice, self.rng, self.tally = api, slice_name, rng, tally
        self.http = httpx.AsyncClient(headers={"Authorization": f"token {token}"}, timeout=60)
        self.mine: list[int] = []

    async def call(self, what: str, method: str, path: str, body: object = None) -> httpx.Response | None:
        try:
            response = await self.http.request(method, self.api + path, json=body)
        except httpx.HTTPError:
            self.tally.answers[f"{what} no answer"] += 1
            return None
        self.tally.saw(what, response)
        return response

    async def step(self) -> None:
        roll = self.rng.random()
        if len(self.mine) >= OUTSTANDING:
            await self.end(self.mine.pop(0))
        elif roll < 0.45 or not self.mine:
            body = {
                "slice": self.slice,
                "gpus": self.rng.choice([1, 1, 2, 4, 8]),
                "duration": self.rng.choice([1, 2, 3, 5]),
            }
            response = await self.call("submit", "POST", "gprs", body)
            if response is not None and response.status_code == 201:
                self.mine.append(response.json()["id"])
        elif roll < 0.6:
            await self.end(self.mine.pop(self.rng.randrange(len(self.mine))))
        elif roll < 0.7:
            gpr_id = self.rng.choice(self.mine)
            await self.call("edit", "PATCH", f"gprs/{gpr_id}", {"duration": self.rng.choice([2, 4])})
        elif roll < 0.8:
            await self.call("list", "GET", f"gprs?slice={self.slice}&limit=50")
        elif roll < 0.9:
            await self.call("queue", "GET", "queue?limit=50")
        elif roll < 0.95:
            await self.call("wait-times", "POST", "wait-times", {"slice": self.slice, "gpus": 2, "duration": 60})
        else:
            await self.call("schedule", "GET", "inventory/schedule")

    async def end(self, gpr_id: int) -> None:
        """Cancel a waiting GPR, release one holding GPUs (whichever it is now)."""
        response = await self.call("get", "GET", f"gprs/{gpr_id}")
        if response is None or response.status_code != 200:
            return
        status = response.json()["status"]
        if status in ("pending-approval", "queued"):
            await self.call("cancel", "DELETE", f"gprs/{gpr_id}")
        elif status in ("provisioning", "provisioned"):
            await self.call("release", "POST", f"gprs/{gpr_id}/release", {"reason": "done"})

    async def run(self, until: float) -> None:
        try:
            while time.monotonic() < until:
                paced = asyncio.ensure_future(asyncio.sleep(STEP_SECONDS))
                await self.step()
                await paced
        finally:
            await self.http.aclose()


async def watch_service(hub: Hub, tally: Tally, until: float) -> None:
    """Note every EGS service process seen, so a crash and its restart show."""
    while time.monotonic() < until:
        try:
            pid = hub.service_pid()
        except AssertionError:
            pid = None
        if pid is not None and (not tally.service_pids or tally.service_pids[-1] != pid):
            tally.service_pids.append(pid)
        await asyncio.sleep(0.2)


def setup_slices(hub: Hub) -> list[tuple[str, str]]:
    """The slices the churn uses, with their members: (slice, member's token) per user."""
    admin = hub.admin()
    users = []
    for slice_name in SLICES:
        members = [f"{slice_name}-u{i}" for i in range(MEMBERS)]
        admin.post("slices", {"name": slice_name, "members": members}, expect=201)
        users += [(slice_name, hub.user_token(member)) for member in members]
    return users


async def churn(hub: Hub, seconds: float, seed: int = 25) -> Tally:
    tally, rng = Tally(), random.Random(seed)
    until = time.monotonic() + seconds
    users = [User(hub.api, token, s, random.Random(rng.random()), tally) for s, token in setup_slices(hub)]
    await asyncio.gather(watch_service(hub, tally, until), *(user.run(until) for user in users))
    return tally


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60
    database = sys.argv[2] if len(sys.argv) > 2 else "sqlite"
    postgres = PostgresDatabases(os.environ.get("EGS_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    with tempfile.TemporaryDirectory() as data_dir:
        hub = start_hub(data_dir, new_db_url(database, data_dir, postgres), free_port())
        try:
            tally = asyncio.run(churn(hub, seconds))
        finally:
            log = hub.log()
            stop_hub(hub)
            postgres.drop_all()
    for key, count in sorted(tally.answers.items()):
        print(f"{key:30} {count}")
    print(f"service processes: {tally.service_pids} (restarts: {tally.restarts}); proxy 5xx: {tally.gateway}")
    for error in tally.errors[:20]:
        print(error)
    crashes = [line for line in log.splitlines() if "Fatal Python error" in line or "the EGS service (pid" in line]
    print("\n".join(crashes[:20]))


if __name__ == "__main__":
    main()
