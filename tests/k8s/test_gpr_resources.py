"""The GPR custom resource: the pure mapping (spec -> POST /gprs body, GPR -> status) on dicts, and the
resource on the cluster (CRUD, status subresource, generation, finalizers, a watch in every namespace)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes_asyncio import client

from egs_hub.backends.kubernetes import gpr_resources as gr
from egs_hub.backends.kubernetes.gpr_api import MERGE_PATCH
from egs_hub.core.errors import InvalidRequest
from egs_hub.core.model import GPR, EndReason, GPRSpec, Status
from egs_hub.core.requests import GPRCreate, parse_body
from egs_hub.core.snapshot import Estimate

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def resource(spec: object, name: str = "train", namespace: str = "ml-home", **meta) -> dict:
    metadata = {"name": name, "namespace": namespace, "uid": "u-1", "resourceVersion": "7", **meta}
    return {"apiVersion": gr.API_VERSION, "kind": gr.KIND, "metadata": metadata, "spec": spec}


# Spec -> POST /gprs body

BODY_CASES = {
    "gpus and duration; the cluster it lives on": (
        {"gpus": 2, "duration": "1h"},
        # want: the API body
        {"slice": "ml", "name": "train", "gpus": 2, "duration": "1h", "cluster": "east"},
    ),
    "every field, camelCase to the API's names": (
        {
            "nodes": 1,
            "duration": 600,
            "priority": 250,
            "shape": "H100",
            "cluster": "west",
            "startAfter": "2026-11-25T00:00:00Z",
            "idleTimeout": "30m",
            "preemptible": False,
        },
        {
            "slice": "ml",
            "name": "train",
            "nodes": 1,
            "duration": 600,
            "priority": 250,
            "shape": "H100",
            "cluster": "west",
            "start_after": "2026-11-25T00:00:00Z",
            "idle_timeout": "30m",
            "preemptible": False,
        },
    ),
    "a share of a time-sliced GPU": (
        {"gpuShare": 0.25, "duration": "1h"},
        {"slice": "ml", "name": "train", "gpu_share": 0.25, "duration": "1h", "cluster": "east"},
    ),
}


@pytest.mark.parametrize("case", BODY_CASES.values(), ids=BODY_CASES.keys())
def test_the_spec_is_the_api_body(case):
    spec, want_body = case
    body = gr.api_body(resource(spec), "ml", "east")
    assert body == want_body
    parse_body(GPRCreate, body)  # and the API takes it


ERROR_CASES = {
    "no spec": (None, "spec", "spec must be an object"),
    "spec is a list": ([1], "spec", "spec must be an object"),
    "unknown field": ({"gpus": 1, "duration": 5, "start_after": "x"}, "spec.start_after", "unknown field"),
}


@pytest.mark.parametrize("case", ERROR_CASES.values(), ids=ERROR_CASES.keys())
def test_a_spec_the_api_cannot_take_names_the_field(case):
    spec, want_field, want_words = case
    with pytest.raises(InvalidRequest) as refused:
        gr.api_body(resource(spec), "ml", "east")
    assert refused.value.field == want_field and want_words in str(refused.value)


MESSAGE_CASES = {
    "renamed field": ("start_after", "start_after must be a time", "spec.startAfter: startAfter must be a time"),
    "same name": ("gpus", "gpus must be from 1 to 100000, not 0", "spec.gpus: gpus must be from 1 to 100000, not 0"),
    "the slice is the namespace's": ("slice", "no slice", "metadata.namespace: no slice"),
    "the name is the resource's": ("name", "name too long", "metadata.name: name too long"),
}


@pytest.mark.parametrize("case", MESSAGE_CASES.values(), ids=MESSAGE_CASES.keys())
def test_api_errors_are_said_in_the_resources_words(case):
    field, message, want = case
    assert gr.resource_message(field, message) == want


def test_the_api_checks_apply_to_what_the_spec_gives():
    with pytest.raises(InvalidRequest) as refused:
        parse_body(GPRCreate, gr.api_body(resource({"gpus": 0, "duration": 5}), "ml", "east"))
    assert gr.resource_message(refused.value.field, str(refused.value)).startswith("spec.gpus: ")


def test_who_asked_is_a_name_no_hub_user_can_have():
    ref = gr.ref_of(resource({}), "east")
    assert ref == gr.ResourceRef("east", "ml-home", "train", "u-1")
    assert gr.requested_by(ref) == "kubernetes:east/ml-home"
    assert ref.involved_object() == {
        "apiVersion": "egs.io/v1",
        "kind": "GpuProvisionRequest",
        "namespace": "ml-home",
        "name": "train",
        "uid": "u-1",
    }


# GPR -> status


def gpr(status: Status, **changes) -> GPR:
    spec = GPRSpec(slice="ml", duration=timedelta(hours=1), gpus=2, name="train", cluster="east")
    base = GPR(id=7, spec=spec, requested_by="kubernetes:east/ml-home", status=status, created_at=NOW, updated_at=NOW)
    return dataclasses.replace(base, **changes)


START, END = NOW + timedelta(minutes=1), NOW + timedelta(minutes=61)
QUEUED = gpr(Status.QUEUED, status_reason="within the slice's policy")
PROVISIONED = gpr(
    Status.PROVISIONED,
    status_reason="GPUs bound",
    window_start=START,
    window_end=END,
    bound_nodes=("gpu-1",),
    bound_gpus=("east/gpu-1/0", "east/gpu-1/1"),
)


def test_a_queued_gpr_shows_its_estimate():
    estimate = Estimate(7, 2, START, END, None)
    status = gr.gpr_status(QUEUED, estimate, 1, {}, NOW)
    assert status == {
        "gprId": 7,
        "phase": "queued",
        "reason": "within the slice's policy",
        "estimatedStart": "2026-11-24T12:01:00Z",
        "queuePosition": 2,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "lastTransitionTime": "2026-11-24T12:00:00Z",
                "reason": "Submitted",
                "message": "GPR 7",
            },
            {
                "type": "Provisioned",
                "status": "False",
                "lastTransitionTime": "2026-11-24T12:00:00Z",
                "reason": "Queued",
                "message": "within the slice's policy",
            },
        ],
    }


def test_a_provisioned_gpr_shows_its_window_and_nodes_and_transition_times_stay():
    before = gr.gpr_status(QUEUED, Estimate(7, 1, START, END, None), 1, {}, NOW)
    later = NOW + timedelta(minutes=5)
    status = gr.gpr_status(PROVISIONED, None, 1, before, later)
    assert (status["phase"], status["boundNodes"], status["windowStart"], status["windowEnd"]) == (
        "provisioned",
        ["gpu-1"],
        "2026-11-24T12:01:00Z",
        "2026-11-24T13:01:00Z",
    )
    assert "estimatedStart" not in status and "queuePosition" not in status
    accepted, provisioned = status["conditions"]
    assert accepted["lastTransitionTime"] == before["conditions"][0]["lastTransitionTime"]  # still True: kept
    assert (provisioned["status"], provisioned["reason"], provisioned["lastTransitionTime"]) == (
        "True",
        "Provisioned",
        "2026-11-24T12:01:00Z",
    )
    # Recomputed from itself, nothing changes: no patch.
    assert gr.status_patch(status, gr.gpr_status(PROVISIONED, None, 1, status, later + timedelta(hours=1))) is None


def test_an_ended_gpr_says_why_and_the_patch_drops_what_went():
    provisioned = gr.gpr_status(PROVISIONED, None, 1, {}, NOW)
    releasing = dataclasses.replace(
        PROVISIONED, status=Status.RELEASING, end_reason=EndReason.RELEASED_EARLY, status_reason="deleted"
    )
    status = gr.gpr_status(releasing, None, 1, provisioned, NOW + timedelta(minutes=9))
    assert (status["phase"], status["endReason"]) == ("releasing", "released-early")
    assert status["conditions"][1]["status"] == "False"
    assert status["conditions"][1]["lastTransitionTime"] == "2026-11-24T12:09:00Z"
    queued = gr.gpr_status(QUEUED, Estimate(7, 1, START, END, None), 1, {}, NOW)
    patch = gr.status_patch(queued, provisioned)
    assert patch["status"]["estimatedStart"] is None and patch["status"]["queuePosition"] is None
    assert patch["status"]["boundNodes"] == ["gpu-1"]


def test_an_invalid_resource_says_which_field_and_is_not_read_again_until_edited():
    status = gr.invalid_status("start_after", "start_after must be a time", 3, {}, NOW)
    assert status == {
        "phase": "invalid",
        "reason": "spec.startAfter: startAfter must be a time",
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "Accepted",
                "status": "False",
                "lastTransitionTime": "2026-11-24T12:00:00Z",
                "reason": "Invalid",
                "message": "spec.startAfter: startAfter must be a time",
            }
        ],
    }
    assert gr.needs_review(resource({}, generation=3))
    assert not gr.needs_review({**resource({}, generation=3), "status": status})
    assert gr.needs_review({**resource({}, generation=4), "status": status})


def test_finalizer_patches_keep_other_finalizers_and_carry_the_resource_version():
    obj = resource({}, finalizers=["other.io/keep"])
    assert gr.finalizer_patch(obj, False) is None
    added = gr.finalizer_patch(obj, True)
    assert added == {"metadata": {"finalizers": ["other.io/keep", gr.FINALIZER], "resourceVersion": "7"}}
    obj["metadata"]["finalizers"] = added["metadata"]["finalizers"]
    assert gr.has_finalizer(obj) and gr.finalizer_patch(obj, True) is None
    assert gr.finalizer_patch(obj, False)["metadata"]["finalizers"] == ["other.io/keep"]
    assert not gr.is_deleting(obj)
    assert gr.is_deleting(resource({}, deletionTimestamp="2026-11-24T12:00:00Z"))


# The resource on the cluster (the emulator, or a real one with the CRD installed)


async def test_gpr_resources_are_watched_in_every_namespace_and_deleted_through_the_finalizer(cluster, make_backend):
    first, second = await cluster.add_namespace("gpr-a"), await cluster.add_namespace("gpr-b")
    custom = client.CustomObjectsApi(cluster.api)  # kubectl's part
    api = await make_backend().gpr_resources()  # the backend's, as the service gets it
    changed = asyncio.Event()
    reflector = api.reflector(changed.set)

    async def seen(predicate) -> None:
        for _ in range(100):
            if predicate(reflector.objects):
                return
            changed.clear()
            await asyncio.wait_for(changed.wait(), 5)
        raise AssertionError("not seen")

    body = resource({"gpus": 1, "duration": 60})
    del body["metadata"]["namespace"], body["metadata"]["uid"], body["metadata"]["resourceVersion"]
    await custom.create_namespaced_custom_object(gr.GROUP, gr.VERSION, first, gr.PLURAL, body)
    await reflector.start()
    try:
        assert list(reflector.objects) == [(first, "train")]
        await custom.create_namespaced_custom_object(gr.GROUP, gr.VERSION, second, gr.PLURAL, body)
        await seen(lambda objects: (second, "train") in objects)
        obj = reflector.objects[(first, "train")]
        ref = gr.ref_of(obj, "emu")
        assert obj["metadata"]["generation"] == 1
        obj = await api.patch(ref, gr.finalizer_patch(obj, True))
        obj = await api.patch_status(ref, {"status": {"phase": "queued", "gprId": 1}})
        assert (obj["status"]["phase"], obj["metadata"]["generation"]) == ("queued", 1)  # status: no new generation
        # A stale resourceVersion is a conflict, not a lost write.
        with pytest.raises(client.ApiException) as stale:
            await api.patch(ref, {"metadata": {"finalizers": [], "resourceVersion": "1"}})
        assert stale.value.status == 409
        edited = await custom.patch_namespaced_custom_object(
            gr.GROUP, gr.VERSION, first, gr.PLURAL, "train", {"spec": {"gpus": 2}}, _content_type=MERGE_PATCH
        )
        assert edited["metadata"]["generation"] == 2 and edited["status"]["phase"] == "queued"
        # Deleted with the finalizer: it stays, marked, until the finalizer goes.
        await custom.delete_namespaced_custom_object(gr.GROUP, gr.VERSION, first, gr.PLURAL, "train")
        await seen(lambda objects: gr.is_deleting(objects[(first, "train")]))
        await api.patch(ref, gr.finalizer_patch(reflector.objects[(first, "train")], False))
        await seen(lambda objects: (first, "train") not in objects)
        assert list(reflector.objects) == [(second, "train")]
    finally:
        await reflector.stop()


async def test_a_watch_too_far_behind_lists_again(cluster, emulator, make_backend):
    namespace = await cluster.add_namespace("gpr-c")
    custom = client.CustomObjectsApi(cluster.api)  # kubectl's part
    api = await make_backend().gpr_resources()
    reflector = api.reflector(lambda: None)
    await reflector.start()
    try:
        await reflector.stop()  # the service is away while resources come and the log is compacted
        body = {"apiVersion": gr.API_VERSION, "kind": gr.KIND, "metadata": {"name": "late"}, "spec": {}}
        await custom.create_namespaced_custom_object(gr.GROUP, gr.VERSION, namespace, gr.PLURAL, body)
        emulator.compact()
        with pytest.raises(client.ApiException) as gone:
            await reflector.watch_once()  # from its old resourceVersion
        assert gone.value.status == 410
        reflector.start_listing()
        for _ in range(100):
            if (namespace, "late") in reflector.objects:
                break
            await asyncio.sleep(0.05)
        assert (namespace, "late") in reflector.objects and reflector.error is None
    finally:
        await reflector.stop()
