"""core/endpoints.py: how many replicas an endpoint wants, what to file and give back, its status."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.endpoints import (
    EndpointSpec,
    Hold,
    Load,
    Replica,
    check_scale,
    local_command,
    queued_in,
    replica_changes,
    replica_state,
    retry_after,
    scope_reaches,
    status,
    wanted_replicas,
)
from egs_hub.core.errors import PolicyViolation
from egs_hub.core.model import Status

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
SINCE = NOW - timedelta(hours=1)


def spec(**fields) -> EndpointSpec:
    return EndpointSpec(**{"slice": "a", "name": "e", "runtime": "command", "command": ("srv",), **fields})


specs = st.builds(
    lambda low, extra, target, idle: spec(
        min_replicas=low, max_replicas=max(1, low + extra), target_concurrency=target, idle_timeout=idle
    ),
    st.integers(0, 4),
    st.integers(0, 6),
    st.integers(1, 8),
    st.sampled_from([timedelta(seconds=30), timedelta(minutes=15)]),
)
loads = st.builds(
    Load,
    in_flight=st.integers(0, 50),
    waiting=st.integers(0, 5),
    peak=st.integers(0, 60),
    recent_peak=st.integers(0, 60),
    last_request=st.one_of(st.none(), st.integers(0, 3600).map(lambda s: NOW - timedelta(seconds=s))),
)


@settings(max_examples=300, deadline=None)
@given(specs, st.integers(0, 10), loads)
def test_wanted_is_within_the_bounds_and_follows_the_load(endpoint, current, load):
    wanted = wanted_replicas(endpoint, current, load, None, SINCE, NOW)
    assert endpoint.min_replicas <= wanted <= endpoint.max_replicas
    busy = max(load.peak, load.in_flight + load.waiting)
    if load.in_flight or load.waiting:  # requests come: at least one, and as many as they need (up to max)
        assert wanted >= min(endpoint.max_replicas, max(1, math.ceil(busy / endpoint.target_concurrency)))
    last = load.last_request or SINCE
    if not (load.in_flight or load.waiting) and NOW - max(last, SINCE) >= endpoint.idle_timeout:
        assert wanted == endpoint.min_replicas
    recent = math.ceil(load.recent_peak / endpoint.target_concurrency)
    if wanted < current and wanted > endpoint.min_replicas:  # down only as far as the recent peak allows
        assert wanted >= min(current, recent, endpoint.max_replicas)


def test_scale_to_zero_after_the_idle_time_and_back_on_a_request():
    endpoint = spec(min_replicas=0, max_replicas=3, idle_timeout=timedelta(minutes=5))
    quiet = Load(last_request=NOW - timedelta(minutes=6))
    assert wanted_replicas(endpoint, 2, quiet, None, SINCE, NOW) == 0
    assert wanted_replicas(endpoint, 2, Load(last_request=NOW - timedelta(minutes=4)), None, SINCE, NOW) == 1
    assert wanted_replicas(endpoint, 0, Load(waiting=1, peak=1, last_request=NOW), None, SINCE, NOW) == 1
    # a new endpoint (or one just changed) is not idle until idle_timeout after it
    assert wanted_replicas(endpoint, 1, Load(), None, NOW - timedelta(minutes=1), NOW) == 1


def test_scale_up_at_once_down_slowly():
    endpoint = spec(max_replicas=5, target_concurrency=2)
    busy = Load(in_flight=7, peak=7, recent_peak=7, last_request=NOW)
    assert wanted_replicas(endpoint, 1, busy, None, SINCE, NOW) == 4
    calmer = Load(in_flight=1, peak=1, recent_peak=7, last_request=NOW)  # the peak is recent: stay
    assert wanted_replicas(endpoint, 4, calmer, None, SINCE, NOW) == 4
    calm = Load(in_flight=1, peak=1, recent_peak=3, last_request=NOW)
    assert wanted_replicas(endpoint, 4, calm, None, SINCE, NOW) == 2
    assert wanted_replicas(endpoint, 1, Load(in_flight=30, peak=30, last_request=NOW), None, SINCE, NOW) == 5


def test_a_members_scale_holds_until_it_ends():
    endpoint = spec(max_replicas=4)
    hold = Hold(3, NOW + timedelta(minutes=1))
    assert wanted_replicas(endpoint, 3, Load(), hold, SINCE, NOW) == 3
    assert wanted_replicas(endpoint, 3, Load(), Hold(3, NOW), SINCE, NOW) == 0
    check_scale(endpoint, 4)
    with pytest.raises(PolicyViolation, match="replicas must be from min_replicas to max_replicas"):
        check_scale(endpoint, 5)


statuses = st.sampled_from(list(Status))
replicas_of = st.lists(
    st.builds(
        Replica,
        gpr_id=st.integers(1, 10_000),
        status=statuses,
        window_end=st.one_of(st.none(), st.integers(0, 7200).map(lambda s: NOW + timedelta(seconds=s))),
        ready=st.booleans(),
        in_flight=st.integers(0, 5),
    ),
    max_size=8,
    unique_by=lambda r: r.gpr_id,
)
LIVE = {Status.PENDING_APPROVAL, Status.QUEUED, Status.PROVISIONING, Status.PROVISIONED}


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 6), replicas_of)
def test_replica_changes_leave_what_is_wanted(wanted, replicas):
    endpoint = spec(duration=timedelta(hours=1))
    changes = replica_changes(endpoint, wanted, replicas, NOW)
    live = [r for r in replicas if r.status in LIVE]
    assert set(changes.drop) <= {r.gpr_id for r in live}
    if wanted == 0:
        assert set(changes.drop) == {r.gpr_id for r in live} and changes.file == 0
        return
    staying = [r for r in live if r.gpr_id not in changes.drop and r.gpr_id not in changes.renewing]
    assert len(staying) + changes.file == wanted or (changes.file == 0 and len(staying) == wanted)
    assert not (changes.file and changes.drop)
    kept_waiting = [r for r in staying if r.status is not Status.PROVISIONED]
    dropped_provisioned = [r for r in live if r.gpr_id in changes.drop and r.status is Status.PROVISIONED]
    assert not (kept_waiting and dropped_provisioned)  # waiting replicas go first


def test_a_replica_ending_soon_is_renewed():
    endpoint = spec(duration=timedelta(hours=1))  # renewed 6 minutes before its end
    ending = Replica(1, Status.PROVISIONED, NOW + timedelta(minutes=5), ready=True)
    later = Replica(2, Status.PROVISIONED, NOW + timedelta(minutes=50), ready=True)
    changes = replica_changes(endpoint, 2, [ending, later], NOW)
    assert changes.file == 1 and changes.renewing == (1,) and changes.drop == ()
    renewed = replica_changes(endpoint, 2, [ending, later, Replica(3, Status.QUEUED)], NOW)
    assert renewed.file == 0 and renewed.drop == ()


def test_status_and_replica_states():
    assert replica_state(Status.QUEUED, None) == "waiting"
    assert replica_state(Status.PROVISIONED, None) == "starting"
    assert replica_state(Status.PROVISIONED, "ready") == "ready"
    assert replica_state(Status.RELEASING, "ready") == "ending"
    assert status(0, [], None) == "scaled-to-zero"
    assert status(1, ["waiting"], None) == "pending"
    assert status(1, ["waiting", "starting"], None) == "starting"
    assert status(2, ["ready", "failed"], None) == "ready"
    assert status(1, ["failed"], None) == "failed"
    assert status(1, [], "a GPR for a replica was refused") == "failed"


def test_local_command_puts_the_port_in():
    endpoint = spec(command=("python", "serve.py", "--port={port}"), args=("--x", "{port}"))
    assert local_command(endpoint, 8123) == ["python", "serve.py", "--port=8123", "--x", "8123"]
    vllm = spec(runtime="vllm", model="org/m", command=(), args=("--dtype", "half"))
    assert local_command(vllm, 9000) == [
        "vllm",
        "serve",
        "org/m",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
        "--dtype",
        "half",
    ]
    with pytest.raises(PolicyViolation, match="kserve"):
        local_command(spec(runtime="kserve", model="m"), 1)


def test_retry_after_follows_the_estimate():
    assert retry_after([NOW + timedelta(seconds=90), None], NOW, starting=False) == 90
    assert retry_after([None], NOW, starting=False) == 5
    assert retry_after([NOW + timedelta(seconds=90)], NOW, starting=True) == 5
    assert retry_after([NOW - timedelta(seconds=3)], NOW, starting=False) == 5


def test_requests_queued_in_the_runtime_want_one_more_replica():
    endpoint = spec(max_replicas=3, target_concurrency=4)
    load = Load(in_flight=2, peak=2, recent_peak=2, last_request=NOW, queued=5)
    assert wanted_replicas(endpoint, 1, load, None, SINCE, NOW) == 2
    assert wanted_replicas(endpoint, 3, load, None, SINCE, NOW) == 3
    calm = Load(in_flight=2, peak=2, recent_peak=2, last_request=NOW)
    assert wanted_replicas(endpoint, 1, calm, None, SINCE, NOW) == 1


def test_queued_in_reads_vllms_metric():
    exposition = (
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_waiting{engine="1",model_name="m"} 2.0\n'
        'vllm:num_requests_running{model_name="m"} 7.0\n'
        "vllm:num_requests_waiting_total 9\n"
    )
    assert queued_in(exposition) == 5
    assert queued_in("vllm:num_requests_waiting 4\n") == 4
    assert queued_in('no metrics here\nvllm:num_requests_waiting{x="y"} oops\n') == 0


SCOPE = "custom:egs:endpoints"


@dataclass(frozen=True)
class Reach:
    scopes: tuple[str, ...]
    want: bool  # whether a token of "ann" holding ``scopes`` calls endpoint team/llm of hub group team-group
    slice_name: str = "team"
    name: str = "llm"
    group: str = "team-group"


REACH_CASES = {
    "unfiltered: every endpoint its owner may call": Reach((SCOPE,), want=True),
    "server filter of this endpoint": Reach((f"{SCOPE}!server=team/llm",), want=True),
    "server filter of another endpoint of the slice": Reach((f"{SCOPE}!server=team/other",), want=False),
    "server filter of the same name in another slice": Reach((f"{SCOPE}!server=lab/llm",), want=False),
    "group filter of the slice's group": Reach((f"{SCOPE}!group=team-group",), want=True),
    "group filter of another group": Reach((f"{SCOPE}!group=lab-group",), want=False),
    "group filter when the slice's group is unknown": Reach((f"{SCOPE}!group=team-group",), want=False, group=""),
    "user filter of its owner": Reach((f"{SCOPE}!user=ann",), want=True),
    "user filter of someone else": Reach((f"{SCOPE}!user=bob",), want=False),
    "service filter": Reach((f"{SCOPE}!service=egs",), want=False),
    "one of several scopes reaches": Reach(
        ("read:users:name!user=ann", f"{SCOPE}!server=team/other", f"{SCOPE}!server=team/llm"), want=True
    ),
    "unrelated scopes": Reach(
        ("access:services!service=egs", "custom:egs:admin", "custom:egs:endpointsx", "read:users:groups!user=ann"),
        want=False,
    ),
    "no scopes": Reach((), want=False),
}


@pytest.mark.parametrize("case", REACH_CASES.values(), ids=REACH_CASES.keys())
def test_which_token_scopes_reach_an_endpoint(case: Reach):
    reached = scope_reaches(
        case.scopes, SCOPE, owner="ann", slice_name=case.slice_name, name=case.name, group=case.group
    )
    assert reached is case.want
