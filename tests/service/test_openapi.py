"""The OpenAPI document checked against the live service with generated input.

Schemathesis generates valid and invalid requests for every operation, as an
admin, against a hub of its own (its random writes must not take GPUs other
tests plan with). Every answer must: not be a 5xx, use a status the document
lists, be JSON matching the document's schema, and reject schema-invalid input
with a 4xx. Afterwards the store must still hold its invariants.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from egs_hub.embedded import free_port

from ..conftest import DATABASES, new_db_url
from .hub import Hub, start_hub, stop_hub

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
EXAMPLES_PER_OPERATION = 25
# Operations without any input that can be invalid: no parameters, or only free-form path strings.
NO_INVALID_INPUT = {
    "GET /health",
    "GET /role-templates",
    "GET /openapi.json",
    "GET /slices",
    "GET /slices/{name}",
    "DELETE /slices/{name}",
    "PUT /slices/{name}/members/{user}",
    "DELETE /slices/{name}/members/{user}",
    "GET /inventory",
    "GET /clusters",
    "DELETE /clusters/{name}",
    "GET /queue/evictions",
    "DELETE /servers/{user}",
    "DELETE /servers/{user}/{server}",
    "POST /server-restarts/{user}",
    "POST /server-restarts/{user}/{server}",
}


@pytest.fixture(scope="module", params=DATABASES)
def fuzzed_hub(request, tmp_path_factory, postgres) -> Iterator[Hub]:
    data_dir = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    running = start_hub(str(data_dir), new_db_url(request.param, data_dir, postgres), free_port())
    # Something real to act on: a slice with a member, a provisioned and a queued GPR.
    admin = running.admin()
    admin.post("slices", {"name": "fuzz", "members": ["fuzzer"]}, expect=201)
    admin.post("gprs", {"slice": "fuzz", "gpus": 1, "duration": "1h"}, expect=201)
    admin.post("gprs", {"slice": "fuzz", "gpus": 1, "duration": "1h"}, expect=201)
    yield running
    stop_hub(running)


def operations(hub: Hub) -> list:
    config = SchemathesisConfig()
    config.projects.default.generation.update(with_security_parameters=False)
    schema = schemathesis.openapi.from_url(hub.api + "openapi.json", config=config)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_every_operation_conforms_to_the_document(fuzzed_hub, mode):
    headers = {"Authorization": f"token {fuzzed_hub.admin_token}"}
    failures, nothing_to_send = [], []
    for operation in operations(fuzzed_hub):

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case):
            case.call_and_validate(base_url=fuzzed_hub.api.rstrip("/"), headers=headers, checks=CHECKS)

        try:
            check()
        except Unsatisfiable:
            # No input of this kind exists (invalid input to an operation whose only inputs are
            # free-form strings): there is nothing to send, which is recorded, not hidden.
            nothing_to_send.append(operation.label)
        except Exception as e:  # one operation's failure must not hide the others'
            failures.append(f"{operation.label}: {e}")
    assert not failures, "\n\n".join(failures)
    if mode is GenerationMode.POSITIVE:
        assert nothing_to_send == []
    else:
        assert set(nothing_to_send) <= NO_INVALID_INPUT, nothing_to_send


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
