"""Idempotent writes (issue 45, item 7): a create sent again with the same ``Idempotency-Key`` makes
nothing new and answers what the first one made.

Found under ``kill -9`` of the service during a load of submits: a submit answered 503 during a restart
can still be committed (1 in ~1,200), and a client that retried made a second GPR. Here every retry
(after an answer, after a restart, at the same moment) answers the first create's resource, and nothing
but the first create is in the store.
"""

from __future__ import annotations

import re
import secrets
import threading

import requests

from ..service.hub import Client, Hub, restart_service
from ..service.test_endpoints import endpoint_body

HEADER = "Idempotency-Key"


def keyed(client: Client, key: str, answers: list | None = None) -> Client:
    """``client`` sending ``key`` as its Idempotency-Key on every request; ``answers`` collects the
    raw responses (their headers)."""
    session = requests.Session()
    session.headers[HEADER] = key
    if answers is not None:
        session.hooks["response"].append(lambda response, *args, **kwargs: answers.append(response))
    return Client(client.base, client.token, session)


def new_key() -> str:
    return f"test-{secrets.token_hex(8)}"


def gprs_of(admin: Client, slice_name: str) -> list[dict]:
    return admin.get_all(f"gprs?slice={slice_name}&limit=1000", "gprs")


def gpr_body(slice_name: str, **fields) -> dict:
    return {"slice": slice_name, "gpus": 1, "duration": 60, "priority": 10, **fields}


def test_a_retried_submit_answers_the_first_gpr_and_makes_no_second(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    answers: list[requests.Response] = []
    retrying = keyed(as_alice, new_key(), answers)

    first = retrying.post("gprs", gpr_body(team), expect=201)
    again = retrying.post("gprs", gpr_body(team), expect=201)

    assert again["id"] == first["id"]
    assert [g["id"] for g in gprs_of(admin, team)] == [first["id"]]
    assert answers[1].headers["Location"].endswith(f"gprs/{first['id']}")
    assert answers[1].headers.get("Idempotent-Replayed") == "true"
    assert "Idempotent-Replayed" not in answers[0].headers
    submitted = [e for e in as_alice.get(f"events?gpr={first['id']}")["events"] if e["kind"] == "submitted"]
    assert len(submitted) == 1


def test_the_same_key_with_another_body_is_a_409_naming_the_header_and_makes_nothing(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    retrying = keyed(as_alice, new_key())
    first = retrying.post("gprs", gpr_body(team), expect=201)

    refused = retrying.post("gprs", gpr_body(team, gpus=2), expect=409)
    assert HEADER in refused["message"] and refused.get("field") == HEADER
    # The same key at another operation is another request too.
    other = retrying.post("workspace-requests", {"name": f"w-{secrets.token_hex(3)}"}, expect=409)
    assert HEADER in other["message"]

    assert [g["id"] for g in gprs_of(admin, team)] == [first["id"]]
    assert as_alice.get("workspace-requests")["workspace_requests"] == []


def test_a_key_of_another_caller_is_another_key(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    bob, as_bob = user("bob")
    team = make_slice(members=(alice, bob))["name"]
    key = new_key()

    hers = keyed(as_alice, key).post("gprs", gpr_body(team), expect=201)
    his = keyed(as_bob, key).post("gprs", gpr_body(team), expect=201)

    assert his["id"] != hers["id"]
    assert (hers["requested_by"], his["requested_by"]) == (alice, bob)
    assert sorted(g["id"] for g in gprs_of(admin, team)) == sorted([hers["id"], his["id"]])


def test_a_key_is_at_most_255_printable_ascii_characters(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    # Control characters but tab do not pass the hub's proxy (a bare 400); check_key refuses them too.
    for bad in ("k" * 256, "caf\u00e9", "tab\there"):
        refused = keyed(as_alice, bad).post("gprs", gpr_body(team), expect=400)
        assert refused.get("field") == HEADER and HEADER in refused["message"], refused
    assert gprs_of(admin, team) == []
    longest = keyed(as_alice, "~" * 255).post("gprs", gpr_body(team), expect=201)
    assert [g["id"] for g in gprs_of(admin, team)] == [longest["id"]]


def test_a_retry_by_a_caller_who_may_no_longer_see_it_is_answered_as_the_create_would_be(
    hub: Hub, admin, make_slice, user
):
    """A replay shows nothing a GET would not: removed from the slice, alice's retry is the 422 of a slice
    she does not see, as a new submit of hers is (visibility.py), not her GPR as it is now."""
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    retrying = keyed(as_alice, new_key())
    first = retrying.post("gprs", gpr_body(team), expect=201)
    admin.call("DELETE", f"slices/{team}/members/{alice}", expect=200)

    refused = retrying.post("gprs", gpr_body(team), expect=422)
    assert refused.get("field") == "slice" and team in refused["message"], refused
    assert not re.search(rf"\b{first['id']}\b", refused["message"]), refused
    assert refused == as_alice.post("gprs", gpr_body(team), expect=422)


def test_a_retry_after_a_restart_of_the_service_answers_the_first(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    retrying = keyed(as_alice, new_key())
    first = retrying.post("gprs", gpr_body(team), expect=201)

    restart_service(hub)

    again = retrying.post("gprs", gpr_body(team), expect=201)
    assert again["id"] == first["id"]
    assert [g["id"] for g in gprs_of(admin, team)] == [first["id"]]


def test_concurrent_duplicates_make_one_gpr(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    key, body = new_key(), gpr_body(team)
    start = threading.Barrier(6)
    ids: list[int] = []
    failures: list[BaseException] = []

    def submit() -> None:
        client = keyed(as_alice, key)
        start.wait()
        try:
            ids.append(client.post("gprs", body, expect=201)["id"])
        except BaseException as e:  # reported below, with the answers of the others
            failures.append(e)

    threads = [threading.Thread(target=submit) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert not failures, failures
    assert len(ids) == 6 and len(set(ids)) == 1, ids
    assert [g["id"] for g in gprs_of(admin, team)] == ids[:1]


def test_retried_creates_of_slices_endpoints_and_workspace_requests_make_one_each(hub: Hub, admin, make_slice, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,), policy={"max_active_gprs": 5})["name"]

    # A slice (admins).
    name = f"t-{secrets.token_hex(3)}"
    as_admin = keyed(admin, new_key())
    made = as_admin.post("slices", {"name": name, "members": [alice]}, expect=201)
    try:
        again = as_admin.post("slices", {"name": name, "members": [alice]}, expect=201)
        assert (again["name"], again["members"]) == (made["name"], made["members"])
        assert [s["name"] for s in admin.get("slices")["slices"]].count(name) == 1
    finally:
        admin.call("DELETE", f"slices/{name}", expect=204)

    # An endpoint (members): 202 as the first answer was.
    as_member = keyed(as_alice, new_key())
    body = endpoint_body(team, "idem")
    first = as_member.post("endpoints", body, expect=202)
    try:
        again = as_member.post("endpoints", body, expect=202)
        assert (again["slice"], again["name"]) == (first["slice"], first["name"])
        assert [e["name"] for e in as_alice.get(f"endpoints?slice={team}")["endpoints"]] == ["idem"]
    finally:
        as_alice.call("DELETE", f"endpoints/{team}/idem", expect=204)

    # A workspace request (anyone).
    asking = keyed(as_alice, new_key())
    wanted = {"name": f"w-{secrets.token_hex(3)}", "purpose": "retry me"}
    asked = asking.post("workspace-requests", wanted, expect=201)
    again = asking.post("workspace-requests", wanted, expect=201)
    assert again["id"] == asked["id"]
    assert [r["id"] for r in as_alice.get("workspace-requests")["workspace_requests"]] == [asked["id"]]
