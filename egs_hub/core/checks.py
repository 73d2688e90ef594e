"""Checklists: the checks a node passes when it enters a GPR (entry) and when it leaves (exit),
and each check's verdict from what was read off the node. No I/O, no clock.

Vocabulary: a *checklist* is a cluster's list of checks (core.requests.CheckSpec; the default
when an admin set none is ``DEFAULT_CHECKLIST``). A *run* is one check on one node for one phase;
its *verdict* is passed, failed or skipped (it could not run here: the reason says why) with the
*values* it measured and a *log* excerpt. Before it ends a run is pending, then running. A node
failing an entry check does not enter (the slice's ``bind_failure`` policy decides what becomes of
the GPR); one failing an exit check is *quarantined*: not planned on until an admin clears it or its
checks pass again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, overload

from .requests import CheckSpec
from .samples import GpuSample

ENTRY: Final = "entry"
EXIT: Final = "exit"
LOG_MAX = 4000  # characters of a run's log kept: its end, where tools print their verdict
# XID errors that mean the GPU cannot be trusted with work (NVIDIA's XID catalogue).
FATAL_XIDS: Mapping[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "fallen off the bus",
    94: "contained ECC error",
    95: "uncontained ECC error",
}
GPU_HEALTH_DEFAULTS = {"max_temperature_c": 85.0, "max_ecc_errors": 0.0, "max_memory_left_mib": 1024.0}
DEFAULT_CHECKLIST = (CheckSpec(name="gpu-health", kind="gpu-health", at=(ENTRY, EXIT)),)


class CheckStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


Values = dict[str, float | int | str]


@dataclass(frozen=True)
class Verdict:
    status: CheckStatus
    log: str
    values: Values = field(default_factory=dict)

    @staticmethod
    def of(problems: Sequence[str], fine: str, values: Values) -> Verdict:
        """Failed naming ``problems``, or passed saying ``fine``."""
        if problems:
            return Verdict(CheckStatus.FAILED, "; ".join(problems), values)
        return Verdict(CheckStatus.PASSED, fine, values)


@dataclass(frozen=True)
class CheckTarget:
    """Where a check runs: ``gpus`` of ``node`` on ``cluster``, for a phase of GPR ``gpr_id`` of
    ``slice`` (whose namespaces there are ``namespaces``), or for an admin (no GPR, no slice)."""

    cluster: str
    node: str
    gpus: tuple[str, ...]
    phase: str
    gpr_id: int | None = None
    slice: str | None = None
    namespaces: tuple[str, ...] = ()


def environment(target: CheckTarget) -> dict[str, str]:
    """What a command or Job check is told of where it runs: EGS_NODE, EGS_CLUSTER, EGS_PHASE, EGS_GPUS
    (how many) and EGS_GPR (when for a GPR)."""
    env = {
        "EGS_NODE": target.node,
        "EGS_CLUSTER": target.cluster,
        "EGS_PHASE": target.phase,
        "EGS_GPUS": str(len(target.gpus)),
    }
    if target.gpr_id is not None:
        env["EGS_GPR"] = str(target.gpr_id)
    return env


def skipped(reason: str) -> Verdict:
    return Verdict(CheckStatus.SKIPPED, reason)


def excerpt(text: str) -> str:
    """The end of ``text``, at most LOG_MAX characters."""
    return text if len(text) <= LOG_MAX else "..." + text[-(LOG_MAX - 3) :]


def checks_at(checklist: Iterable[CheckSpec], phase: str) -> tuple[CheckSpec, ...]:
    return tuple(spec for spec in checklist if phase in spec.at)


@overload
def threshold(spec: CheckSpec, name: str, default: float) -> float: ...
@overload
def threshold(spec: CheckSpec, name: str, default: None = None) -> float | None: ...
def threshold(spec: CheckSpec, name: str, default: float | None = None) -> float | None:
    return spec.thresholds.get(name, default)


# gpu-health: from the GPUs' telemetry


@dataclass(frozen=True)
class GpuIdentity:
    """A GPU as the inventory names it; a sample matches it by UUID, else by node and index
    (the DCGM exporter names a Kubernetes node's GPUs by their real UUIDs)."""

    uuid: str
    node: str
    index: int
    cluster: str


def match_samples(gpus: Sequence[GpuIdentity], samples: Iterable[GpuSample]) -> dict[str, GpuSample]:
    """The sample of each of ``gpus`` that has one, by the GPU's inventory UUID."""
    by_uuid, by_place = {}, {}
    for sample in samples:
        by_uuid[sample.uuid] = sample
        if sample.node is not None and sample.index is not None:
            by_place[(sample.node, sample.index)] = sample
    found = {}
    for gpu in gpus:
        matched = by_uuid.get(gpu.uuid) or by_place.get((gpu.node, gpu.index))
        if matched is not None:
            found[gpu.uuid] = matched
    return found


def gpu_health(
    spec: CheckSpec,
    gpus: Sequence[str],
    samples: Mapping[str, GpuSample],
    alerts: Mapping[str, frozenset[str]],
    phase: str,
) -> Verdict:
    """Judge ``gpus`` from their latest ``samples`` and active alert kinds (core/alerts.py) by the
    sample's UUID: a GPU lost, a fatal XID still alerting, ECC errors or heat past the thresholds
    fail; at exit so do processes left on a GPU and memory not freed. Skipped when no GPU was read."""
    limits = {name: threshold(spec, name, default) for name, default in GPU_HEALTH_DEFAULTS.items()}
    problems: list[str] = []
    notes: list[str] = []
    unread: list[str] = []
    temperatures: list[float] = []
    left: list[float] = []
    ecc, processes = 0, 0
    for uuid in gpus:
        sample = samples.get(uuid)
        active = alerts.get(sample.uuid if sample is not None else uuid, frozenset())
        if "gpu-lost" in active:
            problems.append(f"GPU {uuid} is lost: it stopped reporting")
            continue
        if sample is None:
            unread.append(uuid)
            continue
        if sample.xid is not None and sample.xid in FATAL_XIDS:
            what = f"XID {sample.xid} ({FATAL_XIDS[sample.xid]}) on GPU {uuid}"
            (problems if "xid" in active else notes).append(what if "xid" in active else f"{what}, over an hour ago")
        if sample.ecc_errors is not None:
            ecc += sample.ecc_errors
            if sample.ecc_errors > limits["max_ecc_errors"]:
                problems.append(f"GPU {uuid} has {sample.ecc_errors} uncorrected ECC errors")
        if sample.temperature_c is not None:
            temperatures.append(sample.temperature_c)
            if sample.temperature_c > limits["max_temperature_c"]:
                problems.append(f"GPU {uuid} is at {sample.temperature_c:g} C")
        if phase == EXIT:
            if sample.processes:
                processes += len(sample.processes)
                pids = ", ".join(str(p.pid) for p in sample.processes)
                problems.append(f"process(es) {pids} still on GPU {uuid}")
            if sample.memory_used_mib is not None:
                left.append(sample.memory_used_mib)
                if sample.memory_used_mib > limits["max_memory_left_mib"]:
                    problems.append(f"GPU {uuid} still has {sample.memory_used_mib:g} MiB in use")
    read = len(gpus) - len(unread)
    if not problems and not read:
        return skipped(f"no GPU metrics for {', '.join(gpus) or 'its GPUs'}: no metric source reads them")
    values: Values = {"gpus_read": read, "ecc_errors": ecc}
    if temperatures:
        values["temperature_c_max"] = max(temperatures)
    if phase == EXIT:
        values["processes"] = processes
        if left:
            values["memory_left_mib_max"] = max(left)
    if unread:
        notes.append(f"no reading of {', '.join(unread)}")
    fine = f"{read} GPU(s) healthy" + (f" ({'; '.join(notes)})" if notes else "")
    return Verdict.of(problems + (notes if problems else []), fine, values)


# nccl: nccl-tests' all_reduce_perf


def nccl(spec: CheckSpec, exit_code: int, output: str) -> Verdict:
    """Judge an all_reduce_perf run: it exits 0, no wrong results, bandwidth and latency in bounds."""
    rows = []
    for line in output.splitlines():
        cells = line.split()
        if len(cells) >= 9 and not line.lstrip().startswith("#") and cells[0].isdigit():
            rows.append(cells)
    busbw = re.search(r"Avg bus bandwidth\s*:\s*([0-9.]+)", output)
    if exit_code != 0 or not rows or busbw is None:
        why = f"it exited {exit_code}" if exit_code != 0 else "it printed no results"
        return Verdict(CheckStatus.FAILED, excerpt(f"all_reduce_perf failed: {why}\n{output}"))
    bandwidth, latency = float(busbw.group(1)), float(rows[0][5])
    values: Values = {"busbw_gbps": bandwidth, "latency_us": latency}
    wrong = sum(int(cells[8]) for cells in rows if cells[8].isdigit())
    problems = [f"{wrong} wrong result(s)"] if wrong else []
    least = threshold(spec, "min_busbw_gbps")
    if least is not None and bandwidth < least:
        problems.append(f"bus bandwidth {values['busbw_gbps']:g} GB/s is below {least:g}")
    most = threshold(spec, "max_latency_us")
    if most is not None and latency > most:
        problems.append(f"latency {values['latency_us']:g} us is above {most:g}")
    fine = f"bus bandwidth {values['busbw_gbps']:g} GB/s, latency {values['latency_us']:g} us"
    return Verdict.of(problems, fine, values)


# rdma: InfiniBand / RoCE ports


@dataclass(frozen=True)
class Port:
    device: str
    number: int
    state: str
    physical_state: str
    rate_gbps: float | None
    link_layer: str


def ibstat_ports(output: str) -> list[Port]:
    """The ports ``ibstat`` lists, in its order."""
    ports: list[Port] = []
    device: str | None = None
    port: dict[str, Any] | None = None

    def close() -> None:
        if device is not None and port is not None:
            rate = port.get("rate")
            ports.append(
                Port(
                    device,
                    port["number"],
                    port.get("state", "?"),
                    port.get("physical state", "?"),
                    float(rate) if rate and rate.replace(".", "", 1).isdigit() else None,
                    port.get("link layer", "?"),
                )
            )

    for line in output.splitlines():
        text = line.strip()
        if started := re.match(r"CA '([^']+)'", text):
            close()
            device, port = started.group(1), None
        elif numbered := re.match(r"Port (\d+):$", text):
            close()
            port = {"number": int(numbered.group(1))}
        elif port is not None and ":" in text:
            key, _, value = text.partition(":")
            port[key.strip().lower()] = value.strip()
    close()
    return ports


def rdma(spec: CheckSpec, exit_code: int, output: str) -> Verdict:
    """Judge ``ibstat``'s ports: every port (or ``min_ports``) active and linked up, at ``min_rate_gbps``."""
    if exit_code != 0:
        return Verdict(CheckStatus.FAILED, excerpt(f"ibstat exited {exit_code}\n{output}"))
    ports = ibstat_ports(output)
    if not ports:
        return Verdict(CheckStatus.FAILED, excerpt(f"ibstat lists no RDMA port\n{output}"))
    active = [p for p in ports if p.state == "Active" and p.physical_state == "LinkUp"]
    wanted = threshold(spec, "min_ports", len(ports))
    problems = []
    if len(active) < wanted:
        problems = [f"{p.device} port {p.number} is {p.state} ({p.physical_state})" for p in ports if p not in active]
    least = threshold(spec, "min_rate_gbps")
    if least is not None:
        problems += [
            f"{p.device} port {p.number} runs at {p.rate_gbps:g} Gb/s, below {least:g}"
            for p in active
            if p.rate_gbps is not None and p.rate_gbps < least
        ]
    values: Values = {"ports": len(ports), "active_ports": len(active)}
    rates = [p.rate_gbps for p in active if p.rate_gbps is not None]
    if rates:
        values["rate_gbps_min"] = min(rates)
    layers = sorted({p.link_layer for p in active})
    return Verdict.of(problems, f"{len(active)} of {len(ports)} port(s) active ({', '.join(layers)})", values)


RDMA_LABELS = ("feature.node.kubernetes.io/rdma.available", "feature.node.kubernetes.io/rdma.capable")


def rdma_from_labels(node: str, labels: Mapping[str, str]) -> Verdict:
    """Judge a Kubernetes node's RDMA from Node Feature Discovery's labels (the network operator's
    prerequisite): ``rdma.available`` true passes; a node NFD never labelled is skipped."""
    found = {name: labels[name] for name in RDMA_LABELS if name in labels}
    if not found:
        return skipped(f"node {node} has no {RDMA_LABELS[0]} label: Node Feature Discovery does not label it")
    if found.get(RDMA_LABELS[0]) == "true":
        return Verdict(CheckStatus.PASSED, f"node {node}: RDMA available", {"rdma_available": 1})
    return Verdict(CheckStatus.FAILED, f"node {node}: {RDMA_LABELS[0]} is {found.get(RDMA_LABELS[0])!r}", {})


# pvc: the slice's volume claims


@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim: its phase, and whether its volume's node affinity admits the node
    (None: the volume sets none, any node). ``waits_for_consumer``: a Pending claim whose StorageClass
    binds with ``WaitForFirstConsumer``, so that its volume is made where its first pod runs."""

    name: str
    phase: str
    admits: bool | None
    waits_for_consumer: bool = False


def pvc(node: str, claims: Sequence[Claim]) -> Verdict:
    """Every claim Bound to a volume the node may attach, or Pending until its first consumer binds it
    there; any other Pending or Lost claim fails."""
    if not claims:
        return skipped("the slice has no volume claims on this cluster")
    waiting = [c for c in claims if c.phase == "Pending" and c.waits_for_consumer]
    problems = [f"claim {c.name} is {c.phase}, not Bound" for c in claims if c.phase != "Bound" and c not in waiting]
    problems += [f"claim {c.name}'s volume cannot attach on node {node}" for c in claims if c.admits is False]
    fine = f"{len(claims) - len(waiting)} claim(s) bound and usable on {node}"
    fine += "".join(
        f"; claim {c.name} is Pending: its StorageClass binds it WaitForFirstConsumer, where its first pod runs"
        for c in waiting
    )
    values: Values = {"claims": len(claims)}
    if waiting:
        values["waiting_claims"] = len(waiting)
    return Verdict.of(problems, fine, values)


# A volume's node affinity: Kubernetes' NodeSelector (k8s.io/component-helpers/scheduling/corev1/nodeaffinity).
#
# | part                 | matches when                                                          |
# |----------------------|-----------------------------------------------------------------------|
# | nodeSelectorTerms    | any term matches (none: no node)                                      |
# | a term               | all its matchExpressions and matchFields match (empty: no node)       |
# | In / NotIn           | the label's value is (is not, or there is no such label) in values    |
# | Exists, DoesNotExist | the label is there (is not); values must be empty                     |
# | Gt / Lt              | the label's value and the one value are integers, the label's greater |
# |                      | (less)                                                                |
# | matchFields          | metadata.name only, In / NotIn only                                   |
#
# A requirement the API server would reject (unknown operator or field, wrong number of values)
# makes its term match no node, as the scheduler treats it.


def _requirement_holds(requirement: Mapping, value: str | None) -> bool | None:
    """Whether a requirement holds for a label's ``value`` (None: no such label); None when it is invalid."""
    operator, values = requirement.get("operator"), list(requirement.get("values") or [])
    if operator in ("In", "NotIn"):
        if not values:
            return None
        return (value in values) if operator == "In" else (value not in values)
    if operator in ("Exists", "DoesNotExist"):
        if values:
            return None
        return (value is not None) if operator == "Exists" else (value is None)
    if operator in ("Gt", "Lt"):
        if len(values) != 1 or not re.fullmatch(r"-?\d+", str(values[0])):
            return None
        if value is None or not re.fullmatch(r"-?\d+", value):
            return False
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return None


def _term_matches(term: Mapping, name: str, labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    for requirement in expressions:
        if _requirement_holds(requirement, labels.get(requirement.get("key", ""))) is not True:
            return False
    for requirement in fields:
        if requirement.get("key") != "metadata.name" or requirement.get("operator") not in ("In", "NotIn"):
            return False
        if _requirement_holds(requirement, name) is not True:
            return False
    return True


def node_affinity_admits(terms: Sequence[Mapping], name: str, labels: Mapping[str, str]) -> bool:
    """Whether a node (its ``name`` and ``labels``) matches the ``nodeSelectorTerms`` of a required node
    affinity (a PersistentVolume's ``spec.nodeAffinity.required``): see the table above."""
    return any(_term_matches(term, name, labels) for term in terms)


# custom: any command


def command(exit_code: int, output: str) -> Verdict:
    """Passed when it exited 0; the values are the numbers of a JSON object on its last line, if any."""
    lines = output.strip().splitlines()
    values: Values = {}
    if lines:
        try:
            last = json.loads(lines[-1])
        except ValueError:
            last = None
        if isinstance(last, dict):
            values = {k: v for k, v in last.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    status = CheckStatus.PASSED if exit_code == 0 else CheckStatus.FAILED
    return Verdict(status, excerpt(f"exit code {exit_code}\n{output}"), values)


def timed_out(spec: CheckSpec, output: str) -> Verdict:
    seconds = int(spec.timeout.total_seconds())
    return Verdict(CheckStatus.FAILED, excerpt(f"did not finish within {seconds} s\n{output}"))


def argv(spec: CheckSpec, default: Sequence[str], gpus: int) -> list[str]:
    """The check's command (or ``default``) with ``{gpus}`` replaced."""
    return [arg.replace("{gpus}", str(gpus)) for arg in (spec.command or default)]
