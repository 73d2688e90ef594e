"""The NVML metric source against the pynvml double (tests/nvml_double.py), the process
owner lookup against a made-up /proc, and the real pynvml binding on this host: without the
NVIDIA driver (CI) it must say NVML cannot start; on a GPU host (the device tool) it reads
real GPUs."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pynvml
import pytest

from egs_hub.core.samples import GpuProcess, GpuSample
from egs_hub.metrics import MetricsUnavailable
from egs_hub.metrics.nvml import NVMLSource, throttle_names
from egs_hub.metrics.processes import server_of

from ..nvml_double import H100_BYTES, Device, FakeNVML, Process, h100, h100_mig

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
OWNERS = {4242: ("ada", ""), 4343: ("bob", "big")}


def read(nvml: FakeNVML) -> list[GpuSample]:
    return NVMLSource("gpu-host", nvml, owner_of=OWNERS.get).read(NOW)


@dataclass(frozen=True)
class ReadCase:
    nvml: FakeNVML
    want: dict  # GpuSample fields of the first GPU that must have these values


READ_CASES = {
    "an idle H100": ReadCase(
        FakeNVML([h100(0)]),
        want=dict(
            uuid=h100(0).uuid,
            node="gpu-host",
            index=0,
            time=NOW,
            utilization=0.0,
            memory_utilization=0.0,
            memory_used_mib=512.0,
            memory_total_mib=H100_BYTES / 2**20,
            temperature_c=33.0,
            power_w=70.0,  # NVML answers milliwatts
            power_limit_w=700.0,
            sm_clock_mhz=345,
            throttle_reasons=("gpu_idle",),
            ecc_errors=0,
            xid=0,  # registered for XID events, none reported
            processes=(),
        ),
    ),
    "a busy, power-capped H100 with an owned process": ReadCase(
        FakeNVML(
            [
                h100(
                    0,
                    utilization=97,
                    memory_utilization=41,
                    used_bytes=40 * 2**30,
                    temperature=78,
                    power_mw=698_500,
                    sm_clock_mhz=1755,
                    clocks_event_reasons=0x4 | 0x20,
                    ecc_uncorrected=2,
                    compute_processes=(Process(4242, 39 * 2**30), Process(777, None)),
                )
            ]
        ),
        want=dict(
            utilization=97.0,
            memory_utilization=41.0,
            memory_used_mib=40 * 1024.0,
            temperature_c=78.0,
            power_w=698.5,
            sm_clock_mhz=1755,
            throttle_reasons=("sw_power_cap", "sw_thermal_slowdown"),
            ecc_errors=2,
            processes=(
                GpuProcess(pid=777, used_mib=None),  # memory unknown, owner unknown
                GpuProcess(pid=4242, used_mib=39 * 1024, user="ada", server=""),
            ),
        ),
    ),
    "a process in both lists counts once, with its compute memory": ReadCase(
        FakeNVML([h100(0, compute_processes=(Process(4343, 2**30),), graphics_processes=(Process(4343, 2**20),))]),
        want=dict(processes=(GpuProcess(pid=4343, used_mib=1024, user="bob", server="big"),)),
    ),
    "optional readings a GPU does not support are None": ReadCase(
        FakeNVML(
            [
                h100(
                    0,
                    unsupported=frozenset(
                        {
                            "nvmlDeviceGetPowerUsage",
                            "nvmlDeviceGetEnforcedPowerLimit",
                            "nvmlDeviceGetClockInfo",
                            "nvmlDeviceGetCurrentClocksEventReasons",
                            "nvmlDeviceGetTotalEccErrors",
                            "nvmlDeviceGetComputeRunningProcesses",
                            "nvmlDeviceGetGraphicsRunningProcesses",
                            "nvmlDeviceRegisterEvents",
                        }
                    ),
                )
            ]
        ),
        want=dict(
            power_w=None,
            power_limit_w=None,
            sm_clock_mhz=None,
            throttle_reasons=(),
            ecc_errors=None,
            processes=None,  # cannot tell, which is not "no process"
            xid=None,  # cannot tell, which is not "no XID error"
            temperature_c=33.0,
        ),
    ),
    "graphics processes alone are listed when compute ones are not supported": ReadCase(
        FakeNVML(
            [h100(0, graphics_processes=(Process(9, 2**20),), unsupported={"nvmlDeviceGetComputeRunningProcesses"})]
        ),
        want=dict(processes=(GpuProcess(pid=9, used_mib=1),)),
    ),
}


@pytest.mark.parametrize("case", READ_CASES.values(), ids=READ_CASES.keys())
def test_read(case: ReadCase):
    (sample,) = read(case.nvml)

    assert {name: getattr(sample, name) for name in case.want} == case.want


@pytest.mark.parametrize(
    "function",
    ["nvmlDeviceGetUUID", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature"],
)
def test_a_gpu_failing_a_required_reading_is_left_out_and_the_others_are_read(function: str):
    nvml = FakeNVML([h100(0), h100(1), h100(2)], fail_on=function, fail_index=1)

    assert [s.uuid for s in read(nvml)] == [h100(0).uuid, h100(2).uuid]


def test_a_gpu_in_mig_mode_is_sampled_per_instance():
    """Each MIG instance by its MIG- UUID with its own memory and processes, the physical GPU's
    temperature, power, clocks, ECC and XID, and no utilization (NVML reads none in MIG mode)."""
    mig = h100_mig(1, layout=("3g.40gb", "1g.10gb"), temperature=51, power_mw=250_000)
    busy, idle = mig.mig_devices
    busy = Device(**{**busy.__dict__, "used_bytes": 3 * 2**30, "compute_processes": (Process(4242, 3 * 2**30),)})
    mig = Device(**{**mig.__dict__, "mig_devices": (busy, idle)})
    samples = read(FakeNVML([h100(0), mig]))

    assert [(s.uuid, s.index) for s in samples] == [(h100(0).uuid, 0), (busy.uuid, None), (idle.uuid, None)]
    whole, first, second = samples
    assert whole.utilization == 0.0 and whole.temperature_c == 33.0
    for sample in (first, second):
        assert (sample.utilization, sample.memory_utilization) == (None, None)
        assert (sample.temperature_c, sample.power_w, sample.power_limit_w) == (51.0, 250.0, 700.0)
        assert (sample.sm_clock_mhz, sample.ecc_errors, sample.xid, sample.node) == (345, 0, 0, "gpu-host")
    assert (first.memory_used_mib, first.memory_total_mib) == (3072.0, 40192.0)
    assert first.processes == (GpuProcess(pid=4242, used_mib=3072, user="ada", server=""),)
    assert (second.memory_total_mib, second.processes) == (9856.0, ())


def test_an_xid_of_a_gpu_in_mig_mode_shows_on_each_of_its_instances():
    nvml = FakeNVML([h100_mig(0, layout=("3g.40gb", "3g.40gb"))])
    source = NVMLSource("gpu-host", nvml, owner_of=OWNERS.get)
    source.read(NOW)
    nvml.xid(0, 79)

    assert [s.xid for s in source.read(NOW)] == [79, 79]


def test_nvml_starts_once_and_close_shuts_it_down():
    nvml = FakeNVML([h100(0)])
    source = NVMLSource("gpu-host", nvml)

    source.read(NOW)
    source.read(NOW)
    assert (nvml.inits, nvml.shutdowns) == (1, 0)
    source.close()
    source.close()
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_xid_errors_come_from_nvml_events_and_the_last_one_sticks():
    nvml = FakeNVML([h100(0), h100(1), h100(2, unsupported=frozenset({"nvmlDeviceRegisterEvents"}))])
    source = NVMLSource("gpu-host", nvml, owner_of=OWNERS.get)
    assert [s.xid for s in source.read(NOW)] == [0, 0, None]
    assert nvml.registered == {0, 1} and nvml.event_sets == 1

    nvml.xid(1, 79)  # fallen off the bus
    nvml.xid(2, 48)  # not registered: never seen
    assert [s.xid for s in source.read(NOW)] == [0, 79, None]
    assert [s.xid for s in source.read(NOW)] == [0, 79, None]  # the last code, as DCGM's gauge keeps it
    nvml.xid(0, 31)
    nvml.xid(1, 94)
    nvml.xid(1, 13)
    assert [s.xid for s in source.read(NOW)] == [31, 13, None]
    assert nvml.pending == []

    source.close()
    assert nvml.event_sets == 0 and nvml.shutdowns == 1


def test_a_gpu_appearing_later_is_registered_for_xid_events():
    nvml = FakeNVML([h100(0)])
    source = NVMLSource("gpu-host", nvml, owner_of=OWNERS.get)
    source.read(NOW)
    nvml.devices.append(h100(1))
    nvml.xid(1, 79)  # before it was registered: lost, as with the driver
    assert [s.xid for s in source.read(NOW)] == [0, 0]
    nvml.xid(1, 79)
    assert [s.xid for s in source.read(NOW)] == [0, 79]


def test_nvml_failing_to_start_or_count_is_metrics_unavailable_naming_the_node():
    with pytest.raises(MetricsUnavailable, match="NVML cannot start on gpu-host: Driver Not Loaded"):
        read(FakeNVML(init_error="Driver Not Loaded"))
    with pytest.raises(MetricsUnavailable, match="NVML cannot count the GPUs on gpu-host: GPU is lost"):
        read(FakeNVML([h100(0)], fail_on="nvmlDeviceGetCount"))


async def test_sample_reads_off_the_event_loop():
    samples = await NVMLSource("gpu-host", FakeNVML([h100(0), h100(1)])).sample(NOW)

    assert [s.index for s in samples] == [0, 1]


def test_throttle_names_by_bit():
    assert throttle_names(0) == ()
    assert throttle_names(0x1 | 0x40 | 0x80) == ("gpu_idle", "hw_thermal_slowdown", "hw_power_brake_slowdown")
    assert throttle_names(0x10000) == ()  # bits NVML may add later are not named


# --- processes.server_of --------------------------------------------------------------------


def write_environ(proc, pid: int, environ: bytes) -> None:
    os.makedirs(proc / str(pid))
    (proc / str(pid) / "environ").write_bytes(environ)


def test_server_of_reads_the_hub_server_from_the_process_environment(tmp_path):
    write_environ(tmp_path, 10, b"PATH=/bin\0JUPYTERHUB_USER=ada\0JUPYTERHUB_SERVER_NAME=gpu\0")
    write_environ(tmp_path, 11, b"JUPYTERHUB_USER=bob\0")
    write_environ(tmp_path, 12, b"PATH=/bin\0HOME=/root\0")
    write_environ(tmp_path, 13, b"")

    assert server_of(10, str(tmp_path)) == ("ada", "gpu")
    assert server_of(11, str(tmp_path)) == ("bob", "")  # the default server has no name
    assert server_of(12, str(tmp_path)) is None
    assert server_of(13, str(tmp_path)) is None  # a zombie's environment is empty
    assert server_of(14, str(tmp_path)) is None  # gone


def test_server_of_a_real_process_started_under_a_hub_server():
    child = subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "JUPYTERHUB_USER": "carol", "JUPYTERHUB_SERVER_NAME": "x"}
    )
    try:
        # Until the child has exec'd, /proc shows the environment it was forked with.
        deadline = time.monotonic() + 5
        while server_of(child.pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server_of(child.pid) == ("carol", "x")
    finally:
        child.kill()
        child.wait()


# --- the real binding -------------------------------------------------------------------------


def test_real_pynvml_on_this_host():
    """Without the NVIDIA driver NVML cannot start and the source says so; on a GPU host every
    GPU is read with plausible values, and the UUIDs are those nvidia-smi lists."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        with pytest.raises(MetricsUnavailable, match=re.escape(str(e))):
            NVMLSource("gpu-host").read(NOW)
        return
    pynvml.nvmlShutdown()
    source = NVMLSource("gpu-host")
    try:
        samples = source.read(NOW)
    finally:
        source.close()
    listed = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid,mig.mode.current", "--format=csv,noheader"], capture_output=True, text=True
    )
    whole = [line.split(", ")[0] for line in listed.stdout.splitlines() if not line.endswith(", Enabled")]
    assert [s.uuid for s in samples if s.uuid.startswith("GPU-")] == whole
    for s in samples:
        if s.uuid.startswith("MIG-"):  # an instance of a GPU in MIG mode
            assert s.utilization is None and s.memory_utilization is None
        else:
            assert 0 <= s.utilization <= 100 and 0 <= s.memory_utilization <= 100
        assert 0 < s.memory_used_mib <= s.memory_total_mib
        assert 0 < s.temperature_c < 120
        assert s.power_w is None or 0 < s.power_w <= 1.2 * s.power_limit_w
        assert s.processes is None or all(p.pid > 0 for p in s.processes)
