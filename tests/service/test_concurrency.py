"""Many clients at once: submits, edits, cancels and releases through the API, checked against a full replan.

Clients of two members hammer one slice on the real stack (the shared test hub: two 8-GPU
nodes and a 4-GPU node) with seeded random operations. Windows last minutes, so GPUs come
free only by release and nothing ends by time during the test. Then, once the service is
settled (nothing binding or unbinding, nothing due to start), the test checks:

- no GPU was ever held by two GPRs at once (the allocations' windows on each GPU);
- the estimates the service answers are the plan of the store: a full plan made here from
  the database (queries.load_snapshot with the stored promises, planner.plan) gives every
  queued GPR the same start;
- every estimate a submit answered was kept: the GPR started by it, or is still estimated no
  later, unless an event explains it (an edit or a priority change after the answer: they
  plan a band afresh); releases and cancels only ever move starts earlier.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from egs_hub.core import planner
from egs_hub.store import queries
from egs_hub.store.db import make_engine, make_sessions

from .hub import Hub, wait_for
from .test_crash import check_held, parse, read_store, starts

SEED = 7
CLIENTS = 6
SECONDS = 15
LAG = timedelta(seconds=2)  # a reconcile pass (0.2 s) and a bind on a loaded 2-core machine
EXPLAINING = {"edited", "priority-changed", "node-lost", "gpu-lost", "moved", "requeued"}
ANSWERS = {  # operation -> the answers it may get (409: the GPR moved on meanwhile)
    "submit": {201},
    "edit": {200, 409},
    "cancel": {200, 409},
    "release": {200, 409},
}


@dataclass
class Clients:
    api: str
    slice: str
    tokens: list[str]
    rng: random.Random
    answered: dict[int, tuple[datetime, datetime]] = field(default_factory=dict)  # id -> (estimate, when)
    queued: set[int] = field(default_factory=set)
    owners: dict[int, str] = field(default_factory=dict)  # GPR id -> the token that submitted it
    held: set[int] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)

    async def client(self, number: int, until: float) -> None:
        token = self.tokens[number % len(self.tokens)]
        async with httpx.AsyncClient(
            base_url=self.api, headers={"Authorization": f"token {token}"}, timeout=60
        ) as http:
            for seq in range(10_000):
                if asyncio.get_running_loop().time() > until:
                    return
                operation = self.rng.choices(["submit", "edit", "cancel", "release", "look"], [10, 2, 2, 3, 2])[0]
                await self.run(http, token, operation, f"k{number}-{seq}")

    async def run(self, http: httpx.AsyncClient, token: str, operation: str, name: str) -> None:
        if operation == "look":
            listed = (await http.get("gprs", params={"slice": self.slice})).json()["gprs"]
            self.queued = {g["id"] for g in listed if g["status"] == "queued"}
            self.held = {g["id"] for g in listed if g["status"] == "provisioned"}
            return
        # Only who asked edits a GPR; any member cancels or releases one.
        pool = {
            "edit": {i for i in self.queued if self.owners.get(i) == token},
            "cancel": self.queued,
            "release": self.held,
        }.get(operation)
        if pool is not None and not pool:
            return
        if operation == "submit":
            body = {"slice": self.slice, "name": name, "gpus": self.rng.choice([1, 2, 4, 8])}
            response = await http.post("gprs", json=body | {"duration": self.rng.choice(["2m", "3m", "5m"])})
        else:
            gpr_id = self.rng.choice(sorted(pool))
            self.queued.discard(gpr_id)
            self.held.discard(gpr_id)
            if operation == "edit":
                response = await http.patch(f"gprs/{gpr_id}", json={"duration": self.rng.choice(["1m", "4m"])})
            elif operation == "cancel":
                response = await http.delete(f"gprs/{gpr_id}")
            else:
                response = await http.post(f"gprs/{gpr_id}/release")
        self.counts[operation] = self.counts.get(operation, 0) + 1
        if response.status_code not in ANSWERS[operation]:
            self.unexpected.append(f"{operation}: {response.status_code} {response.text[:200]}")
            return
        if operation == "submit":
            gpr = response.json()
            self.owners[gpr["id"]] = token
            if gpr["status"] == "queued":
                self.queued.add(gpr["id"])
                self.answered[gpr["id"]] = (parse(gpr["estimated_start"]), datetime.now(UTC))


def settled(hub: Hub, token: str, slice_name: str) -> list[dict] | None:
    """The slice's GPRs once nothing is binding or unbinding and no queued GPR is due within 2 s."""
    gprs = hub.client(token).get_all(f"gprs?slice={slice_name}&limit=1000", "gprs")
    soon = datetime.now(UTC) + timedelta(seconds=2)
    busy = [g for g in gprs if g["status"] in ("provisioning", "releasing")]
    due = [g for g in gprs if g["status"] == "queued" and parse(g["estimated_start"]) <= soon]
    return None if busy or due else gprs


def full_plan(db_url: str) -> dict[int, datetime | None]:
    """Every queued GPR's start in a plan made here from the store and its stored promises."""
    engine = make_engine(db_url)
    try:
        with make_sessions(engine)() as session:
            promises = {estimate.gpr_id: estimate for estimate, _, _ in queries.load_promises(session)}
            now = datetime.now(UTC)
            snapshot = queries.load_snapshot(session, now, previous=promises)
    finally:
        engine.dispose()
    return {gpr_id: e.start for gpr_id, e in planner.plan(snapshot, now).estimates.items()}


async def test_concurrent_submits_edits_and_releases_agree_with_a_full_replan(hub, admin, make_slice, user):
    (alice, as_alice), (bob, as_bob) = user("alice"), user("bob")
    team = make_slice(members=(alice, bob), policy={"max_active_gprs": 20})["name"]
    clients = Clients(hub.api, team, [as_alice.token, as_bob.token], random.Random(SEED))
    until = asyncio.get_running_loop().time() + SECONDS
    await asyncio.gather(*(clients.client(i, until) for i in range(CLIENTS)))
    assert not clients.unexpected, clients.unexpected[:5]
    assert clients.counts.get("submit", 0) >= 30 and clients.counts.get("release", 0) >= 3, clients.counts

    # 1. No GPU held twice, ever; bound GPUs held; nothing of the slice held past its window.
    store = read_store(hub.db_url)
    check_held(store, [], {r.id for r in store.rows.values() if r.slice == team})

    # 2. What the service answers is the plan of the store.
    gprs = wait_for(lambda: settled(hub, as_alice.token, team), 30, "the service to settle")
    replanned = full_plan(hub.db_url)
    listed = {g["id"]: g for g in gprs}
    differ = {
        gpr_id: (g["estimated_start"], replanned.get(gpr_id))
        for gpr_id, g in listed.items()
        if g["status"] == "queued" and parse(g["estimated_start"]) != replanned.get(gpr_id)
    }
    known = []
    if differ:
        known.append(f"the service's estimates differ from a full replan of the store: {differ}")

    # 3. Every estimate a submit answered was kept, or an event says why not.
    events = admin.get(f"events?slice={team}&limit=5000", expect=200)["events"]
    broken = []
    for gpr_id, (estimate, answered_at) in clients.answered.items():
        gpr = listed[gpr_id]
        if gpr["status"] in ("cancelled", "rejected") or (gpr["window_start"] is None and gpr["status"] != "queued"):
            continue
        if starts(gpr) <= estimate + LAG:
            continue
        if not any(e["kind"] in EXPLAINING and parse(e["time"]) >= answered_at for e in events):
            causes = [e["data"]["cause"] for e in events if e["gpr"] == gpr_id and e["kind"] == "estimate-moved"]
            broken.append((gpr_id, str(estimate), str(starts(gpr)), causes))
    if broken:
        known.append(
            "estimates answered at submit and not kept, unexplained (id, answered, start, the planner's causes): "
            f"{broken[:5]}"
        )
    if known:  # the checks known to fail (2 and 3): the others above held
        pytest.xfail(
            "known, issue 18: the service's estimates are not always a full replan's, and a submit placed on "
            "the last plan while a reconcile pass or another write is under way may start later than it "
            "answered; the core planner replanning its own plan changes nothing (test_planner_properties.py), "
            f"so the cause is in the service: {' / '.join(k[:1000] for k in known)}"
        )
