"""The API's answer models: what the service writes is what the client reads back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from egs_hub.client.api import _read
from egs_hub.client.errors import EGSError
from egs_hub.core.resources import GPR, Error, QueuedGPR, Shape, WaitTimeOption, resource_schemas

T0 = datetime(2026, 11, 26, 9, 30, tzinfo=UTC)
GPR_FIELDS = {
    "id": 7,
    "name": "train",
    "slice": "team",
    "requested_by": "ann",
    "cluster": None,
    "shape": "H100-80GB",
    "gpus": 2,
    "nodes": None,
    "priority": 100,
    "duration": timedelta(hours=2),
    "start_after": None,
    "idle_timeout": timedelta(minutes=30),
    "preemptible": False,
    "template": None,
    "gpu_share": None,
    "status": "queued",
    "status_reason": "",
    "estimated_start": T0 + timedelta(minutes=5),
    "queue_position": 1,
    "planned_gpus": (),
    "planned_nodes": ("n1",),
    "planned_gpu_count": 2,
    "window_start": None,
    "window_end": None,
    "bound_gpus": (),
    "bound_nodes": (),
    "avoid_nodes": (),
    "replaced": (),
    "end_reason": None,
    "created_at": T0,
    "updated_at": T0,
    "ended_at": None,
    "price_per_gpu_hour": None,
    "cost_per_hour": None,
    "reserved_cost": None,
    "used_cost": None,
}


def test_times_and_durations_go_out_as_utc_text_and_seconds():
    wire = GPR(**GPR_FIELDS).model_dump(mode="json", by_alias=True)
    assert wire["duration"] == 7200 and wire["idle_timeout"] == 1800
    assert wire["created_at"] == "2026-11-26T09:30:00Z" and wire["estimated_start"] == "2026-11-26T09:35:00Z"
    assert wire["planned_nodes"] == ["n1"] and wire["ended_at"] is None


@given(
    seconds=st.integers(min_value=0, max_value=10**8),
    offset=st.integers(min_value=-12 * 60, max_value=14 * 60),
    at=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
)
def test_what_the_service_writes_the_client_reads_back(seconds, offset, at):
    """Any time (in any zone) and whole-second duration survives the trip; times come back in UTC."""
    written = GPR(**{**GPR_FIELDS, "duration": timedelta(seconds=seconds), "created_at": at.replace(tzinfo=UTC)})
    read = GPR.model_validate(written.model_dump(mode="json", by_alias=True))
    assert read == written and read.created_at.tzinfo is UTC
    zoned = at.replace(tzinfo=UTC).astimezone(timezone(timedelta(minutes=offset)))
    assert GPR.model_validate({**read.model_dump(), "updated_at": zoned.isoformat()}).updated_at.tzinfo is UTC


def test_a_field_newer_than_the_client_is_kept():
    wire = {**GPR(**GPR_FIELDS).model_dump(mode="json"), "carbon_per_hour": 12.5}
    gpr = GPR.model_validate(wire)
    assert gpr.model_extra == {"carbon_per_hour": 12.5} and gpr.gpu_count == 2


def test_a_queued_gpr_is_a_gpr_with_its_band():
    queued = QueuedGPR(**GPR_FIELDS, band="medium", fair_share_factor=0.5, project_fair_share_factor=1.0)
    assert isinstance(queued, GPR) and queued.model_dump(mode="json")["band"] == "medium"
    with pytest.raises(ValidationError, match="band"):
        QueuedGPR(**GPR_FIELDS, band="urgent", fair_share_factor=0.5, project_fair_share_factor=1.0)


def test_a_wait_is_written_as_wait_seconds():
    option = WaitTimeOption(
        cluster="local",
        shape=Shape(
            name="H100-80GB",
            model="H100",
            memory_gb=80,
            gpus_per_node=8,
            mig_profile=None,
            gpu_equivalents=1.0,
            replicas=1,
        ),
        estimated_start=T0,
        wait=timedelta(minutes=3),
        nodes=("n1",),
        gpus=2,
        cost_per_hour=9.0,
        estimated_cost=None,
    )
    wire = option.model_dump(mode="json", by_alias=True)
    assert wire["wait_seconds"] == 180 and "wait" not in wire
    assert WaitTimeOption.model_validate(wire).wait == timedelta(minutes=3)


def test_an_error_names_its_field_only_when_there_is_one():
    assert Error(status=404, message="no GPR 7").model_dump_json(exclude_none=True) == (
        '{"status":404,"message":"no GPR 7"}'
    )


def test_the_document_lists_only_the_fields_the_models_have():
    schemas = resource_schemas("#/components/schemas/{model}")
    assert schemas["GPR"]["additionalProperties"] is False
    assert set(schemas["QueuedGPR"]["properties"]) == set(GPR_FIELDS) | {
        "band",
        "fair_share_factor",
        "project_fair_share_factor",
    }
    assert schemas["WaitTimeOption"]["properties"]["wait_seconds"]["type"] == "integer"


def test_an_answer_the_client_cannot_read_is_an_error_naming_where():
    wire = GPR(**GPR_FIELDS).model_dump(mode="json")
    with pytest.raises(EGSError, match=r"GPR cannot be read \(duration: .*older than this client"):
        _read(GPR, {**wire, "duration": "two hours"})
