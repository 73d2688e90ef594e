"""Killing the control plane (SIGKILL) under a steady submit load loses, duplicates and double-books nothing.

A few clients keep submitting GPRs (each with a unique name) through the hub's proxy
while the test kills the EGS service at seeded random moments, restarts it at once and,
after each restart, checks through the API and the database:

- every GPR acknowledged with 201 is there exactly once (by name, with the id it was
  given); a submit cut off by the kill may or may not be there, but never twice;
- no GPU was ever held by two GPRs at once (the allocations' windows on each GPU do not
  overlap) and every GPU bound now is held by a GPR whose window has not ended;
- nothing was held past its window: a GPR ended within GRACE of its window's end, or of
  the service's return when its window ended while the service was down;
- every estimate a client saw before the kill (a submit's answer, the slice's listing
  just before the kill) is honoured: the GPR starts (or, still queued, is estimated to
  start) no later than that plus the outage (the windows due meanwhile started or ended
  when the service came back) and GRACE; or an event explains the change (capacity
  lost, work put ahead of it).

The service runs unmanaged (hub_unmanaged_service.py) so that it is back within seconds,
not at JupyterHub's next poll of a managed service. The inventory (two 8-GPU nodes and a
4-GPU node) is small and the windows seconds long, so GPRs start and end during the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select

from egs_hub.embedded import free_port
from egs_hub.store.db import make_engine, make_sessions
from egs_hub.store.models import Allocation, Binding, EventRow, GPRRow, PromiseRow

from ..conftest import DATABASES, new_db_url
from .hub import UNMANAGED_SERVICE_CONFIG, Hub, start_hub, stop_hub, wait_for

SEED = 18
CYCLES = 6
CLIENTS = 3
GRACE = timedelta(seconds=3)  # reconcile passes every 0.2 s (hub_test_config.py); a loaded 2-core machine
# Windows of seconds, so that GPRs start and end during the test, but long beside the lag of a
# reconcile pass: every window that ends before a queued GPR starts may add that lag to its start.
DURATIONS = [6, 8, 10]
LAG_PER_WINDOW = timedelta(seconds=0.5)
HOLDING = ("provisioning", "provisioned", "releasing")
GATEWAY_ERRORS = {502, 503, 504}
# Events that may move a queued GPR's estimate later: capacity lost, or work put ahead of it.
EXPLAINING = {"node-lost", "gpu-lost", "priority-changed", "edited", "approved", "requeued", "moved"}


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


@dataclass
class Service:
    """The EGS service process, started by the test the way JupyterHub would start it."""

    hub: Hub
    log_path: str
    process: subprocess.Popen | None = None
    overrides: dict[str, str] = field(default_factory=dict)  # environment over the hub's

    def start(self) -> None:
        with open(os.path.join(self.hub.data_dir, "egs_service.json")) as f:
            launch = json.load(f)
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                launch["command"],
                env={**os.environ, **launch["environment"], **self.overrides},
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.hub.data_dir,
            )

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Outage:
    killed: datetime
    back: datetime


@dataclass
class Load:
    """Submitting clients; they submit while ``go`` is set."""

    api: str
    token: str
    slice: str
    rng: random.Random
    go: asyncio.Event = field(default_factory=asyncio.Event)
    stop: bool = False
    acked: dict[str, int] = field(default_factory=dict)  # submits answered 201: name -> GPR id
    # The last estimate a client saw of each queued GPR: id -> (estimated start, when it was seen)
    seen: dict[int, tuple[datetime, datetime]] = field(default_factory=dict)
    cut_off: list[str] = field(default_factory=list)  # submits the kill cut off: no answer, or the proxy's
    refused: list[str] = field(default_factory=list)  # answered, but not 201
    in_flight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # set while nothing is in flight

    def body(self, name: str) -> dict:
        return {
            "slice": self.slice,
            "name": name,
            "gpus": self.rng.choice([1, 2, 4, 8]),
            "duration": self.rng.choice(DURATIONS),
        }

    async def client(self, number: int) -> None:
        headers = {"Authorization": f"token {self.token}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            for seq in range(100_000):
                await self.go.wait()
                if self.stop:
                    return
                name = f"c{number}-{seq}"
                self.in_flight += 1
                self.idle.clear()
                try:
                    response = await http.post(self.api + "gprs", json=self.body(name))
                except httpx.HTTPError:
                    self.cut_off.append(name)
                    continue
                finally:
                    self.in_flight -= 1
                    if not self.in_flight:
                        self.idle.set()
                if response.status_code in GATEWAY_ERRORS:  # the proxy's answer: the service was gone
                    self.cut_off.append(name)
                    continue
                if response.status_code != 201:
                    self.refused.append(f"{name}: {response.status_code} {response.text[:200]}")
                    continue
                gpr = response.json()
                self.observe(gpr)
                self.acked[name] = gpr["id"]

    def observe(self, gpr: dict) -> None:
        if gpr["status"] == "queued" and gpr["estimated_start"]:
            self.seen[gpr["id"]] = (parse(gpr["estimated_start"]), datetime.now(UTC))

    async def look(self) -> None:
        """List the slice's GPRs, as a user watching the queue would, and note their estimates."""
        async with httpx.AsyncClient(headers={"Authorization": f"token {self.token}"}, timeout=30) as http:
            response = await http.get(self.api + "gprs", params={"slice": self.slice})
        assert response.status_code == 200, response.text
        for gpr in response.json()["gprs"]:
            self.observe(gpr)

    async def pause(self) -> None:
        """Stop sending, and wait for the answers of what was sent."""
        self.go.clear()
        if self.in_flight:
            try:
                await asyncio.wait_for(self.idle.wait(), 40)
            except TimeoutError:
                raise AssertionError(f"{self.in_flight} submit(s) got no answer within 40 s") from None


@contextlib.asynccontextmanager
async def submitting(load: Load, clients: int) -> AsyncIterator[None]:
    """``clients`` of ``load`` submitting (while ``load.go`` is set) for the block; after it they stop
    and finish what they sent (within 40 s), or, when it raised, are cancelled."""
    tasks = [asyncio.ensure_future(load.client(i)) for i in range(clients)]
    try:
        yield
        load.stop = True
        load.go.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 40)
    finally:
        load.stop = True
        load.go.set()
        for task in tasks:
            task.cancel()


@pytest.fixture(params=DATABASES)
def crash_hub(request, tmp_path, postgres) -> Iterator[tuple[Hub, Service, str]]:
    db_url = new_db_url(request.param, tmp_path, postgres)
    hub = start_hub(str(tmp_path), db_url, free_port(), config=UNMANAGED_SERVICE_CONFIG)
    service = Service(hub, str(tmp_path / "service.log"))
    try:
        yield hub, service, db_url
    finally:
        service.stop()
        stop_hub(hub)


async def until_back(hub: Hub, service: Service, timeout: float = 60) -> datetime:
    """When the service answers /health through the proxy again."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as http:
        while time.monotonic() < deadline:
            assert service.process.poll() is None, f"the service exited:\n{service.log()}"
            try:
                if (await http.get(hub.api + "health")).status_code == 200:
                    return datetime.now(UTC)
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"the service did not answer /health within {timeout:.0f} s")


def due(estimate: datetime, outages: list[Outage]) -> datetime:
    """When a start estimated for ``estimate`` is due: at the service's return if it fell in an outage."""
    for outage in outages:
        if outage.killed - GRACE <= estimate <= outage.back:
            return outage.back
    return estimate


@dataclass
class Store:
    rows: dict[int, GPRRow]
    allocations: list[tuple[str, int]]  # (GPU, GPR) of every GPR that was given GPUs
    bindings: list[tuple[str, int]]  # (GPU, GPR) bound now
    submitted: set[int]  # GPRs with a 'submitted' event


def read_store(db_url: str) -> Store:
    """The store as of one moment, while the service may be writing: read until no event was
    written during the read (every change of a GPR, its GPUs and its window is one)."""
    engine = make_engine(db_url)
    try:
        for _ in range(50):
            with make_sessions(engine)() as session:
                before = session.scalar(select(func.max(EventRow.id)))
                rows = {r.id: r for r in session.scalars(select(GPRRow))}
                allocations = [tuple(a) for a in session.execute(select(Allocation.gpu_uuid, Allocation.gpr_id))]
                bindings = [tuple(b) for b in session.execute(select(Binding.gpu_uuid, Binding.gpr_id))]
                submitted = set(session.scalars(select(EventRow.gpr_id).where(EventRow.kind == "submitted")))
                session.expunge_all()
            with make_sessions(engine)() as session:
                if session.scalar(select(func.max(EventRow.id))) == before:
                    return Store(rows, allocations, bindings, submitted)
    finally:
        engine.dispose()
    raise AssertionError("the store changed during every one of 50 reads")


def check_exactly_once(store: Store, acked: dict[str, int]) -> None:
    """Every GPR stored once per name; every acknowledged one there, with its id and its 'submitted' event."""
    by_name: dict[str, list[int]] = {}
    for row in store.rows.values():
        by_name.setdefault(row.name, []).append(row.id)
    twice = {name: ids for name, ids in by_name.items() if len(ids) > 1}
    assert not twice, f"submitted once, stored more than once: {twice}"
    for name, gpr_id in acked.items():
        assert by_name.get(name) == [gpr_id], f"GPR {name} was acknowledged as {gpr_id}, stored as {by_name.get(name)}"
        assert gpr_id in store.submitted, f"GPR {gpr_id} has no 'submitted' event"


def check_held(store: Store, outages: list[Outage], gpr_ids: set[int] | None = None) -> None:
    """No GPU held by two GPRs at once, bound GPUs held by GPRs that hold GPUs, and (of ``gpr_ids``,
    default all) nothing held past its window but for the service's outages."""
    rows = store.rows
    # Each GPU's holders, one after the other: [window start, end), the end being when it gave the GPUs back.
    held: dict[str, list[tuple[datetime, datetime, int]]] = {}
    for uuid, gpr_id in store.allocations:
        row = rows[gpr_id]
        assert row.window_start is not None, f"GPR {gpr_id} has GPUs but no window"
        held.setdefault(uuid, []).append((row.window_start, row.ended_at or datetime.max.replace(tzinfo=UTC), gpr_id))
    for uuid, windows in held.items():
        windows.sort()
        for (_, end, first), (start, _, second) in itertools.pairwise(windows):
            assert start >= end, f"GPU {uuid} held by GPRs {first} and {second} at once (from {start} to {end})"

    for uuid, gpr_id in store.bindings:
        row = rows[gpr_id]
        assert row.status in HOLDING, f"GPU {uuid} is bound to GPR {gpr_id}, which is {row.status}"
    for row in rows.values():
        if row.window_end is None or row.ended_at is None or (gpr_ids is not None and row.id not in gpr_ids):
            continue
        deadline = due(row.window_end, outages) + GRACE
        assert row.ended_at <= deadline, (
            f"GPR {row.id} held its GPUs until {row.ended_at}, past its window's end {row.window_end}"
        )


def check_database(db_url: str, load: Load, outages: list[Outage]) -> dict[int, GPRRow]:
    """Exactly once, no double booking, nothing bound past its window; returns the GPRs by id."""
    store = read_store(db_url)
    check_exactly_once(store, load.acked)
    check_held(store, outages)
    return store.rows


def overdue(db_url: str, now: datetime) -> list[int]:
    """GPRs holding GPUs (bindings) whose window ended more than GRACE ago."""
    engine = make_engine(db_url)
    try:
        with make_sessions(engine)() as session:
            query = select(GPRRow.id).join(Binding, Binding.gpr_id == GPRRow.id).where(GPRRow.window_end < now - GRACE)
            return sorted(set(session.scalars(query)))
    finally:
        engine.dispose()


def saved_promises(db_url: str) -> dict[int, datetime | None]:
    """The promises the service had saved (service/planning.py), by GPR: what a restarted service keeps.
    Read while the service is down. A GPR answered on the last plan and not yet in a plan the reconcile
    loop saved has none."""
    engine = make_engine(db_url)
    try:
        with make_sessions(engine)() as session:
            return {gpr_id: start for gpr_id, start in session.execute(select(PromiseRow.gpr_id, PromiseRow.start))}
    finally:
        engine.dispose()


def starts(gpr: dict) -> datetime:
    """When a GPR started, or is estimated to."""
    return parse(gpr["window_start"] or gpr["estimated_start"])


@dataclass
class Broken:
    """Estimates seen before a kill and not kept, unexplained: of GPRs planned in queue order (a
    failure); and issue 18's known failures, of backfilled ones (estimated to start before a GPR queued
    ahead of it: one slice, one priority, so the queue is by id): those whose saved promise the restart
    did not keep (``lost_gaps``); and, as in test_concurrency, which the restart did not cause: those
    without a saved promise (answered on the last plan and killed before a plan with them was saved),
    and those whose promise had moved later before the kill (a GPR submitted after it took its gap)
    and was kept."""

    in_order: list[str] = field(default_factory=list)
    lost_gaps: list[str] = field(default_factory=list)
    unsaved: list[str] = field(default_factory=list)
    moved_before: list[str] = field(default_factory=list)

    def add(self, other: Broken) -> None:
        self.in_order += other.in_order
        self.lost_gaps += other.lost_gaps
        self.unsaved += other.unsaved
        self.moved_before += other.moved_before


def check_estimates(
    hub: Hub, load: Load, seen: dict[int, tuple[datetime, datetime]], outage: Outage, saved: dict
) -> Broken:
    """Every estimate seen before the kill (``seen``) is honoured, or an event explains why not
    (``Broken``); ``saved``: the promises saved when the service was killed.

    The service was away for the outage: every start after it may be later by that much (the
    windows that were to end or start meanwhile did so when it came back), by GRACE (a
    reconcile pass or two), and by LAG_PER_WINDOW for every window that may end before it
    starts. A GPR estimated to start by then has started by then, and one still queued is
    estimated no later.
    """
    broken = Broken()
    if not seen:
        return broken
    backfilled, latest = set(), datetime.min.replace(tzinfo=UTC)
    for gpr_id in sorted(seen):
        estimate = seen[gpr_id][0]
        if estimate < latest:
            backfilled.add(gpr_id)
        latest = max(latest, estimate)
    listed = {g["id"]: g for g in hub.client(load.token).get_all(f"gprs?slice={load.slice}&limit=1000", "gprs")}
    # Every event since the earliest estimate: capacity lost concerns no slice, so not only the slice's.
    since = min(at for _, at in seen.values()).isoformat().replace("+00:00", "Z")
    events = hub.admin().get("events", params={"since": since, "limit": 5000}, expect=200)["events"]
    assert len(events) < 5000, "too many events to judge the estimates by"
    for gpr_id, (estimate, at) in seen.items():
        windows = (estimate - at) / timedelta(seconds=min(DURATIONS))
        shift = outage.back - outage.killed + GRACE + LAG_PER_WINDOW * max(0.0, windows)
        gpr = listed[gpr_id]
        if gpr["window_start"] is None and gpr["status"] != "queued":
            continue  # cancelled or failed: no start to keep
        start = starts(gpr)
        if start <= estimate + shift:
            continue
        explained = [e for e in events if e["kind"] in EXPLAINING and parse(e["time"]) >= at and e["gpr"] != gpr_id]
        behind = sorted(i for i, g in listed.items() if i > gpr_id and g["status"] == "queued" and starts(g) < start)
        if not explained:
            causes = [e["data"]["cause"] for e in events if e["gpr"] == gpr_id and e["kind"] == "estimate-moved"]
            promise = f"its saved promise {saved[gpr_id]}" if gpr_id in saved else "no saved promise"
            promised = saved.get(gpr_id)
            if gpr_id not in backfilled:
                kind = broken.in_order
            elif gpr_id not in saved:
                kind = broken.unsaved
            elif promised is not None and promised > estimate + GRACE and start <= promised + shift:
                kind = broken.moved_before
            else:
                kind = broken.lost_gaps
            kind.append(
                f"GPR {gpr_id} was estimated at {at} to start at {estimate}; after a {outage.back - outage.killed} "
                f"outage it is {gpr['status']} and starts at {start}, and no event explains it "
                f"(GPRs submitted after it that start before it: {behind}; the planner's causes: {causes}; "
                f"at the kill it had {promise})"
            )
    return broken


async def test_killing_the_service_under_load_loses_duplicates_and_double_books_nothing(crash_hub):
    hub, service, db_url = crash_hub
    rng = random.Random(SEED)
    service.start()
    await until_back(hub, service)
    alice = f"alice-{secrets.token_hex(3)}"
    slice_name = f"crash-{secrets.token_hex(3)}"
    hub.admin().post("slices", {"name": slice_name, "members": [alice], "policy": {"max_active_gprs": 50}}, expect=201)
    load = Load(hub.api, hub.user_token(alice), slice_name, rng)
    outages: list[Outage] = []
    broken = Broken()
    started = time.monotonic()
    async with submitting(load, CLIENTS):
        for _ in range(CYCLES):
            load.go.set()
            # The kill lands at a random moment of a steady load, in flight submits and reconcile passes included.
            await asyncio.sleep(rng.uniform(0.5, 2.5))
            await load.look()
            killed = datetime.now(UTC)
            service.kill()
            await load.pause()
            seen = {gpr_id: seen for gpr_id, seen in load.seen.items() if seen[1] <= killed}
            saved = saved_promises(db_url)
            service.start()
            outages.append(Outage(killed, await until_back(hub, service)))
            broken.add(check_estimates(hub, load, seen, outages[-1], saved))

            # Windows that ended during the outage end now, at once.
            wait_for(lambda: not overdue(db_url, datetime.now(UTC)), 10, "overdue windows to end")
            check_database(db_url, load, outages)
            load.seen.clear()

    # The test did what it says: a load that was answered, GPRs that started and ended, within bounded time.
    rows = check_database(db_url, load, outages)
    assert len(outages) == CYCLES
    assert len(load.acked) >= 10 * CYCLES, f"only {len(load.acked)} submits were acknowledged"
    assert not load.refused, f"submits refused: {load.refused[:5]}"
    ended = [r for r in rows.values() if r.status == "complete"]
    assert ended, "no GPR was provisioned and ended during the test"
    assert time.monotonic() - started < 120
    in_order, lost_gaps, unsaved = broken.in_order, broken.lost_gaps, broken.unsaved
    assert not in_order, f"{len(in_order)} estimate(s) of GPRs planned in queue order not kept, e.g. {in_order[0]}"
    # A backfilled GPR with a saved promise may still lose its gap across a restart (issue 18): it failed
    # 2 of 2 CI runs on 2026-11-29 and about 1 run in 3 on a loaded 2-core machine; a window admitted late
    # holds the promises after it only as much later as it was late (planner.SLIP_S, narrowed in de18fd3),
    # and what else drops these promises is not found yet.
    if unsaved or broken.moved_before or lost_gaps:
        example = (lost_gaps or unsaved or broken.moved_before)[0]
        pytest.xfail(
            "known, issue 18: a backfilled GPR's saved promise may not be kept across a restart "
            f"({len(lost_gaps)}); a GPR answered on the last plan is not a promise until a plan with it is saved, "
            "so killed before that, a restarted service plans it afresh and a backfilled one may lose its gap "
            f"({len(unsaved)}); a backfilled one's promise may move later before the kill, when a GPR submitted "
            f"after it takes its gap, and the restart keeps it so ({len(broken.moved_before)}); e.g. {example}"
        )
