"""Checks that run on a Kubernetes cluster (core/checks.py judges what they find): ``pvc`` reads the
slice's volume claims, ``nccl`` and ``custom`` run in a Job on the node.

Vocabulary: the *checks namespace* (the backend's ``checks_namespace``, created when missing) holds the
check *Jobs*; it is no slice's namespace, so it never carries the ``egs.io/slice`` label. A check's
Job (objects.check_job) runs its command once in its image on the node, tolerating the slice taint and
a cordon, with the GPUs checked as its ``nvidia.com/gpu`` limit. The backend polls the Job until it has
a ``Complete`` or ``Failed`` condition, reads the exit code and the log of its pod (the one labelled
``job-name=<job>``), and deletes the Job whatever happened (its pod goes with it, in the background).

``pvc``: each claim in the slice's namespaces must be Bound to a PersistentVolume whose required node
affinity admits the node (core.checks.node_affinity_admits), or Pending under a StorageClass that
binds ``WaitForFirstConsumer`` (its volume is made where its first pod runs).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ...core import checks
from ...core.checks import CheckStatus, CheckTarget, Claim, Verdict
from ...core.requests import CheckSpec
from ..local.checks import DEFAULT_COMMANDS
from . import objects
from .api import API_ERRORS, describe_error, json_of, json_or_none, text_of
from .nodes import SLICE_LABEL

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.5  # seconds between two reads of a check's Job
# Seconds a Job may take past its timeout to be marked Failed (the Job controller enforces
# activeDeadlineSeconds) before the check fails anyway; under the 30 s the service allows past the timeout.
FINISH_MARGIN = 5.0
LOG_TAIL_LINES = 2000  # lines of a check's log read: core.checks keeps the end
WAITS_FOR_CONSUMER = "WaitForFirstConsumer"


def _failed(message: str) -> Verdict:
    return Verdict(CheckStatus.FAILED, message)


# pvc


async def run_pvc_check(api: client.ApiClient, spec: CheckSpec, target: CheckTarget, request_timeout: float) -> Verdict:
    """The slice's claims in ``target.namespaces``, judged by core.checks.pvc; skipped without namespaces."""
    if not target.namespaces:
        if target.slice is None:
            return checks.skipped("pvc checks the volume claims of a GPR's slice; this run is for no GPR")
        return checks.skipped(f"slice {target.slice} has no namespaces on cluster {target.cluster}")
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    options = {"_preload_content": False, "_request_timeout": request_timeout}
    try:
        node = await json_or_none(core.read_node(target.node, **options))
        if node is None:
            return _failed(f"node {target.node} no longer exists")
        labels = (node.get("metadata") or {}).get("labels") or {}
        classes: dict[str, dict | None] = {}
        claims = []
        for namespace in target.namespaces:
            listed = await json_of(await core.list_namespaced_persistent_volume_claim(namespace, **options))
            for item in listed.get("items") or []:
                metadata, claim_spec = item.get("metadata") or {}, item.get("spec") or {}
                name = f"{namespace}/{metadata.get('name', '')}"
                phase = (item.get("status") or {}).get("phase") or "Pending"  # no status yet: just made
                if phase == "Bound":
                    volume_name = claim_spec.get("volumeName")
                    volume = volume_name and await json_or_none(core.read_persistent_volume(volume_name, **options))
                    if not volume:  # its volume is gone: the PV controller marks such a claim Lost
                        claims.append(Claim(name, "Lost", None))
                        continue
                    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
                    admits = None
                    if required is not None:
                        terms = required.get("nodeSelectorTerms") or []
                        admits = checks.node_affinity_admits(terms, target.node, labels)
                    claims.append(Claim(name, phase, admits))
                elif phase == "Pending" and (class_name := claim_spec.get("storageClassName")):
                    if class_name not in classes:
                        classes[class_name] = await json_or_none(storage.read_storage_class(class_name, **options))
                    mode = (classes[class_name] or {}).get("volumeBindingMode")
                    claims.append(Claim(name, phase, None, waits_for_consumer=mode == WAITS_FOR_CONSUMER))
                else:
                    claims.append(Claim(name, phase, None))
    except API_ERRORS as e:
        return _failed(
            f"cluster {target.cluster}: cannot read the volume claims of slice {target.slice}: {describe_error(e)}"
        )
    return checks.pvc(target.node, claims)


# nccl and custom: a Job on the node


def finished(job: Mapping) -> tuple[str, str] | None:
    """(Complete or Failed, its reason and message) once the Job has either condition; None before."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            why = ": ".join(p for p in (condition.get("reason"), condition.get("message")) if p)
            return condition["type"], why
    return None


def exit_code(pod: Mapping) -> int | None:
    """The exit code of the pod's (first) container once it terminated; None before, or when it never ran."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    terminated = ((statuses[0].get("state") or {}).get("terminated") or {}) if statuses else {}
    code = terminated.get("exitCode")
    return code if isinstance(code, int) else None


class CheckJob:
    """One run of a nccl or custom check in a Job on the target's node."""

    def __init__(
        self,
        api: client.ApiClient,
        spec: CheckSpec,
        target: CheckTarget,
        *,
        namespace: str,
        request_timeout: float,
        poll_interval: float = POLL_INTERVAL,
        margin: float = FINISH_MARGIN,
    ):
        self.spec, self.target, self.namespace = spec, target, namespace
        self.core, self.batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.options = {"_preload_content": False, "_request_timeout": request_timeout}
        self.poll_interval, self.margin = poll_interval, margin
        self.name = objects.check_job_name(spec.name, target.node, secrets.token_hex(3)[:5])

    async def run(self) -> Verdict:
        spec, target = self.spec, self.target
        if spec.image is None:
            return checks.skipped(
                f"{spec.kind} check {spec.name} names no image: on Kubernetes it runs in a Job on the node, "
                "so set its image (PUT /clusters/{name}/checks)"
            )
        created = False
        try:
            if (problem := await self._ensure_namespace()) is not None:
                return _failed(problem)
            await json_of(await self.batch.create_namespaced_job(self.namespace, self._manifest(), **self.options))
            created = True
            return await self._wait_and_judge()
        except API_ERRORS as e:
            return _failed(
                f"cluster {target.cluster}: cannot run check {spec.name} on node {target.node} "
                f"(Job {self.namespace}/{self.name}): {describe_error(e)}"
            )
        finally:
            if created:
                await self._delete()

    def _manifest(self) -> dict:
        spec, target = self.spec, self.target
        return objects.check_job(
            self.name,
            self.namespace,
            check=spec.name,
            node=target.node,
            image=spec.image,
            command=checks.argv(spec, DEFAULT_COMMANDS.get(spec.kind, ()), len(target.gpus)),
            gpus=len(target.gpus),
            env=checks.environment(target),
            timeout_s=int(spec.timeout.total_seconds()),
            gpr_id=target.gpr_id,
        )

    async def _ensure_namespace(self) -> str | None:
        """Create the checks namespace when missing; what is wrong with it, if anything."""
        found = await json_or_none(self.core.read_namespace(self.namespace, **self.options))
        if found is None:
            try:
                await json_of(await self.core.create_namespace(objects.own_namespace(self.namespace), **self.options))
            except ApiException as e:
                if e.status != 409:  # made meanwhile (another check): fine
                    raise
            return None
        owner = ((found.get("metadata") or {}).get("labels") or {}).get(SLICE_LABEL)
        if owner is not None:
            return (
                f"cluster {self.target.cluster}: the checks namespace {self.namespace} is slice {owner}'s "
                f"(labelled {SLICE_LABEL}); give the cluster another checks namespace"
            )
        return None

    async def _wait_and_judge(self) -> Verdict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.timeout.total_seconds() + self.margin
        while True:
            job = await json_of(await self.batch.read_namespaced_job(self.name, self.namespace, **self.options))
            if (ended := finished(job)) is not None:
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                pod = await self._pod()
                return checks.timed_out(self.spec, await self._log(pod) if pod is not None else "")
            await asyncio.sleep(min(self.poll_interval, remaining))
        condition, why = ended
        pod = await self._pod()
        output = await self._log(pod) if pod is not None else ""
        if condition == "Failed" and why.startswith("DeadlineExceeded"):
            return checks.timed_out(self.spec, output)
        code = exit_code(pod) if pod is not None else None
        if code is None:
            return _failed(
                checks.excerpt(f"Job {self.name} {condition.lower()} ({why}) but its check never ran\n{output}")
            )
        if self.spec.kind == "nccl":
            return checks.nccl(self.spec, code, output)
        return checks.command(code, output)

    async def _pod(self) -> dict | None:
        """The Job's pod: the last made of those labelled job-name=<job>, a terminated one first."""
        listed = await json_of(
            await self.core.list_namespaced_pod(self.namespace, label_selector=f"job-name={self.name}", **self.options)
        )
        pods = listed.get("items") or []
        pods.sort(key=lambda p: (exit_code(p) is not None, (p.get("metadata") or {}).get("creationTimestamp") or ""))
        return pods[-1] if pods else None

    async def _log(self, pod: Mapping) -> str:
        """The end of the pod's log; a note instead when it cannot be read (the exit code still counts)."""
        name = (pod.get("metadata") or {}).get("name", "")
        try:
            return await text_of(
                await self.core.read_namespaced_pod_log(
                    name, self.namespace, container=objects.CHECK_CONTAINER, tail_lines=LOG_TAIL_LINES, **self.options
                )
            )
        except API_ERRORS as e:
            return f"(the log of pod {name} cannot be read: {describe_error(e)})"

    async def _delete(self) -> None:
        try:
            await json_of(
                await self.batch.delete_namespaced_job(
                    self.name, self.namespace, propagation_policy="Background", **self.options
                )
            )
        except API_ERRORS as e:
            if not (isinstance(e, ApiException) and e.status == 404):
                log.warning(
                    "cluster %s: Job %s/%s of check %s not deleted (its TTL will): %s",
                    self.target.cluster,
                    self.namespace,
                    self.name,
                    self.spec.name,
                    describe_error(e),
                )
