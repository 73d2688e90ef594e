"""A slice's workloads and their hotspots (core/workloads.py), by table."""

from __future__ import annotations

from datetime import UTC, datetime

from egs_hub.core.samples import GpuProcess, GpuSample
from egs_hub.core.workloads import ServerInSlice, hotspots, slice_workloads

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def sample(uuid: str, **readings) -> GpuSample:
    return GpuSample(uuid=uuid, time=T0, node="n1", **readings)


def test_processes_join_their_server_and_strays_are_their_own_workload():
    samples = {
        "g0": sample("g0", processes=(GpuProcess(10, 500, "ada", ""), GpuProcess(11, 20, None, None))),
        "g1": sample("g1", processes=(GpuProcess(12, 100, "bob", "big"), GpuProcess(13, 1, "eve", "x"))),
        "g9": sample("g9", processes=(GpuProcess(14, 1, "ada", ""),)),  # not the slice's GPU
    }
    servers = [ServerInSlice("ada", "", ("g0",)), ServerInSlice("bob", "big", ())]

    workloads = slice_workloads(servers, ["g0", "g1"], [], samples)

    assert [(w.kind, w.name, w.user, w.gpus) for w in workloads] == [
        ("server", "ada", "ada", ["g0"]),
        ("server", "bob/big", "bob", ["g1"]),  # started before the GPR: it runs on g1 all the same
        ("process", "pid 11", None, ["g0"]),
        ("process", "pid 13", "eve", ["g1"]),  # eve's server is not in this slice
    ]
    assert workloads[0].processes == [{"pid": 10, "gpu": "g0", "used_mib": 500}]


def test_pods_in_the_slice_namespaces_are_workloads_with_all_their_gpus():
    samples = {
        "g0": sample("g0", pod="train-0", namespace="team-a"),
        "g1": sample("g1", pod="train-0", namespace="team-a"),
        "g2": sample("g2", pod="other", namespace="team-b"),
        "g3": sample("g3", pod="aaa", namespace="team-a"),
    }

    workloads = slice_workloads([], [], ["team-a"], samples)

    assert [(w.kind, w.name, w.gpus) for w in workloads] == [
        ("pod", "team-a/aaa", ["g3"]),
        ("pod", "team-a/train-0", ["g0", "g1"]),
    ]


def test_hotspots_pick_the_hottest_and_most_powered_gpu_and_average_utilization():
    samples = {
        "g0": sample("g0", temperature_c=70.0, power_w=650.0, utilization=90.0),
        "g1": sample("g1", temperature_c=82.0, power_w=300.0, utilization=None),
        "g2": sample("g2", temperature_c=None, power_w=None, utilization=30.0),
    }

    spots = hotspots(["g0", "g1", "g2", "gone"], samples)

    assert (spots.hottest.uuid, spots.most_power.uuid, spots.utilization) == ("g1", "g0", 60.0)
    assert hotspots(["gone"], samples) == hotspots([], {})
    assert hotspots([], {}).hottest is None and hotspots([], {}).utilization is None
