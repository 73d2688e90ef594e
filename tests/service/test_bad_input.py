"""Bad input gets a clear 4xx naming the field, and nothing is written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import requests

MEMBER = "member"
ADMIN = "admin"


@dataclass(frozen=True)
class Bad:
    method: str
    path: str  # {slice} is the test's slice
    body: object = None
    raw: bytes | None = None  # sent as the body instead of JSON
    who: str = MEMBER
    want_status: int = 400  # the answer
    want_field: str | None = None  # the field the error names
    want_message: str = ""  # a piece of the message
    # sent to the service itself: the hub's proxy (configurable-http-proxy) answers such paths 500 on its own
    direct: bool = False


GPR = {"slice": "{slice}", "gpus": 1, "duration": "1h"}
NESTED_40: list = []
for _ in range(39):
    NESTED_40 = [NESTED_40]

CASES = {
    "body is not JSON": Bad("POST", "gprs", raw=b"{gpus: 1", want_field="body", want_message="not valid JSON"),
    "body is a list": Bad("POST", "gprs", [GPR], want_field="body"),
    "no body where one is required": Bad("POST", "gprs", want_field="body", want_message="needs a body"),
    "no price table": Bad("PUT", "clusters/local/prices", who=ADMIN, want_field="body", want_message="needs a body"),
    "duration missing": Bad("POST", "gprs", {"slice": "{slice}", "gpus": 1}, want_field="duration"),
    "gpus and nodes": Bad("POST", "gprs", {**GPR, "nodes": 1}, want_field="gpus", want_message="not both"),
    "neither gpus nor nodes": Bad("POST", "gprs", {"slice": "{slice}", "duration": 60}, want_field="gpus"),
    "gpus not a number": Bad("POST", "gprs", {**GPR, "gpus": "two"}, want_field="gpus"),
    "gpus zero": Bad("POST", "gprs", {**GPR, "gpus": 0}, want_field="gpus"),
    "priority too high": Bad("POST", "gprs", {**GPR, "priority": 301}, want_field="priority"),
    "duration garbage": Bad("POST", "gprs", {**GPR, "duration": "1x"}, want_field="duration"),
    "duration float": Bad("POST", "gprs", {**GPR, "duration": 1.5}, want_field="duration"),
    "start_after not a time": Bad("POST", "gprs", {**GPR, "start_after": "tomorrow"}, want_field="start_after"),
    "start_after without zone": Bad(
        "POST",
        "gprs",
        {**GPR, "start_after": "2030-01-01T10:00:00"},
        want_field="start_after",
        want_message="time zone",
    ),
    "start_after past the horizon": Bad(
        "POST",
        "gprs",
        {**GPR, "start_after": "9999-12-31T23:59:59Z"},
        want_field="start_after",
        want_message="start_after must be within 365 days from now (before ",
    ),
    # A time before 1970 is past, as good as now (issue 53); one before year 1 in UTC is no time at all.
    "start_after before year 1": Bad(
        "POST",
        "gprs",
        {**GPR, "start_after": "0001-01-01T00:00:00+01:00"},
        want_field="start_after",
        want_message="out of range in UTC",
    ),
    "wait-times start_after past the horizon": Bad(
        "POST", "wait-times", {**GPR, "start_after": "2999-01-01T00:00:00Z"}, want_field="start_after"
    ),
    "misspelt field": Bad("POST", "gprs", {**GPR, "gpu": 1}, want_field="gpu", want_message="unknown field"),
    "slice name malformed": Bad("POST", "gprs", {**GPR, "slice": "Team A"}, want_field="slice"),
    "slice unknown": Bad("POST", "gprs", {**GPR, "slice": "no-such-slice"}, want_status=422, want_field="slice"),
    "shape nobody has": Bad("POST", "gprs", {**GPR, "shape": "V100"}, want_status=422, want_field="shape"),
    "cluster unknown": Bad("POST", "gprs", {**GPR, "cluster": "mars"}, want_status=422, want_field="cluster"),
    "more GPUs than a node or cluster has": Bad(
        "POST", "gprs", {**GPR, "gpus": 17}, want_status=422, want_field="gpus", want_message="cannot be placed"
    ),
    "too many nodes": Bad("POST", "gprs", {**GPR, "gpus": None, "nodes": 4}, want_status=422, want_field="nodes"),
    "priority over the slice's max": Bad(
        "POST", "gprs", {**GPR, "priority": 250}, want_status=422, want_field="priority", want_message="max_priority"
    ),
    "wait-times with bad duration": Bad("POST", "wait-times", {**GPR, "duration": "soon"}, want_field="duration"),
    "gpr id not a number": Bad("GET", "gprs/abc", want_field="id"),
    "gpr id unknown": Bad("GET", "gprs/987654321", want_status=404),
    "gpr status filter unknown": Bad("GET", "gprs?status=running", want_field="status"),
    "events since not a time": Bad("GET", "events?since=yesterday", want_field="since"),
    "events since past the latest time": Bad(
        "GET",
        "events?since=9999-12-31T23:59:59Z",
        want_field="since",
        want_message="since must be from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z, not 9999-12-31T23:59:59Z",
    ),
    "alerts since year 1": Bad("GET", "alerts?since=0001-01-01T00:00:00Z", want_field="since", want_message="1970"),
    "events limit zero": Bad("GET", "events?limit=0", want_field="limit"),
    "events limit too big": Bad("GET", "events?limit=99999", want_field="limit"),
    "events cursor garbage": Bad("GET", "events?cursor=not-a-cursor", want_field="cursor", want_message="next_cursor"),
    "gprs limit zero": Bad("GET", "gprs?limit=0", want_field="limit", want_message="from 1 to 1000"),
    "gprs limit too big": Bad("GET", "gprs?limit=1001", want_field="limit", want_message="from 1 to 1000"),
    "gprs limit not a number": Bad("GET", "gprs?limit=all", want_field="limit", want_message="whole number"),
    "gprs cursor garbage": Bad("GET", "gprs?cursor=%25%25", want_field="cursor"),
    "queue limit too big": Bad("GET", "queue?limit=5000", want_field="limit"),
    "queue cursor garbage": Bad("GET", "queue?cursor=e30", want_field="cursor"),
    "alerts limit zero": Bad("GET", "alerts?limit=0", want_field="limit"),
    "alerts cursor garbage": Bad("GET", "alerts?cursor=abc", want_field="cursor"),
    "workloads limit negative": Bad("GET", "workloads?limit=-1", want_field="limit"),
    "workloads cursor garbage": Bad("GET", "workloads?cursor=W10", want_field="cursor"),
    "schedule start garbage": Bad("GET", "inventory/schedule?start=x", want_field="start"),
    "schedule end before start": Bad(
        "GET", "inventory/schedule?start=2030-01-02T00:00:00Z&end=2030-01-01T00:00:00Z", want_field="end"
    ),
    "schedule past the latest time": Bad(
        "GET",
        "inventory/schedule?start=9999-01-01T00:00:00Z&end=9999-12-31T23:59:59Z",
        want_field="start",
        want_message="9000-01-01T00:00:00Z",
    ),
    "schedule end past the latest time": Bad(
        "GET",
        "inventory/schedule?start=8999-12-01T00:00:00Z&end=9999-12-31T23:59:59Z",
        want_field="end",
        want_message="9000-01-01T00:00:00Z",
    ),
    "unknown path": Bad("GET", "gpr", want_status=404),
    "slice name with spaces": Bad("POST", "slices", {"name": "Team A"}, who=ADMIN, want_field="name"),
    "slice exists": Bad("POST", "slices", {"name": "{slice}"}, who=ADMIN, want_status=409),
    "quota not a number": Bad(
        "POST", "slices", {"name": "q-bad", "quota": {"max_gpus": "x"}}, who=ADMIN, want_field="quota.max_gpus"
    ),
    "policy misspelt": Bad(
        "POST",
        "slices",
        {"name": "p-bad", "policy": {"max_durtion": "1d"}},
        who=ADMIN,
        want_field="policy.max_durtion",
    ),
    "namespaces empty": Bad(
        "POST", "slices", {"name": "n-bad", "namespaces": {"c1": []}}, who=ADMIN, want_field="namespaces.c1"
    ),
    "namespace twice": Bad(
        "POST", "slices", {"name": "ns-twice", "namespaces": {"c1": ["a", "a"]}}, who=ADMIN, want_field="namespaces.c1"
    ),
    "group of another slice": Bad(
        "POST", "slices", {"name": "g-twice", "group": "{slice}"}, who=ADMIN, want_status=409, want_message="holds"
    ),
    "slice naming the admins' group": Bad(
        "POST", "slices", {"name": "egs-admins"}, who=ADMIN, want_status=422, want_field="group"
    ),
    "member name with slash": Bad(
        "POST", "slices", {"name": "m-bad", "members": ["a/b"]}, who=ADMIN, want_field="members"
    ),
    "patch policy out of range": Bad(
        "PATCH", "slices/{slice}", {"policy": {"max_priority": 999}}, who=ADMIN, want_field="policy.max_priority"
    ),
    "eviction mode unknown": Bad(
        "POST",
        "slices",
        {"name": "e-bad", "policy": {"eviction": "sometimes"}},
        who=ADMIN,
        want_field="policy.eviction",
        want_message="'auto', 'confirm', 'off'",
    ),
    "share zero": Bad("PATCH", "slices/{slice}", {"policy": {"share": 0}}, who=ADMIN, want_field="policy.share"),
    "share negative": Bad("PATCH", "slices/{slice}", {"policy": {"share": -1.5}}, who=ADMIN, want_field="policy.share"),
    "share not a number": Bad(
        "PATCH", "slices/{slice}", {"policy": {"share": "half"}}, who=ADMIN, want_field="policy.share"
    ),
    "weekly GPU-hours zero": Bad(
        "PATCH", "slices/{slice}", {"quota": {"max_gpu_hours": 0}}, who=ADMIN, want_field="quota.max_gpu_hours"
    ),
    "weekly GPU-hours not a number": Bad(
        "POST",
        "slices",
        {"name": "h-bad", "quota": {"max_gpu_hours": "lots"}},
        who=ADMIN,
        want_field="quota.max_gpu_hours",
    ),
    "bind_failure not a policy": Bad(
        "PATCH",
        "slices/{slice}",
        {"policy": {"bind_failure": "retry"}},
        who=ADMIN,
        want_field="policy.bind_failure",
        want_message="policy.bind_failure must be one of 'fail', 'move', not 'retry'",
    ),
    "requeue_evicted not a boolean": Bad(
        "PATCH",
        "slices/{slice}",
        {"policy": {"requeue_evicted": "yes"}},
        who=ADMIN,
        want_field="policy.requeue_evicted",
    ),
    "reject_over_limits not a boolean": Bad(
        "PATCH",
        "slices/{slice}",
        {"policy": {"reject_over_limits": 1}},
        who=ADMIN,
        want_field="policy.reject_over_limits",
    ),
    "evictions listed to a member": Bad("GET", "queue/evictions", want_status=403),
    "eviction confirmed by a member": Bad("POST", "queue/evictions", {"gpr_id": 1, "victims": [2]}, want_status=403),
    "eviction without victims": Bad("POST", "queue/evictions", {"gpr_id": 1}, who=ADMIN, want_field="victims"),
    "eviction with an empty list": Bad(
        "POST", "queue/evictions", {"gpr_id": 1, "victims": []}, who=ADMIN, want_field="victims"
    ),
    "eviction naming a victim twice": Bad(
        "POST", "queue/evictions", {"gpr_id": 1, "victims": [2, 2]}, who=ADMIN, want_field="victims"
    ),
    "eviction gpr_id not a number": Bad(
        "POST", "queue/evictions", {"gpr_id": "x", "victims": [2]}, who=ADMIN, want_field="gpr_id"
    ),
    "eviction nobody proposed": Bad(
        "POST", "queue/evictions", {"gpr_id": 987654321, "victims": [2]}, who=ADMIN, want_status=409
    ),
    "patch unknown slice": Bad("PATCH", "slices/no-such-slice", {"display_name": "x"}, who=ADMIN, want_status=404),
    "remove a non-member": Bad("DELETE", "slices/{slice}/members/nobody-here", who=ADMIN, want_status=404),
    # Issue 25: nothing a caller sends is a 500.
    "body nests 100000 lists deep": Bad(
        "POST", "gprs", raw=b"[" * 100_000 + b"]" * 100_000, want_field="body", want_message="nests deeper than 32"
    ),
    "a field nests 40 levels deep": Bad(
        "POST", "gprs", {**GPR, "name": NESTED_40}, want_field="name", want_message="nests deeper than 32 levels"
    ),
    "body is not UTF-8": Bad("POST", "gprs", raw=b'{"slice": "\xff"}', want_field="body", want_message="UTF-8"),
    "GPR name with a lone surrogate": Bad(
        "POST",
        "gprs",
        raw=b'{"slice": "{slice}", "gpus": 1, "duration": "1h", "name": "\\ud800"}',
        want_field="name",
        want_message="name contains text that is not valid Unicode (a lone surrogate)",
    ),
    "slice name with a lone surrogate": Bad(
        "POST", "gprs", raw=b'{"slice": "a\\udfffb", "gpus": 1, "duration": "1h"}', want_field="slice"
    ),
    "display name with a lone surrogate": Bad(
        "POST", "slices", raw=b'{"name": "s-sur", "display_name": "\\ud800"}', who=ADMIN, want_field="display_name"
    ),
    "member name with a lone surrogate": Bad(
        "POST", "slices", raw=b'{"name": "m-sur", "members": ["bob", "\\ud800"]}', who=ADMIN, want_field="members"
    ),
    "policy field with a lone surrogate": Bad(
        "PATCH", "slices/{slice}", raw=b'{"policy": {"eviction": "\\ud800"}}', who=ADMIN, want_field="policy.eviction"
    ),
    "field name with a lone surrogate": Bad(
        "POST", "gprs", raw=b'{"\\ud800": 1}', want_field="body", want_message="not valid Unicode"
    ),
    "reason with a lone surrogate": Bad(
        "POST", "gprs/987654321/release", raw=b'{"reason": "\\ud83d"}', want_field="reason"
    ),
    "member path not UTF-8": Bad(
        "PUT",
        "slices/{slice}/members/%ED%A0%80",
        who=ADMIN,
        want_field="path",
        want_message="the URL path is not valid UTF-8",
        direct=True,
    ),
    "slice path not UTF-8": Bad(
        "GET", "slices/%ED%A0%80", want_field="path", want_message="not valid UTF-8", direct=True
    ),
    "GPR path not UTF-8": Bad("POST", "gprs/%FF/release", want_field="path", want_message="%FF", direct=True),
    "GPU path with NUL": Bad("GET", "gpus/GPU-%00/metrics", want_field="path", want_message="NUL"),
    "query not UTF-8": Bad("GET", "gprs?slice=%ED%A0%80", want_field="slice", want_message="slice is not valid UTF-8"),
    "query with NUL": Bad("GET", "gprs?slice=%00", want_field="slice", want_message="NUL"),
    "servers query with NUL": Bad("GET", "servers?slice=a%00", want_field="slice", want_message="NUL"),
}


@pytest.fixture
def setting(hub, make_slice, user):
    name, member = user("member")
    team = make_slice(members=(name,), policy={"max_priority": 200})
    return team["name"], {MEMBER: member, ADMIN: hub.admin()}


def fill(value: object, slice_name: str) -> object:
    if isinstance(value, bytes):
        return value.replace(b"{slice}", slice_name.encode())
    if isinstance(value, str):
        return value.replace("{slice}", slice_name)
    if isinstance(value, dict):
        return {k: fill(v, slice_name) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [fill(v, slice_name) for v in value]
    return value


def state(hub, admin) -> tuple:
    """What bad input must not change: GPRs, slices, hub groups and events."""
    since = datetime(2000, 1, 1, tzinfo=UTC).isoformat().replace("+00:00", "Z")
    return (
        [(g["id"], g["status"], g["updated_at"]) for g in admin.get_all("gprs?limit=1000", "gprs")],
        [s["name"] for s in admin.get("slices")["slices"]],
        sorted((g["name"], tuple(sorted(g["users"]))) for g in hub.hub_api("GET", "groups")),
        len(admin.get_all(f"events?since={since}&limit=5000", "events")),
    )


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_is_refused_naming_the_field(hub, setting, case):
    slice_name, clients = setting
    client = clients[case.who]
    if case.direct:
        client = hub.direct_client(client.token)
    before = state(hub, clients[ADMIN])
    path = fill(case.path, slice_name)
    if case.raw is not None:
        response = requests.request(
            case.method,
            client.base + path,
            data=fill(case.raw, slice_name),
            timeout=30,
            headers={"Authorization": f"token {client.token}", "Content-Type": "application/json"},
        )
        assert response.status_code == case.want_status
        error = response.json()
    else:
        error = client.call(case.method, path, fill(case.body, slice_name), expect=case.want_status)
    if case.want_field is not None:
        assert error.get("field") == case.want_field, error
    assert case.want_message in error["message"]
    assert state(hub, clients[ADMIN]) == before, "bad input changed something"


def test_a_server_name_is_decoded_once(hub):
    """servers/{user}/{server} arrive percent-decoded: "a%2500" names server "a%00", never one with a NUL."""
    hub.admin().call("DELETE", "servers/someone/a%2500", expect=204)


def test_a_method_a_path_does_not_answer_is_405_naming_those_it_does(hub):
    """RFC 9110: a 405 lists the methods the path answers (schemathesis' undeclared-method check), and
    they are the methods the document gives the path."""
    document = requests.get(hub.api + "openapi.json", timeout=30).json()
    session = requests.Session()
    for path, operations in document["paths"].items():
        documented = {method.upper() for method in operations if method != "parameters"}
        concrete = re.sub(r"\{[^}]+\}", "x1", path)
        for method in ("TRACE", *({"GET", "POST", "PUT", "PATCH", "DELETE"} - documented)):
            response = session.request(
                method, hub.api + concrete.lstrip("/"), headers={"Authorization": f"token {hub.admin_token}"}
            )
            assert response.status_code == 405, (method, path, response.status_code, response.text)
            assert set(response.headers["Allow"].split(", ")) == documented, (method, path)
