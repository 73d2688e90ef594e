"""The OpenAPI document checked against the live service with generated input (fuzzing.py).

Schemathesis generates valid and invalid requests for every operation, as an admin
and as a slice member, against a hub of its own (its random writes must not take GPUs
other tests plan with), from a fixed seed. Afterwards the store must still hold its
invariants. benchmarks/fuzz_api.py runs the same with many more examples.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from schemathesis import GenerationMode

from egs_hub.embedded import free_port

from ..conftest import DATABASES, new_db_url
from .fuzzing import MEMBER, NO_INVALID_INPUT, UserState, actors, changes, fuzz, prepare
from .hub import Hub, start_hub, stop_hub

EXAMPLES_PER_OPERATION = 25
SEED = 19


@pytest.fixture(scope="module", params=DATABASES)
def fuzzed_hub(request, tmp_path_factory, postgres) -> Iterator[Hub]:
    data_dir = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    running = start_hub(str(data_dir), new_db_url(request.param, data_dir, postgres), free_port())
    prepare(running)
    yield running
    stop_hub(running)


@pytest.mark.parametrize("role", ["admin", "member"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_every_operation_conforms_to_the_document(fuzzed_hub, mode, role):
    token = fuzzed_hub.admin_token if role == "admin" else fuzzed_hub.user_token(MEMBER)
    fuzzed = fuzz(fuzzed_hub, token, actors(fuzzed_hub), mode, EXAMPLES_PER_OPERATION, SEED)
    assert not fuzzed.failures, "\n\n".join(fuzzed.failures)
    assert fuzzed.statuses and not any(status >= 500 for status in fuzzed.statuses), fuzzed.statuses
    if mode is GenerationMode.POSITIVE:
        assert fuzzed.nothing_to_send == []
    else:
        assert set(fuzzed.nothing_to_send) <= NO_INVALID_INPUT, fuzzed.nothing_to_send


def test_the_store_holds_its_invariants_after_fuzzing(fuzzed_hub):
    admin = fuzzed_hub.admin()
    gprs = admin.get_all("gprs", "gprs")
    holding = [g for g in gprs if g["status"] in ("provisioning", "provisioned", "releasing")]
    bound = [uuid for g in holding for uuid in g["bound_gpus"]]
    assert len(bound) == len(set(bound)), "a GPU is bound to two GPRs"
    for gpr in gprs:
        events = admin.get(f"events?gpr={gpr['id']}", expect=200)["events"]
        assert events and events[0]["kind"] == "submitted", gpr["id"]
        assert events[-1]["to_status"] in (gpr["status"], None), (gpr["id"], events[-1])
    groups = {g["name"] for g in fuzzed_hub.hub_api("GET", "groups")}
    for slice_ in admin.get("slices", expect=200)["slices"]:
        assert slice_["group"] in groups, f"slice {slice_['name']} names a hub group that does not exist"
    assert requests.get(fuzzed_hub.api + "health", timeout=5).json()["status"] == "ok"


def test_what_users_change_is_seen_by_the_fuzzer(fuzzed_hub):
    """The 4xx check compares UserState: a change made through the API must show in it."""
    state = UserState(fuzzed_hub, actors(fuzzed_hub))
    before = state.read()
    fuzzed_hub.admin().call("PATCH", "slices/fuzz", {"display_name": "seen"}, expect=200)
    after_patch = state.read()
    member = fuzzed_hub.client(fuzzed_hub.user_token(MEMBER))
    gpr = member.post("gprs", {"slice": "fuzz", "gpus": 1, "duration": 60}, expect=201)
    member.call("DELETE", f"gprs/{gpr['id']}", expect=200)
    after_cancel = state.read()
    state.close()
    assert [change.split(":")[0] for change in changes(before, after_patch)] == ["slices", "users' events"]
    assert [change.split(":")[0] for change in changes(after_patch, after_cancel)] == ["gprs", "users' events"]
