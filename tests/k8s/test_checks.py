"""Checks on a Kubernetes cluster through the real client: nccl and custom in a Job on the node, pvc from the
slice's claims and their volumes.

No Job controller or kubelet runs in the emulator, so a test plays both (``JobController``): it waits for the
check's Job, checks its manifest, makes its pod as having run (exit code, log), then marks the Job
Complete or Failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from kmock import resource
from kubernetes_asyncio import client, watch

from egs_hub.backends.kubernetes import objects
from egs_hub.core.checks import CheckStatus, CheckTarget
from egs_hub.core.requests import CheckSpec

from ..core.test_checks import NCCL_OUTPUT
from .builders import gpu_node, mig_mixed_node

JOBS = resource("batch", "v1", "jobs")
GPUS = tuple(f"emu/gpu-a/gpu{i}" for i in range(8))
IMAGE = "ghcr.io/example/nccl-tests:2.13"


def target(*namespaces: str, gpr_id: int | None = 7, node: str = "gpu-a") -> CheckTarget:
    return CheckTarget(
        cluster="emu",
        node=node,
        gpus=GPUS,
        phase="entry",
        gpr_id=gpr_id,
        slice="team-a" if gpr_id is not None else None,
        namespaces=namespaces,
    )


def nccl_check(**options) -> CheckSpec:
    return CheckSpec(**{"name": "nccl", "kind": "nccl", "image": IMAGE, "timeout": timedelta(seconds=60), **options})


@dataclass
class JobController:
    """Plays the Job controller and the kubelet for the first Job made in ``namespace``: a pod that exited
    ``exit_code`` having printed ``log``, then the Job's ``condition`` (None: the Job never finishes)."""

    cluster: object
    emulator: object
    namespace: str
    exit_code: int = 0
    log: str = ""
    condition: str | None = "Complete"
    reason: str | None = None
    jobs: list[dict] = field(default_factory=list)

    async def run(self) -> None:
        batch = client.BatchV1Api(self.cluster.api)
        async with watch.Watch().stream(batch.list_namespaced_job, self.namespace, timeout_seconds=30) as stream:
            async for event in stream:
                if event["type"] == "ADDED":
                    job = event["raw_object"]
                    break
        self.jobs.append(job)
        if self.condition is None:
            return
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        template = job["spec"]["template"]
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": True}
        pod = {
            "metadata": {
                "name": f"{name}-x7k2p",
                "labels": {**template["metadata"]["labels"], "job-name": name},
                "ownerReferences": [owner],
            },
            "spec": {**template["spec"], "nodeName": "gpu-a"},
        }
        await self.cluster.core.create_namespaced_pod(self.namespace, pod)
        self.emulator.pod_logs[(self.namespace, pod["metadata"]["name"])] = self.log
        terminated = {"exitCode": self.exit_code, "reason": "Completed" if self.exit_code == 0 else "Error"}
        status = {
            "phase": "Succeeded" if self.exit_code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": "check",
                    "image": template["spec"]["containers"][0]["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        }
        await self.cluster.core.patch_namespaced_pod_status(pod["metadata"]["name"], self.namespace, {"status": status})
        condition = {"type": self.condition, "status": "True", "reason": self.reason}
        await batch.patch_namespaced_job_status(name, self.namespace, {"status": {"conditions": [condition]}})


async def run_with(controller: JobController, check: Callable):
    """The check's verdict, with the controller running beside it; the Job it ran."""
    played = asyncio.ensure_future(controller.run())  # its watch lists what exists first: it sees the Job either way
    checking = asyncio.ensure_future(check())
    try:
        await asyncio.wait({played, checking}, return_when=asyncio.FIRST_EXCEPTION)
        if played.done():
            played.result()  # the controller's failure, rather than the check waiting in vain
        verdict = await checking
        await asyncio.wait_for(played, 10)
    finally:
        for task in (played, checking):
            task.cancel()
    (job,) = controller.jobs
    return verdict, job


def assert_gone(emulator, job: dict) -> None:
    meta = job["metadata"]
    assert emulator.get(JOBS, meta["namespace"], meta["name"]) is None


# nccl and custom: a Job on the node


async def test_nccl_passes_in_a_job_pinned_to_the_node(cluster, emulator, make_backend):
    await cluster.add_node(gpu_node("gpu-a"))
    backend = make_backend()
    controller = JobController(cluster, emulator, "egs-checks", log=NCCL_OUTPUT)
    spec = nccl_check(thresholds={"min_busbw_gbps": 50})
    verdict, job = await run_with(controller, lambda: backend.run_check(spec, target()))

    assert verdict.status is CheckStatus.PASSED, verdict.log
    assert verdict.values == {"busbw_gbps": 65.8123, "latency_us": 18.52}
    meta, job_spec = job["metadata"], job["spec"]
    assert meta["namespace"] == "egs-checks" and meta["name"].startswith("egs-nccl-gpu-a-")
    assert {k: meta["labels"][k] for k in ("egs.io/check", "egs.io/node", "egs.io/gpr")} == {
        "egs.io/check": "nccl",
        "egs.io/node": "gpu-a",
        "egs.io/gpr": "7",
    }
    assert (job_spec["backoffLimit"], job_spec["activeDeadlineSeconds"]) == (0, 60)
    assert job_spec["ttlSecondsAfterFinished"] > 0
    pod = job_spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}]}]
    }
    assert pod["tolerations"] == [
        {"key": "egs.io/slice", "operator": "Exists"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "8"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "EGS_NODE": "gpu-a",
        "EGS_CLUSTER": "emu",
        "EGS_PHASE": "entry",
        "EGS_GPUS": "8",
        "EGS_GPR": "7",
    }
    assert_gone(emulator, job)
    # the checks namespace was made, and is no slice's
    made = await cluster.namespace("egs-checks")
    assert "egs.io/slice" not in (made["metadata"].get("labels") or {})


async def test_nccl_below_its_bandwidth_threshold_fails(cluster, emulator, make_backend):
    namespace = cluster.name("checks")
    backend = make_backend(checks_namespace=namespace)
    controller = JobController(cluster, emulator, namespace, log=NCCL_OUTPUT)
    spec = nccl_check(thresholds={"min_busbw_gbps": 100})
    verdict, job = await run_with(controller, lambda: backend.run_check(spec, target()))
    assert verdict.status is CheckStatus.FAILED
    assert verdict.log == "bus bandwidth 65.8123 GB/s is below 100"
    assert job["metadata"]["namespace"] == namespace
    assert_gone(emulator, job)


async def test_a_custom_check_fails_with_its_exit_code(cluster, emulator, make_backend):
    namespace = cluster.name("checks")
    backend = make_backend(checks_namespace=namespace)
    controller = JobController(
        cluster, emulator, namespace, exit_code=3, log='probing\n{"ms": 12.5}\n', condition="Failed"
    )
    spec = CheckSpec(name="smoke", kind="custom", image="busybox", command=["sh", "-c", "probe {gpus}"])
    verdict, job = await run_with(controller, lambda: backend.run_check(spec, target(gpr_id=None)))
    assert verdict.status is CheckStatus.FAILED and verdict.values == {"ms": 12.5}
    assert verdict.log == 'exit code 3\nprobing\n{"ms": 12.5}\n'
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["sh", "-c", "probe 8"] and container["image"] == "busybox"
    assert "egs.io/gpr" not in job["metadata"]["labels"]
    assert "EGS_GPR" not in {e["name"] for e in container["env"]}
    assert_gone(emulator, job)


async def test_a_job_past_its_deadline_did_not_finish(cluster, emulator, make_backend):
    namespace = cluster.name("checks")
    backend = make_backend(checks_namespace=namespace)
    controller = JobController(
        cluster, emulator, namespace, exit_code=137, log="step 1\n", condition="Failed", reason="DeadlineExceeded"
    )
    spec = CheckSpec(
        name="smoke", kind="custom", image="busybox", command=["sleep", "99"], timeout=timedelta(seconds=2)
    )
    verdict, job = await run_with(controller, lambda: backend.run_check(spec, target()))
    assert verdict.status is CheckStatus.FAILED and verdict.log == "did not finish within 2 s\nstep 1\n"
    assert job["spec"]["activeDeadlineSeconds"] == 2
    assert_gone(emulator, job)


async def test_a_job_that_never_finishes_fails_the_check(cluster, emulator, make_backend):
    namespace = cluster.name("checks")
    backend = make_backend(checks_namespace=namespace)
    controller = JobController(cluster, emulator, namespace, condition=None)
    spec = nccl_check(timeout=timedelta(seconds=1))
    verdict, job = await run_with(controller, lambda: backend.run_check(spec, target()))
    assert verdict.status is CheckStatus.FAILED and verdict.log.startswith("did not finish within 1 s")
    assert_gone(emulator, job)


async def test_an_api_error_fails_the_check_naming_the_cluster(cluster, emulator, make_backend):
    await emulator.set_outage(True)
    verdict = await make_backend().run_check(nccl_check(), target())
    await emulator.set_outage(False)
    assert verdict.status is CheckStatus.FAILED
    assert verdict.log.startswith("cluster emu: cannot run check nccl on node gpu-a (Job egs-checks/egs-nccl-gpu-a-")
    assert verdict.log.endswith("HTTP 503 (the emulated API server is down (outage))")


async def test_a_slice_namespace_is_no_checks_namespace(cluster, make_backend):
    taken = await cluster.add_namespace("team-a", slice="team-a")
    verdict = await make_backend(checks_namespace=taken).run_check(nccl_check(), target())
    assert verdict.status is CheckStatus.FAILED
    assert verdict.log == (
        f"cluster emu: the checks namespace {taken} is slice team-a's (labelled egs.io/slice); "
        "give the cluster another checks namespace"
    )
    assert (await client.BatchV1Api(cluster.api).list_namespaced_job(taken)).items == []


async def test_a_check_without_an_image_is_skipped(make_backend):
    spec = CheckSpec(name="nccl", kind="nccl")
    verdict = await make_backend().run_check(spec, target())
    assert verdict.status is CheckStatus.SKIPPED and "names no image" in verdict.log


async def test_the_units_of_a_share_node_are_checked_on_the_node_but_not_in_a_job(cluster, make_backend):
    """A Job would ask for whole GPUs that a node split into MIG instances does not offer: nccl and custom
    are skipped saying so; rdma reads the node's labels; quarantine cordons the node itself."""
    await cluster.add_node(mig_mixed_node("mig-a", {"1g.10gb": 7}))
    await cluster.patch_node("mig-a", {"metadata": {"labels": {"feature.node.kubernetes.io/rdma.available": "true"}}})
    backend = make_backend()
    unit = CheckTarget("emu", "mig-a:1g.10gb", ("emu/mig-a/mig-1g.10gb-0",), "entry", 7, "team-a")

    verdict = await backend.run_check(nccl_check(), unit)
    assert verdict.status is CheckStatus.SKIPPED
    assert verdict.log == "mig-a:1g.10gb is MIG instances or shares of node mig-a, and a nccl Job asks for whole GPUs"
    verdict = await backend.run_check(CheckSpec(name="ib", kind="rdma"), unit)
    assert (verdict.status, verdict.log) == (CheckStatus.PASSED, "node mig-a: RDMA available")
    await backend.quarantine("mig-a:1g.10gb", "XID 79")
    assert (await cluster.node("mig-a"))["spec"]["unschedulable"] is True


JOB_NAME_CASES = {
    # (check, node): want
    "short": (("nccl", "gpu-a"), "egs-nccl-gpu-a-x1y2z"),
    "a node named as a domain": (("nccl", "GPU-A.eu-1.Example.com"), "egs-nccl-gpu-a-eu-1-example-com-x1y2z"),
    "cut to 63 characters": (("x" * 63, "gpu-a"), "egs-" + "x" * 53 + "-x1y2z"),
    "cut before a dash": (("a" * 52, "gpu-a"), "egs-" + "a" * 52 + "-x1y2z"),
}


@pytest.mark.parametrize(("names", "want"), JOB_NAME_CASES.values(), ids=JOB_NAME_CASES.keys())
def test_a_check_job_is_named_as_a_dns_label(names, want):
    name = objects.check_job_name(*names, "x1y2z")
    assert name == want and len(name) <= 63
    assert objects.label_value("n" * 70 + ".example.com") == "n" * 63


# pvc: the slice's claims


def claim(name: str, phase: str | None, *, volume: str | None = None, storage_class: str = "standard") -> dict:
    body: dict = {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": storage_class,
        },
    }
    if volume:
        body["spec"]["volumeName"] = volume
    if phase:
        body["status"] = {"phase": phase}
    return body


def local_volume(name: str, zone: str | None) -> dict:
    spec: dict = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "local": {"path": "/mnt/disk"}}
    if zone is not None:
        expression = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}
    return {"metadata": {"name": name}, "spec": spec}


async def add_claims(cluster, namespace: str, *claims: dict) -> None:
    for body in claims:
        await cluster.core.create_namespaced_persistent_volume_claim(namespace, body)


PVC = CheckSpec(name="volumes", kind="pvc")


async def pvc_setup(cluster) -> str:
    await cluster.add_node(gpu_node("gpu-a", labels={"topology.kubernetes.io/zone": "eu-1a"}))
    await cluster.core.create_persistent_volume(local_volume("pv-here", "eu-1a"))
    await cluster.core.create_persistent_volume(local_volume("pv-there", "eu-1b"))
    await cluster.core.create_persistent_volume(local_volume("pv-anywhere", None))
    await client.StorageV1Api(cluster.api).create_storage_class(
        {"metadata": {"name": "local"}, "provisioner": "x", "volumeBindingMode": "WaitForFirstConsumer"}
    )
    return await cluster.add_namespace("team-a", slice="team-a")


async def test_bound_claims_whose_volumes_admit_the_node_pass(cluster, emulator, make_backend):
    home = await pvc_setup(cluster)
    await add_claims(cluster, home, claim("a", "Bound", volume="pv-here"), claim("b", "Bound", volume="pv-anywhere"))
    verdict = await make_backend().run_check(PVC, target(home))
    assert verdict.status is CheckStatus.PASSED and verdict.log == "2 claim(s) bound and usable on gpu-a"


async def test_a_volume_whose_affinity_excludes_the_node_fails(cluster, emulator, make_backend):
    home = await pvc_setup(cluster)
    other = await cluster.add_namespace("team-a-data", slice="team-a")
    await add_claims(cluster, home, claim("a", "Bound", volume="pv-here"))
    await add_claims(cluster, other, claim("b", "Bound", volume="pv-there"), claim("c", "Bound", volume="pv-gone"))
    verdict = await make_backend().run_check(PVC, target(home, other))
    assert verdict.status is CheckStatus.FAILED
    assert verdict.log == f"claim {other}/c is Lost, not Bound; claim {other}/b's volume cannot attach on node gpu-a"


async def test_a_claim_waiting_for_its_first_consumer_is_fine(cluster, emulator, make_backend):
    home = await pvc_setup(cluster)
    await add_claims(cluster, home, claim("scratch", "Pending", storage_class="local"))
    verdict = await make_backend().run_check(PVC, target(home))
    assert verdict.status is CheckStatus.PASSED
    assert f"claim {home}/scratch is Pending: its StorageClass binds it WaitForFirstConsumer" in verdict.log
    await add_claims(cluster, home, claim("stuck", "Pending"), claim("old", "Lost"))
    failed = await make_backend().run_check(PVC, target(home))
    assert failed.log == f"claim {home}/old is Lost, not Bound; claim {home}/stuck is Pending, not Bound"


async def test_pvc_without_namespaces_or_claims_is_skipped(cluster, emulator, make_backend):
    home = await pvc_setup(cluster)
    backend = make_backend()
    no_namespaces = await backend.run_check(PVC, target())
    assert no_namespaces.status is CheckStatus.SKIPPED
    assert no_namespaces.log == "slice team-a has no namespaces on cluster emu"
    assert (await backend.run_check(PVC, target(gpr_id=None))).log.endswith("this run is for no GPR")
    assert (await backend.run_check(PVC, target(home))).status is CheckStatus.SKIPPED  # no claims


async def test_pvc_on_a_node_that_is_gone_or_an_api_that_is_down_fails(cluster, emulator, make_backend):
    home = await pvc_setup(cluster)
    gone = await make_backend().run_check(PVC, target(home, node="gpu-z"))
    assert gone.status is CheckStatus.FAILED and gone.log == "node gpu-z no longer exists"
    await emulator.set_outage(True)
    down = await make_backend().run_check(PVC, target(home))
    await emulator.set_outage(False)
    outage = "HTTP 503 (the emulated API server is down (outage))"
    assert down.log == f"cluster emu: cannot read the volume claims of slice team-a: {outage}"
