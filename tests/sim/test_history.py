"""What-if capacity planning from a service's own history (sim/history.py, ``simulate --from-db``).

The history is made by the real reconcile loop on a store (tests/service/test_reconcile.py's world:
one 4-GPU H100 node, slices a and b, a clock the test moves): one GPR ran its whole window, one was
released early, one waited behind them, one was cancelled while queued.
"""

# ruff: noqa: F811  (the fixture world is imported from the module that defines it)
from __future__ import annotations

import json
import shutil
import subprocess
from datetime import timedelta

import pytest

from egs_hub.core import lifecycle
from egs_hub.core import model as core
from egs_hub.core.capacity_change import WHAT_IF_CLUSTER
from egs_hub.sim.cluster import Inventory, NodeGroup
from egs_hub.sim.history import (
    capacity_cost,
    changed,
    parse_change,
    parse_price,
    priced,
    read_history,
)
from egs_hub.sim.trace import SimInputError
from egs_hub.store import queries
from egs_hub.store.db import transaction

from ..service.test_reconcile import NODE, START, settle, status, submit, world  # noqa: F401

SHAPE = NODE.shape


async def recorded(world):
    """Run the history; returns (sessions, now, ids: whole, early, waited, cancelled)."""
    sessions, clock, _, reconciler = world
    whole = submit(sessions, "a", 2, 60, clock.now)
    early = submit(sessions, "b", 2, 60, clock.now)
    await settle(reconciler)
    waited = submit(sessions, "a", 4, 30, clock.now)
    cancelled = submit(sessions, "b", 4, 30, clock.now)
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, cancelled, lock=True)
        queries.apply(session, row, lifecycle.cancel(queries.to_gpr(row), "bob", "not needed", clock.now))
    clock.advance(minutes=20)
    with transaction(sessions) as session:
        row = queries.get_gpr_row(session, early, lock=True)
        change = lifecycle.begin_release(queries.to_gpr(row), core.EndReason.RELEASED_EARLY, "bob", "done", clock.now)
        queries.apply(session, row, change)
    await settle(reconciler)
    clock.advance(minutes=40)
    await settle(reconciler)
    assert status(sessions, waited).status is core.Status.PROVISIONED
    return sessions, clock.now, (whole, early, waited, cancelled)


async def test_the_history_is_what_ran_as_it_ran(world):
    sessions, now, _ = await recorded(world)
    with sessions() as session:
        history = read_history(session, timedelta(days=1), now)
    since = (START - (now - timedelta(days=1))).total_seconds()
    jobs = [(j.submit_s - since, j.slice, j.gpus, j.duration_s, j.actual_s) for j in history.trace.jobs]
    assert jobs == [(0.0, "a", 2, 3600.0, 3600.0), (0.0, "b", 2, 3600.0, 1200.0), (0.0, "a", 4, 1800.0, 1800.0)]
    assert history.inventory.groups == (NodeGroup("local", SHAPE, 1),)
    assert history.trace.span_s == 86400.0
    # The real waits: 0, 0 and an hour (the 4-GPU GPR waited for the whole window of the first).
    assert history.recorded["gprs"] == 3
    assert history.recorded["wait_p95_s"] == pytest.approx(3600 * 0.9)


async def test_nothing_in_the_window_is_a_clear_error(world):
    sessions, clock, _, _ = world
    with sessions() as session, pytest.raises(SimInputError, match="no GPR submitted since"):
        read_history(session, timedelta(days=1), clock.now)


def test_changes_name_a_shape_and_a_count():
    assert parse_change("H100-80GB x8:2", "--add-nodes") == ("H100-80GB x8", 2)
    for bad, why in [("H100", "SHAPE:N"), (":2", "SHAPE:N"), ("H100:two", "whole number"), ("H100:0", "at least 1")]:
        with pytest.raises(SimInputError, match=why):
            parse_change(bad, "--add-nodes")


def test_nodes_are_added_to_a_matching_group_or_a_new_shape():
    inventory = Inventory((NodeGroup("local", SHAPE, 1),))
    assert changed(inventory, [("H100", 2)], []).groups == (NodeGroup("local", SHAPE, 3),)
    b200 = core.Shape("B200", 192, 8)
    assert changed(inventory, [("B200-192GB x8", 1)], []).groups[1] == NodeGroup(WHAT_IF_CLUSTER, b200, 1)
    with pytest.raises(SimInputError, match="name a new one in full"):
        changed(inventory, [("B200", 1)], [])
    with pytest.raises(SimInputError, match="local has 1"):
        changed(inventory, [], [("H100", 2)])
    with pytest.raises(SimInputError, match="no node of that shape"):
        changed(inventory, [], [("A100", 1)])
    with pytest.raises(SimInputError, match="no node would be left"):
        changed(inventory, [], [("H100", 1)])


def test_capacity_costs_the_nodes_gpu_hours_at_their_prices():
    b200 = core.Shape("B200", 192, 8)
    inventory = Inventory((NodeGroup("local", SHAPE, 2), NodeGroup(WHAT_IF_CLUSTER, b200, 1)))
    day = 86400.0
    prices = {("local", SHAPE.name): 2.0}
    assert capacity_cost(inventory, prices, day) is None  # the B200 nodes have no price
    prices = priced(prices, inventory, [("B200", 6.0)])
    assert capacity_cost(inventory, prices, day) == 2 * 4 * 24 * 2.0 + 8 * 24 * 6.0
    assert parse_price("B200-192GB x8=6.5") == ("B200-192GB x8", 6.5)
    for bad in ["B200", "B200=cheap", "B200=-1", "=3", "B200=inf"]:
        with pytest.raises(SimInputError, match="SHAPE=PRICE"):
            parse_price(bad)


async def test_simulate_from_db_answers_what_one_more_node_would_have_done(world, db_url, tmp_path):
    """The installed command as an admin runs it: the recorded waits, the replay on the nodes as they
    are, and on them with one more H100 node, where the GPR that waited an hour starts at once."""
    await recorded(world)
    out = tmp_path / "what-if.json"
    args = ["simulate", "--from-db", db_url, "--since", "400d", "--add-nodes", "H100:1", "--price", "H100=2.5"]
    args += ["--policy", "planner"]
    done = subprocess.run(
        [shutil.which("egs-hub"), *args, "--json", str(out), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "recorded: 3 started" in done.stdout and "changed: 2 x H100-80GB x4 in local" in done.stdout, done.stdout
    report = json.loads(out.read_text())
    assert report["recorded"]["gprs"] == 3
    assert report["current"]["planner"]["wait_mean_s"] == pytest.approx(1200.0)
    assert report["changed"]["planner"]["wait_mean_s"] == 0.0
    # 400 days of 4 (then 8) GPUs at 2.5 per GPU-hour
    assert report["current"]["capacity_cost"] == pytest.approx(400 * 24 * 4 * 2.5)
    assert report["changed"]["capacity_cost"] == pytest.approx(400 * 24 * 8 * 2.5)
    assert "the nodes' cost over the 400d: 96,000.00 -> 192,000.00" in done.stdout


def test_simulate_from_db_refuses_bad_input(tmp_path):
    egs = shutil.which("egs-hub")
    cases = [
        (["--from-db", "nonsense://"], "--from-db"),
        (["--from-db", f"sqlite:///{tmp_path}/empty.sqlite"], "schema"),
        (["--from-db", "sqlite:///x.sqlite", "--csv", "t.csv"], "drop --csv"),
        (["--from-db", "sqlite:///x.sqlite", "--since", "soon"], "--since"),
        (["--from-db", "sqlite:///x.sqlite", "--add-nodes", "H100"], "SHAPE:N"),
        (["--from-db", "sqlite:///x.sqlite", "--price", "H100"], "SHAPE=PRICE"),
    ]
    for args, why in cases:
        done = subprocess.run([egs, "simulate", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and why in done.stderr, (args, done.stderr)
