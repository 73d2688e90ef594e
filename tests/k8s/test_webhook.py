"""The pod admission webhook on real AdmissionReview v1 documents (tests/k8s/admission/), patches applied with
jsonpatch."""

from __future__ import annotations

import base64
import copy
import itertools
import json
import pathlib
from dataclasses import dataclass

import jsonpatch
import pytest

from egs_hub.backends.kubernetes.webhook import (
    InvalidReview,
    gpu_count,
    pod_name,
    review_pod,
    slice_patch,
    wants_gpus,
)

ADMISSION = pathlib.Path(__file__).parent / "admission"
SLICES = {"team-a": "team-a", "team-a-dev": "team-a", "ml": "research"}
OWN_TOLERATION = {"key": "egs.io/slice", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}


def load(name: str) -> dict:
    return json.loads((ADMISSION / name).read_text())


def patched(review: dict, answer: dict) -> dict:
    """The pod after the answer's patch (the pod itself when there is none)."""
    pod = review["request"]["object"]
    response = answer["response"]
    if "patch" not in response:
        return pod
    assert response["patchType"] == "JSONPatch"
    return jsonpatch.JsonPatch(json.loads(base64.b64decode(response["patch"]))).apply(pod)


def without_placement(pod: dict) -> dict:
    """The pod less nodeSelector and tolerations, to check that the patch touches nothing else."""
    rest = copy.deepcopy(pod)
    rest["spec"].pop("nodeSelector", None)
    rest["spec"].pop("tolerations", None)
    return rest


@dataclass
class DocumentCase:
    file: str
    want_selector: dict | None  # spec.nodeSelector after the patch
    want_tolerations: list | None  # spec.tolerations after the patch
    want_warning: str = ""  # in response.warnings


DEFAULT_TOLERATIONS = load("gpu-deployment-pod.json")["request"]["object"]["spec"]["tolerations"]
DOCUMENT_CASES = {
    "a Deployment's GPU pod gets the slice's selector and toleration": DocumentCase(
        "gpu-deployment-pod.json", {"egs.io/slice": "team-a"}, [*DEFAULT_TOLERATIONS, OWN_TOLERATION]
    ),
    "an init container's GPU request counts; the pod's own selector is kept": DocumentCase(
        "gpu-init-container-job-pod.json",
        {"kubernetes.io/arch": "amd64", "egs.io/slice": "team-a"},
        [OWN_TOLERATION],
    ),
    "a pod that picked another slice's nodes is put on its own": DocumentCase(
        "gpu-pod-other-slice.json",
        {"egs.io/slice": "team-a", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        [{"key": "egs.io/slice", "operator": "Equal", "value": "team-b", "effect": "NoSchedule"}, OWN_TOLERATION],
    ),
    "a pod asking for MIG instances goes to the share nodes where its slice holds units": DocumentCase(
        "mig-instance-pod.json",
        {"share.egs.io/team-a": "true"},
        [*DEFAULT_TOLERATIONS, {**OWN_TOLERATION, "value": "free"}],
    ),
    "a CPU pod is untouched": DocumentCase("cpu-pod.json", None, DEFAULT_TOLERATIONS),
    "zero GPUs is no GPU": DocumentCase("zero-gpu-pod.json", None, None),
    "an UPDATE is allowed untouched, with a warning": DocumentCase(
        "pod-update.json", None, None, "only Pod CREATE is reviewed, not Pod UPDATE"
    ),
}


@pytest.mark.parametrize("case", DOCUMENT_CASES.values(), ids=DOCUMENT_CASES.keys())
def test_admission_documents(case: DocumentCase):
    review = load(case.file)
    answer = review_pod(review, SLICES.get)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["allowed"] is True
    pod = patched(review, answer)
    assert pod["spec"].get("nodeSelector") == case.want_selector
    assert pod["spec"].get("tolerations") == case.want_tolerations
    assert without_placement(pod) == without_placement(review["request"]["object"])
    warnings = answer["response"].get("warnings", [])
    assert (case.want_warning in warnings[0]) if case.want_warning else warnings == []
    # the API server may call again (reinvocationPolicy IfNeeded): the patched pod needs no more
    again = copy.deepcopy(review)
    again["request"]["object"] = pod
    assert "patch" not in review_pod(again, SLICES.get)["response"]


def test_pods_outside_slices_are_untouched():
    review = load("gpu-deployment-pod.json")
    assert review_pod(review, {}.get)["response"] == {"uid": review["request"]["uid"], "allowed": True}


def test_the_slice_comes_from_the_namespace():
    review = load("gpu-deployment-pod.json")
    review["request"]["namespace"] = "ml"
    assert patched(review, review_pod(review, SLICES.get))["spec"]["nodeSelector"] == {"egs.io/slice": "research"}


SELECTORS = {"absent": None, "empty": {}, "other keys": {"zone": "a"}, "other slice": {"egs.io/slice": "b"}}
TOLERATIONS = {
    "absent": None,
    "empty": [],
    "others": [{"key": "x", "operator": "Exists"}],
    "own already": [OWN_TOLERATION],
    "other slice": [{**OWN_TOLERATION, "value": "b"}],
}


@pytest.mark.parametrize(
    "selector, tolerations",
    list(itertools.product(SELECTORS, TOLERATIONS)),
    ids=[f"selector {s}, tolerations {t}" for s, t in itertools.product(SELECTORS, TOLERATIONS)],
)
def test_the_patch_merges_with_any_selector_and_tolerations(selector, tolerations):
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    if SELECTORS[selector] is not None:
        pod["spec"]["nodeSelector"] = copy.deepcopy(SELECTORS[selector])
    if TOLERATIONS[tolerations] is not None:
        pod["spec"]["tolerations"] = copy.deepcopy(TOLERATIONS[tolerations])
    result = jsonpatch.JsonPatch(slice_patch(pod, "team-a")).apply(pod)
    want_selector = {**(SELECTORS[selector] or {}), "egs.io/slice": "team-a"}
    assert result["spec"]["nodeSelector"] == want_selector
    others = [t for t in TOLERATIONS[tolerations] or [] if t != OWN_TOLERATION]
    assert result["spec"]["tolerations"] == [*others, OWN_TOLERATION]
    assert slice_patch(result, "team-a") == []


GPU_CASES = {
    # (spec, want)
    "limits": ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, True),
    "requests, as a number": ({"containers": [{"resources": {"requests": {"nvidia.com/gpu": 4}}}]}, True),
    "second container": ({"containers": [{}, {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, True),
    "init container": (
        {"containers": [{}], "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        True,
    ),
    "a MIG instance": ({"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}, True),
    "a renamed share": ({"containers": [{"resources": {"requests": {"nvidia.com/gpu.shared": 1}}}]}, True),
    "zero": ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "0"}}}]}, False),
    "zero instances": ({"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb": "0"}}}]}, False),
    "other resources": ({"containers": [{"resources": {"limits": {"cpu": "1", "amd.com/gpu": "1"}}}]}, False),
    "null resources": ({"containers": [{"resources": None}]}, False),
}


@pytest.mark.parametrize("spec, want", GPU_CASES.values(), ids=GPU_CASES.keys())
def test_wants_gpus(spec, want):
    assert wants_gpus({"spec": spec}) is want


INVALID_REVIEWS = {
    "not an object": ([], "not an AdmissionReview"),
    "another kind": ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}, "not an AdmissionReview"),
    "v1beta1": ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "register admission.k8s.io/v1"),
    "no request": ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "no request.uid"),
    "no uid": ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}, "no request.uid"),
}


@pytest.mark.parametrize("body, want", INVALID_REVIEWS.values(), ids=INVALID_REVIEWS.keys())
def test_unanswerable_reviews_are_an_error_for_the_http_layer(body, want):
    with pytest.raises(InvalidReview, match=want):
        review_pod(body, SLICES.get)


UNREADABLE_PODS = {
    "no object": (lambda r: r["request"].pop("object"), "no pod object"),
    "no spec": (lambda r: r["request"]["object"].pop("spec"), "the pod has no spec"),
    "containers not a list": (lambda r: r["request"]["object"]["spec"].update(containers={}), "not a list"),
    "resources not an object": (
        lambda r: r["request"]["object"]["spec"]["containers"][0].update(resources=[]),
        "resources of container 'trainer' is not an object",
    ),
    "limits not an object": (
        lambda r: r["request"]["object"]["spec"]["containers"][0]["resources"].update(limits="1"),
        "resources.limits of container 'trainer' is not an object",
    ),
    "a Deployment, not a Pod": (
        lambda r: r["request"].update(kind={"group": "apps", "version": "v1", "kind": "Deployment"}),
        "not Deployment CREATE",
    ),
}


@pytest.mark.parametrize("edit, want", UNREADABLE_PODS.values(), ids=UNREADABLE_PODS.keys())
def test_unreadable_pods_are_allowed_untouched_with_a_warning(edit, want):
    review = load("gpu-deployment-pod.json")
    edit(review)
    response = review_pod(review, SLICES.get)["response"]
    assert response["allowed"] is True and "patch" not in response
    assert len(response["warnings"]) == 1 and want in response["warnings"][0]
    assert response["warnings"][0].startswith("egs-hub pod webhook: ")


def _pod(containers: list[dict], init: list[dict] = (), name: str | None = None) -> dict:
    metadata = {"name": name} if name else {"generateName": "job-"}
    return {"metadata": metadata, "spec": {"containers": containers, "initContainers": list(init)}}


def _gpus(limit=None, request=None) -> dict:
    resources = {}
    if limit is not None:
        resources["limits"] = {"nvidia.com/gpu": limit}
    if request is not None:
        resources["requests"] = {"nvidia.com/gpu": request}
    return {"name": "c", "resources": resources}


GPU_COUNTS = {
    # name: (pod, GPUs the auto-GPR is sized to)
    "one container's limit": (_pod([_gpus("2")]), 2),
    "containers add up": (_pod([_gpus("2"), _gpus(1)]), 3),
    "a request counts without a limit": (_pod([_gpus(request="1")]), 1),
    "the limit wins over the request": (_pod([_gpus("4", "4")]), 4),
    "an init container asking more is the count": (_pod([_gpus("1")], init=[_gpus("3")]), 3),
    "an init container asking less is not": (_pod([_gpus("2"), _gpus("2")], init=[_gpus("3")]), 4),
    "not a whole number counts 0": (_pod([_gpus("500m")]), 0),
    "no GPUs": (_pod([{"name": "c"}]), 0),
}


@pytest.mark.parametrize(("pod", "want"), GPU_COUNTS.values(), ids=GPU_COUNTS.keys())
def test_gpu_count(pod, want):
    assert gpu_count(pod) == want


def test_pod_name_is_the_generate_name_until_the_api_server_names_it():
    assert pod_name(_pod([], name="trainer-0")) == "trainer-0"
    assert pod_name(_pod([])) == "job-*"
