"""Restarting the control plane mid-window loses and duplicates nothing.

The test kills the EGS service (SIGKILL: no clean shutdown) while one window
spans the outage and another ends during it; its supervisor (service/supervise.py)
starts it again within 2 s, and it must pick up from the database: the long window still bound
to the same GPUs, the short one ended as soon as the service is back, the
queued GPR still queued with the same estimate, and every event once.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from .hub import restart_service, wait_for


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def test_service_killed_mid_window_resumes_from_the_database(hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    a = make_slice(members=(alice,))
    b = make_slice(members=(alice,))
    short = as_alice.post("gprs", {"slice": a["name"], "gpus": 1, "duration": 5}, expect=201)
    long = as_alice.post("gprs", {"slice": b["name"], "gpus": 2, "duration": "10m"}, expect=201)
    for gpr in (short, long):
        wait_for(lambda g=gpr: as_alice.get(f"gprs/{g['id']}")["status"] == "provisioned", 10, "provisioned")
    queued = as_alice.post("gprs", {"slice": b["name"], "gpus": 1, "duration": 60}, expect=201)
    long_before = as_alice.get(f"gprs/{long['id']}")
    short_before = as_alice.get(f"gprs/{short['id']}")
    assert queued["status"] == "queued" and queued["estimated_start"] == long_before["window_end"]
    inventory_before = as_alice.get("inventory")["gpus"]

    restart_service(hub)

    # The window that ended while the service was down is ended now, not forgotten.
    short_after = wait_for(
        lambda: (g := as_alice.get(f"gprs/{short['id']}"))["status"] == "complete" and g, 10, "short complete"
    )
    assert short_after["window_end"] == short_before["window_end"]
    assert short_after["end_reason"] == "window-ended"
    assert parse(short_after["ended_at"]) - datetime.now(parse(short_after["ended_at"]).tzinfo) < timedelta(0)

    # The window that spans the restart keeps its GPUs and its end.
    long_after = as_alice.get(f"gprs/{long['id']}")
    assert long_after["status"] == "provisioned"
    for key in ("window_start", "window_end", "bound_gpus", "bound_nodes"):
        assert long_after[key] == long_before[key], key
    assert as_alice.get(f"slices/{b['name']}")["gpus"] == long_before["bound_gpus"]

    queued_after = as_alice.get(f"gprs/{queued['id']}")
    assert queued_after["status"] == "queued"
    assert queued_after["estimated_start"] == long_before["window_end"]

    # Nothing duplicated: one GPR each, each transition recorded once, the same GPUs.
    assert as_alice.get("inventory")["gpus"] == inventory_before
    assert len([g for g in as_alice.get(f"gprs?slice={b['name']}")["gprs"]]) == 2
    for gpr in (short, long, queued):
        kinds = Counter(e["kind"] for e in as_alice.get(f"events?gpr={gpr['id']}")["events"])
        assert all(count == 1 for count in kinds.values()), (gpr["id"], kinds)
