"""Checklists (core/checks.py): each kind's verdict from what was read off a node, and the checklist's
body (core/requests.py) refusing what cannot run."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core import checks
from egs_hub.core.checks import CheckStatus, GpuIdentity
from egs_hub.core.errors import InvalidRequest
from egs_hub.core.requests import CheckSpec, ClusterChecks, parse_body
from egs_hub.core.samples import GpuProcess, GpuSample

from .builders import NOW

HEALTH = CheckSpec(name="gpu-health", kind="gpu-health", at=("entry", "exit"))


def sample(uuid: str = "g0", **readings) -> GpuSample:
    return GpuSample(uuid=uuid, time=NOW, node="n0", index=0, **readings)


# gpu-health


def test_healthy_gpus_pass_with_their_values():
    readings = {"g0": sample(temperature_c=40, ecc_errors=0), "g1": sample("g1", temperature_c=55, ecc_errors=0)}
    verdict = checks.gpu_health(HEALTH, ["g0", "g1"], readings, {}, checks.ENTRY)
    assert verdict.status is CheckStatus.PASSED and verdict.log == "2 GPU(s) healthy"
    assert verdict.values == {"gpus_read": 2, "ecc_errors": 0, "temperature_c_max": 55}


@pytest.mark.parametrize(
    ("readings", "alerts", "phase", "says"),
    [
        ({"g0": sample(xid=79)}, {"g0": frozenset({"xid"})}, "entry", "XID 79 (fallen off the bus) on GPU g0"),
        ({"g0": sample(ecc_errors=2)}, {}, "entry", "GPU g0 has 2 uncorrected ECC errors"),
        ({"g0": sample(temperature_c=91)}, {}, "entry", "GPU g0 is at 91 C"),
        ({}, {"g0": frozenset({"gpu-lost"})}, "entry", "GPU g0 is lost"),
        ({"g0": sample(processes=(GpuProcess(pid=7),))}, {}, "exit", "process(es) 7 still on GPU g0"),
        ({"g0": sample(memory_used_mib=4096)}, {}, "exit", "GPU g0 still has 4096 MiB in use"),
    ],
)
def test_what_fails_a_gpu(readings, alerts, phase, says):
    verdict = checks.gpu_health(HEALTH, ["g0"], readings, alerts, phase)
    assert verdict.status is CheckStatus.FAILED and says in verdict.log


def test_an_old_fatal_xid_and_leftovers_at_entry_only_get_a_note():
    readings = {"g0": sample(xid=79, processes=(GpuProcess(pid=7),), memory_used_mib=9000)}
    verdict = checks.gpu_health(HEALTH, ["g0"], readings, {}, checks.ENTRY)
    assert verdict.status is CheckStatus.PASSED and "over an hour ago" in verdict.log


def test_thresholds_replace_the_defaults():
    warm = CheckSpec(name="warm", kind="gpu-health", thresholds={"max_temperature_c": 95})
    assert checks.gpu_health(warm, ["g0"], {"g0": sample(temperature_c=91)}, {}, "entry").status is CheckStatus.PASSED


def test_no_readings_skip_it_and_a_gpu_without_one_is_named():
    assert checks.gpu_health(HEALTH, ["g0"], {}, {}, "entry").status is CheckStatus.SKIPPED
    verdict = checks.gpu_health(HEALTH, ["g0", "g1"], {"g0": sample()}, {}, "entry")
    assert verdict.status is CheckStatus.PASSED and "no reading of g1" in verdict.log


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "temperature_c": st.one_of(st.none(), st.floats(0, 120)),
                "ecc_errors": st.one_of(st.none(), st.integers(0, 5)),
                "xid": st.one_of(st.none(), st.sampled_from([0, 13, 31, 48, 79, 95])),
                "memory_used_mib": st.one_of(st.none(), st.floats(0, 80_000)),
            }
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["entry", "exit"]),
    st.booleans(),
)
def test_a_gpu_fails_exactly_when_a_reading_is_past_its_limit(readings, phase, alerting):
    gpus = [f"g{i}" for i in range(len(readings))]
    samples = {g: sample(g, **r) for g, r in zip(gpus, readings, strict=True)}
    alerts = {g: frozenset({"xid"}) for g in gpus} if alerting else {}
    bad = any(
        (r["temperature_c"] or 0) > 85
        or (r["ecc_errors"] or 0) > 0
        or (alerting and r["xid"] in checks.FATAL_XIDS)
        or (phase == "exit" and (r["memory_used_mib"] or 0) > 1024)
        for r in readings
    )
    verdict = checks.gpu_health(HEALTH, gpus, samples, alerts, phase)
    assert verdict.status is (CheckStatus.FAILED if bad else CheckStatus.PASSED)
    assert verdict.values["gpus_read"] == len(gpus)


def test_samples_match_gpus_by_uuid_or_by_node_and_index():
    gpus = [
        GpuIdentity(uuid, node, index, "c")
        for uuid, node, index in [("c/n0/0", "n0", 0), ("GPU-1", "n0", 1), ("c/n1/0", "n1", 0)]
    ]
    by_place = GpuSample(uuid="GPU-real", time=NOW, node="n0", index=0)
    by_uuid = GpuSample(uuid="GPU-1", time=NOW, node="elsewhere", index=9)
    assert checks.match_samples(gpus, [by_place, by_uuid]) == {"c/n0/0": by_place, "GPU-1": by_uuid}


# nccl

NCCL_OUTPUT = """# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    18.52    0.00    0.00      0    18.31    0.00    0.00      0
   134217728      33554432     float     sum      -1   1021.3  131.42  131.42      0   1019.8  131.61  131.61      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 65.8123
"""


def test_nccl_reads_bandwidth_and_latency_against_its_thresholds():
    spec = CheckSpec(name="nccl", kind="nccl", thresholds={"min_busbw_gbps": 50, "max_latency_us": 30})
    verdict = checks.nccl(spec, 0, NCCL_OUTPUT)
    assert verdict.status is CheckStatus.PASSED and verdict.values == {"busbw_gbps": 65.8123, "latency_us": 18.52}
    strict = CheckSpec(name="nccl", kind="nccl", thresholds={"min_busbw_gbps": 100, "max_latency_us": 10})
    failed = checks.nccl(strict, 0, NCCL_OUTPUT)
    assert failed.status is CheckStatus.FAILED
    assert failed.log == "bus bandwidth 65.8123 GB/s is below 100; latency 18.52 us is above 10"


def test_nccl_fails_on_wrong_results_an_exit_code_or_no_results():
    wrong = NCCL_OUTPUT.replace("0.00      0    18.31", "0.00      3    18.31")
    assert "3 wrong result(s)" in checks.nccl(HEALTH, 0, wrong).log
    assert checks.nccl(HEALTH, 1, NCCL_OUTPUT).log.startswith("all_reduce_perf failed: it exited 1")
    assert checks.nccl(HEALTH, 0, "NCCL WARN no GPUs").status is CheckStatus.FAILED


# rdma

IBSTAT = """CA 'mlx5_0'
\tCA type: MT4123
\tNumber of ports: 1
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 200
\t\tLink layer: InfiniBand
CA 'mlx5_1'
\tNumber of ports: 1
\tPort 1:
\t\tState: Down
\t\tPhysical state: Disabled
\t\tRate: 10
\t\tLink layer: InfiniBand
"""


def test_rdma_wants_every_port_active_unless_told_fewer():
    spec = CheckSpec(name="ib", kind="rdma")
    verdict = checks.rdma(spec, 0, IBSTAT)
    assert verdict.status is CheckStatus.FAILED and verdict.log == "mlx5_1 port 1 is Down (Disabled)"
    one = CheckSpec(name="ib", kind="rdma", thresholds={"min_ports": 1, "min_rate_gbps": 100})
    assert checks.rdma(one, 0, IBSTAT).status is CheckStatus.PASSED
    assert checks.rdma(one, 0, IBSTAT).values == {"ports": 2, "active_ports": 1, "rate_gbps_min": 200}
    fast = CheckSpec(name="ib", kind="rdma", thresholds={"min_ports": 1, "min_rate_gbps": 400})
    assert checks.rdma(fast, 0, IBSTAT).log == "mlx5_0 port 1 runs at 200 Gb/s, below 400"
    assert checks.rdma(spec, 0, "").log.startswith("ibstat lists no RDMA port")


def test_rdma_from_node_feature_discovery_labels():
    labels = {checks.RDMA_LABELS[0]: "true"}
    assert checks.rdma_from_labels("n0", labels).status is CheckStatus.PASSED
    assert checks.rdma_from_labels("n0", {checks.RDMA_LABELS[0]: "false"}).status is CheckStatus.FAILED
    assert checks.rdma_from_labels("n0", {}).status is CheckStatus.SKIPPED


# pvc and custom


def test_pvc_claims_must_be_bound_and_usable_on_the_node():
    good = checks.Claim("home-alice", "Bound", None)
    assert checks.pvc("n0", [good]).status is CheckStatus.PASSED
    assert checks.pvc("n0", []).status is CheckStatus.SKIPPED
    verdict = checks.pvc("n0", [good, checks.Claim("data", "Pending", None), checks.Claim("x", "Bound", False)])
    assert verdict.log == "claim data is Pending, not Bound; claim x's volume cannot attach on node n0"


def test_a_command_passes_by_exiting_0_and_reports_the_numbers_of_its_last_line():
    verdict = checks.command(0, 'warming up\n{"ms": 12.5, "ok": true, "name": "x"}\n')
    assert verdict.status is CheckStatus.PASSED and verdict.values == {"ms": 12.5}
    failed = checks.command(2, "x" * 10_000)
    assert failed.status is CheckStatus.FAILED and len(failed.log) == checks.LOG_MAX and failed.log.startswith("...")


# the checklist's body


def test_a_checklist_names_its_fault():
    for checklist, field in [
        ([{"name": "x", "kind": "gpu-health", "thresholds": {"max_temp": 1}}], "checks.0.thresholds.max_temp"),
        ([{"name": "x", "kind": "custom"}], "checks.0.command"),
        ([{"name": "x", "kind": "pvc", "command": ["true"]}], "checks.0.command"),
        ([{"name": "x", "kind": "gpu-health", "at": ["entry", "entry"]}], "checks.0.at"),
        ([{"name": "x", "kind": "gpu-health", "timeout": "2h"}], "checks.0.timeout"),
        ([{"name": "x", "kind": "gpu-health"}, {"name": "x", "kind": "rdma"}], "checks.1.name"),
        ([{"name": "x", "kind": "smoke"}], "checks.0.kind"),
        ([{"name": "x", "kind": "gpu-health", "at": []}], "checks.0.at"),
        ([{"name": "x", "kind": "nccl", "thresholds": {"min_busbw_gbps": -1}}], "checks.0.thresholds.min_busbw_gbps"),
        ([{"name": "X!", "kind": "nccl"}], "checks.0.name"),
    ]:
        with pytest.raises(InvalidRequest) as refused:
            parse_body(ClusterChecks, {"checks": checklist})
        assert refused.value.field == field, (checklist, str(refused.value))


def test_a_checklist_keeps_what_it_was_given():
    body = parse_body(
        ClusterChecks,
        {"checks": [{"name": "smoke", "kind": "custom", "at": ["exit"], "timeout": 30, "command": ["true"]}]},
    )
    (spec,) = body.checks
    assert (spec.at, spec.timeout.total_seconds(), spec.command) == (("exit",), 30, ("true",))
    assert checks.checks_at(body.checks, "entry") == () and checks.checks_at(body.checks, "exit") == body.checks
    assert checks.argv(CheckSpec(name="n", kind="nccl", command=["perf", "-g", "{gpus}"]), (), 4) == ["perf", "-g", "4"]


def test_a_claim_waiting_for_its_first_consumer_is_fine_and_said_so():
    waiting = checks.Claim("ns/scratch", "Pending", None, waits_for_consumer=True)
    verdict = checks.pvc("n0", [checks.Claim("ns/home", "Bound", True), waiting])
    assert verdict.status is CheckStatus.PASSED and verdict.values == {"claims": 2, "waiting_claims": 1}
    assert verdict.log == (
        "1 claim(s) bound and usable on n0; claim ns/scratch is Pending: its StorageClass binds it "
        "WaitForFirstConsumer, where its first pod runs"
    )
    lost = checks.pvc("n0", [checks.Claim("ns/old", "Lost", None, waits_for_consumer=True)])
    assert lost.status is CheckStatus.FAILED and lost.log == "claim ns/old is Lost, not Bound"


# a volume's node affinity


def expr(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, "values": list(values)} if values else {"key": key, "operator": operator}


def name_is(operator: str, *values: str) -> dict:
    return {"key": "metadata.name", "operator": operator, "values": list(values)}


NODE_LABELS = {"topology.kubernetes.io/zone": "eu-1a", "disks": "4", "gpu": "h100"}
AFFINITY_CASES = {
    # terms: want_admits (for node "n0" with NODE_LABELS)
    "In a value": ([{"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "eu-1b", "eu-1a")]}], True),
    "In another value": ([{"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "eu-1b")]}], False),
    "In on a missing label": ([{"matchExpressions": [expr("rack", "In", "r1")]}], False),
    "NotIn a value": ([{"matchExpressions": [expr("gpu", "NotIn", "a100")]}], True),
    "NotIn its value": ([{"matchExpressions": [expr("gpu", "NotIn", "h100")]}], False),
    "NotIn on a missing label": ([{"matchExpressions": [expr("rack", "NotIn", "r1")]}], True),
    "Exists": ([{"matchExpressions": [expr("gpu", "Exists")]}], True),
    "Exists on a missing label": ([{"matchExpressions": [expr("rack", "Exists")]}], False),
    "DoesNotExist": ([{"matchExpressions": [expr("rack", "DoesNotExist")]}], True),
    "DoesNotExist on a label": ([{"matchExpressions": [expr("gpu", "DoesNotExist")]}], False),
    "Gt": ([{"matchExpressions": [expr("disks", "Gt", "3")]}], True),
    "Gt equal": ([{"matchExpressions": [expr("disks", "Gt", "4")]}], False),
    "Lt": ([{"matchExpressions": [expr("disks", "Lt", "10")]}], True),
    "Lt on a label that is no integer": ([{"matchExpressions": [expr("gpu", "Lt", "10")]}], False),
    "Gt on a missing label": ([{"matchExpressions": [expr("rack", "Gt", "1")]}], False),
    "expressions in a term are ANDed": (
        [{"matchExpressions": [expr("gpu", "Exists"), expr("topology.kubernetes.io/zone", "In", "eu-1b")]}],
        False,
    ),
    "terms are ORed": (
        [
            {"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "eu-1b")]},
            {"matchExpressions": [expr("gpu", "In", "h100")]},
        ],
        True,
    ),
    "matchFields on the node's name": ([{"matchFields": [name_is("In", "n1", "n0")]}], True),
    "matchFields on another name": ([{"matchFields": [name_is("In", "n1")]}], False),
    "matchFields NotIn": ([{"matchFields": [name_is("NotIn", "n1")]}], True),
    "fields and expressions ANDed": (
        [{"matchFields": [name_is("In", "n0")], "matchExpressions": [expr("gpu", "In", "a100")]}],
        False,
    ),
    "no terms": ([], False),
    "an empty term": ([{}], False),
    "an unknown operator": ([{"matchExpressions": [expr("gpu", "Like", "h*")]}], False),
    "In without values": ([{"matchExpressions": [expr("gpu", "In")]}], False),
    "Exists with values": ([{"matchExpressions": [expr("gpu", "Exists", "h100")]}], False),
    "Gt with two values": ([{"matchExpressions": [expr("disks", "Gt", "1", "2")]}], False),
    "Gt with no integer": ([{"matchExpressions": [expr("disks", "Gt", "x")]}], False),
    "matchFields on a label": ([{"matchFields": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}], False),
    "matchFields with Exists": ([{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}], False),
    "an invalid term does not spoil another": (
        [{"matchExpressions": [expr("gpu", "Like", "x")]}, {"matchFields": [name_is("In", "n0")]}],
        True,
    ),
}


@pytest.mark.parametrize(("terms", "want_admits"), AFFINITY_CASES.values(), ids=AFFINITY_CASES.keys())
def test_node_affinity_admits(terms, want_admits):
    assert checks.node_affinity_admits(terms, "n0", NODE_LABELS) is want_admits
