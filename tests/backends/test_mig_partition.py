"""Re-partitioning this host's GPUs through NVML (backends/local/mig_partition.py), against the
pynvml double's MIG (tests/nvml_double.py says which NVML behaviour it follows), and choosing the
placements of a layout's GPU instances (backends/local/mig_placements.py)."""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
from dataclasses import dataclass, field

import pytest

from egs_hub.backends import LayoutChangeError
from egs_hub.backends.local.mig_partition import NEEDS_ROOT, apply_layout
from egs_hub.backends.local.mig_placements import choose_placements
from egs_hub.backends.local.nvml import discover_units
from egs_hub.core.layouts import all_of
from egs_hub.core.sharing import LayoutError, check_layout

from ..nvml_double import H100_PROFILES, Device, FakeNVML, GpuInstance, Process, a100, h100, h100_mig

EVERY_GPU = lambda model, memory_gb: True  # noqa: E731
RTX_4090 = Device("NVIDIA GeForce RTX 4090", "GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9", 25757220864)


def busy_mig_device(i: int) -> Device:
    """An H100 split into two 1g.10gb instances, the second running process 77."""
    device = h100_mig(i, ("1g.10gb", "1g.10gb"))
    busy = dataclasses.replace(device.mig_devices[1], compute_processes=(Process(77, 2**30),))
    return dataclasses.replace(device, mig_devices=(device.mig_devices[0], busy))


def layouts(nvml: FakeNVML) -> list[dict[str, int] | None]:
    """Each GPU's layout as discovery finds it (instances per profile; None: a whole GPU)."""
    found: dict[str, dict[str, int] | None] = {d.uuid: None for d in nvml.devices}
    for unit in discover_units("gpu-host", "local", nvml):
        if unit.gpu.parent:
            counts = found[unit.gpu.parent] = found[unit.gpu.parent] or {}
            counts[unit.gpu.profile] = counts.get(unit.gpu.profile, 0) + 1
    return list(found.values())


@dataclass(frozen=True)
class Case:
    devices: list
    mig: dict[str, int] | None
    want: list[dict[str, int] | None] | None = None  # each GPU's layout afterwards; None: as before (refused)
    want_said: str = ""  # in what apply_layout answers
    want_error: str = ""  # in the LayoutChangeError, when refused
    options: dict = field(default_factory=dict)  # FakeNVML's other fields


SEVEN = {"1g.10gb": 7}
ALL_BALANCED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}  # fits only with the 3g.40gb at memory slice 4
CASES = {
    "MIG off -> 7 x 1g.10gb": Case(
        [h100(0), h100(1)], SEVEN, want=[SEVEN, SEVEN], want_said="GPU 0 split into 7 x 1g.10gb; GPU 1 split"
    ),
    "a mixed layout": Case([h100(0)], {"1g.10gb": 2, "4g.40gb": 1}, want=[{"4g.40gb": 1, "1g.10gb": 2}]),
    "all-balanced, from MIG off and from 7 x 1g": Case(
        [h100(0), h100_mig(1)], ALL_BALANCED, want=[ALL_BALANCED, ALL_BALANCED], want_said="GPU 1 split into 1 x 3g"
    ),
    "3g + 4 x 1g: the 1g instances below the 3g": Case(
        [h100(0)], {"3g.40gb": 1, "1g.10gb": 4}, want=[{"3g.40gb": 1, "1g.10gb": 4}]
    ),
    "3g + 2g + 1g from 7 x 1g": Case(
        [h100_mig(0)], {"1g.10gb": 1, "2g.20gb": 1, "3g.40gb": 1}, want=[{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}]
    ),
    "7 x 1g -> whole GPUs": Case([h100_mig(0), h100_mig(1)], None, want=[None, None], want_said="GPU 1 made whole"),
    "already in the layout: left as it is": Case(
        [h100_mig(0), h100(1)], SEVEN, want=[SEVEN, SEVEN], want_said="GPU 1 split into 7 x 1g.10gb; GPU 0 was in"
    ),
    "a driver that names no profile: matched by slices and memory": Case(
        [h100(0)], {"3g.40gb": 2}, want=[{"3g.40gb": 2}], options={"unnamed_profiles": True}
    ),
    "a process on a GPU: refused, nothing changed": Case(
        [h100(0), h100(1, compute_processes=(Process(4242, 2**30),))],
        SEVEN,
        want_error="GPU 1 (H100) runs process(es) 4242: its layout changes only while nothing runs on it",
    ),
    "a process on a MIG device: refused": Case(
        [busy_mig_device(0)], None, want_error="GPU 0 (H100) runs process(es) 77: its layout changes only"
    ),
    "no permission: refused naming root": Case(
        [h100(0)], SEVEN, want_error=NEEDS_ROOT + "; nothing was changed", options={"permitted": False}
    ),
    "no permission in MIG mode: refused before any instance is destroyed": Case(
        [h100_mig(0)], None, want_error="needs root (or CAP_SYS_ADMIN)", options={"permitted": False}
    ),
    "reset needed: refused naming the GPU and the reset": Case(
        [h100(0)],
        SEVEN,
        want_error=(
            "MIG mode on GPU 0 turns on only after a GPU reset (NVML: In use by another client); stop what uses "
            "GPU 0 and reset it as root (`nvidia-smi -i 0 -r`), or reboot the host"
        ),
        options={"needs_reset": {0}},
    ),
    "a reset waiting already: refused before anything": Case(
        [h100(0, mig_pending=True)], SEVEN, want_error="GPU 0 (H100): a MIG mode change waits for a GPU reset"
    ),
    "a layout the GPU cannot hold": Case(
        [h100(0)], {"3g.40gb": 3}, want_error="GPU 0 (H100): the instances take 9 compute slices"
    ),
    "a GPU without MIG": Case([RTX_4090], {"1g.10gb": 2}, want_error="GPU 0 (RTX-4090) does not support MIG"),
    "two 1g.10gb+me (a GPU holds one): refused before any instance is destroyed": Case(
        [h100_mig(0)],
        {"1g.10gb+me": 2, "1g.10gb": 1},
        want_error="GPU 0 holds at most 1 x 1g.10gb+me; ask for another layout; nothing was changed",
    ),
    "a profile the GPU does not offer, after MIG mode is on": Case(
        [h100(0)], {"1g.5gb": 2}, want_error="GPU 0 offers no 1g.5gb (it offers 1g.10gb, 1g.10gb+me, 1g.20gb"
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_apply_layout(case: Case):
    nvml = FakeNVML(list(case.devices), **case.options)
    before = layouts(nvml)

    if case.want_error:
        with pytest.raises(LayoutChangeError) as refused:
            apply_layout(nvml, case.mig, EVERY_GPU)
        assert case.want_error in str(refused.value)
        if "nothing was changed" in str(refused.value):
            assert layouts(nvml) == before
    else:
        said = apply_layout(nvml, case.mig, EVERY_GPU)
        assert case.want_said in said
        assert layouts(nvml) == case.want
    assert nvml.inits == nvml.shutdowns


def test_only_the_machines_gpus_are_changed():
    nvml = FakeNVML([h100(0), a100(0), h100(1)])

    apply_layout(nvml, SEVEN, lambda model, memory_gb: (model, memory_gb) == ("H100", 80))

    assert layouts(nvml) == [SEVEN, None, SEVEN]


def test_a_failure_midway_says_what_was_done_and_the_state_left():
    nvml = FakeNVML([h100(0), h100_mig(1, ("3g.40gb", "3g.40gb")), h100(2)])
    nvml.fail_on, nvml.fail_index = "nvmlGpuInstanceCreateComputeInstance", 1

    with pytest.raises(LayoutChangeError) as failed:
        apply_layout(nvml, SEVEN, EVERY_GPU)

    assert str(failed.value) == (
        "GPU 1: creating a 1g.10gb instance at memory slice 0 failed (GPU is lost). Done before the failure: "
        "GPU 0 split into 7 x 1g.10gb; GPU 1 is left in MIG mode with 1 x 1g.10gb (1 without a compute instance); "
        "GPU(s) 2 were not changed"
    )
    assert layouts(nvml) == [SEVEN, None, None]  # GPU 1: in MIG mode, no MIG device; GPU 2 untouched
    assert nvml.devices[1].gpu_instances_without_ci == (GpuInstance(1, "1g.10gb", 0),)
    assert not nvml.devices[2].mig_enabled


def test_turning_mig_mode_off_left_pending_says_so():
    nvml = FakeNVML([h100_mig(0)], needs_reset={0})

    with pytest.raises(LayoutChangeError) as failed:
        apply_layout(nvml, None, EVERY_GPU)

    assert str(failed.value).startswith("MIG mode on GPU 0 turns off only after a GPU reset")
    assert "GPU 0 is left in MIG mode with no instance (MIG mode off after a GPU reset)" in str(failed.value)


def test_nvml_that_cannot_start_changes_nothing():
    with pytest.raises(LayoutChangeError, match=r"^NVML cannot start \(Driver Not Loaded\); nothing was changed$"):
        apply_layout(FakeNVML([h100(0)], init_error="Driver Not Loaded"), SEVEN, EVERY_GPU)


def test_all_balanced_takes_the_placements_that_fit():
    nvml = FakeNVML([h100_mig(0)])

    apply_layout(nvml, ALL_BALANCED, EVERY_GPU)

    placed = sorted((m.placement, m.name.rsplit(" ", 1)[1]) for m in nvml.devices[0].mig_devices)
    assert placed == [(0, "2g.20gb"), (2, "1g.10gb"), (3, "1g.10gb"), (4, "3g.40gb")]


def test_the_double_creates_only_at_a_free_possible_placement():
    nvml = FakeNVML([h100(0, mig_enabled=True)])
    handle, three_g = nvml.nvmlDeviceGetHandleByIndex(0), 9  # 3g.40gb's profile id

    def create_at(start: int, size: int = 4):
        placement = ctypes.pointer(nvml.c_nvmlGpuInstancePlacement_t(start, size))
        return nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, three_g, placement)

    create_at(4)
    for start, size, want in [(2, 4, nvml.NVML_ERROR_INVALID_ARGUMENT), (4, 4, nvml.NVML_ERROR_INSUFFICIENT_RESOURCES)]:
        with pytest.raises(nvml.NVMLError) as refused:
            create_at(start, size)
        assert refused.value.value == want
    assert nvml.devices[0].gpu_instances_without_ci == (GpuInstance(1, "3g.40gb", 4),)


# --- choosing placements (mig_placements.py) ---------------------------------------------------

H100_PLACEMENTS = {p.name: [(start, p.size) for start in p.starts] for p in H100_PROFILES}


@dataclass(frozen=True)
class PlacementCase:
    counts: dict[str, int]
    want: list[tuple[str, int, int]] | None  # (profile, start, size) by start; None: the layout does not fit
    possible: dict = field(default_factory=lambda: H100_PLACEMENTS)


PLACEMENT_CASES = {
    "all-balanced: 3g.40gb at 4, the rest below it": PlacementCase(
        ALL_BALANCED, [("2g.20gb", 0, 2), ("1g.10gb", 2, 1), ("1g.10gb", 3, 1), ("3g.40gb", 4, 4)]
    ),
    "7 x 1g.10gb": PlacementCase(SEVEN, [("1g.10gb", start, 1) for start in range(7)]),
    "2 x 3g.40gb": PlacementCase({"3g.40gb": 2}, [("3g.40gb", 0, 4), ("3g.40gb", 4, 4)]),
    "4 x 1g.20gb: every slice": PlacementCase({"1g.20gb": 4}, [("1g.20gb", start, 2) for start in (0, 2, 4, 6)]),
    "3 x 2g.20gb + 1g.20gb: the 1g.20gb on the last two slices": PlacementCase(
        {"1g.20gb": 1, "2g.20gb": 3}, [("2g.20gb", 0, 2), ("2g.20gb", 2, 2), ("2g.20gb", 4, 2), ("1g.20gb", 6, 2)]
    ),
    "4g.40gb + 3g.40gb": PlacementCase({"3g.40gb": 1, "4g.40gb": 1}, [("4g.40gb", 0, 4), ("3g.40gb", 4, 4)]),
    "does not fit: 8 x 1g.10gb (slice 7 starts none)": PlacementCase({"1g.10gb": 8}, None),
    "does not fit: 2 x 4g.40gb (one placement)": PlacementCase({"4g.40gb": 2}, None),
    "does not fit: 4g.40gb + 2 x 2g.20gb": PlacementCase({"4g.40gb": 1, "2g.20gb": 2}, None),
    "does not fit: a profile without placements": PlacementCase({"1g.5gb": 1}, None),
    "nothing to place": PlacementCase({}, []),
}


@pytest.mark.parametrize("case", PLACEMENT_CASES.values(), ids=PLACEMENT_CASES.keys())
def test_choose_placements(case: PlacementCase):
    assert choose_placements(case.counts, case.possible) == case.want
    # the same whatever order the layout and the placements come in
    reversed_counts = dict(reversed(case.counts.items()))
    reversed_possible = dict(reversed(case.possible.items()))
    assert choose_placements(reversed_counts, reversed_possible) == case.want


def test_every_h100_layout_check_layout_passes_has_a_placement():
    """Why no test plays a layout without placement on the double's H100: check_layout's slice and
    memory sums leave none (a GPU takes one 1g.10gb+me, which is said otherwise)."""
    names = [p.name for p in H100_PROFILES if p.name != "1g.10gb+me"]
    for counts in itertools.product(*(range(all_of("H100", 80, name) + 1) for name in names)):
        layout = {name: count for name, count in zip(names, counts, strict=True) if count}
        try:
            check_layout("H100", 80, layout)
        except LayoutError:
            continue
        assert choose_placements(layout, H100_PLACEMENTS) is not None, layout
