"""Re-partitioning this host's GPUs through NVML: applying a MIG layout (issue 23).

Vocabulary (NVML's): a GPU in *MIG mode* is split into *GPU instances* (GIs), each of a *GPU instance
profile* (``1g.10gb``; NVML enumerates profiles by ``NVML_GPU_INSTANCE_PROFILE_*`` and creates one by
the ``id`` its profile info reports), and a GI runs *compute instances* (CIs); a GI with one CI over
the whole of it is one MIG device, the unit egs-hub hands out (core/sharing.py). MIG mode has a
*current* and a *pending* value: a change that the GPU cannot take at once (another client holds it,
a pass-through VM) waits for a *GPU reset*.

``apply_layout`` splits every GPU of a machine into a layout (``{"1g.10gb": 7}``; None: whole GPUs,
MIG mode off), one GPU after the other:

1. refuse before changing anything when a GPU cannot hold the layout (core/sharing.check_layout),
   does not support MIG, waits for a reset already, or runs a process (on it or on a MIG device);
2. to a layout: turn MIG mode on (a change left pending is refused, naming the reset to run), choose
   where each GI goes among the *placements* NVML allows its profile (mig_placements.py; a layout
   they cannot hold, or with more GIs of a profile than the GPU takes, is refused before anything is
   destroyed), destroy the GPU's CIs and GIs, then create the layout's GIs at the placements chosen,
   each with one CI over the whole GI;
3. to whole GPUs: destroy the CIs and GIs, then turn MIG mode off (same reset rule).

A GPU already in the layout is left as it is. Changing MIG needs root (or CAP_SYS_ADMIN); NVML's
NVML_ERROR_NO_PERMISSION is said as that. A step that fails raises LayoutChangeError saying what
was done before and the state the GPU is left in, as NVML then reports it. NVML calls block: the
backend runs this in a worker thread.
"""

from __future__ import annotations

import ctypes
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType

from ...core.layouts import describe
from ...core.sharing import LayoutError, check_layout, profile_memory_gb, profile_slices
from ...nvml_handles import as_text, mig_handles, mig_modes
from .. import LayoutChangeError
from .mig_placements import Chosen, Placement, choose_placements
from .nvml import gpu_model

NEEDS_ROOT = (
    "changing MIG layouts needs root (or CAP_SYS_ADMIN): run the service as root, or split the GPUs by hand "
    "as root (`nvidia-smi mig ...`) and egs-hub finds the new instances at its next discovery"
)


@dataclass(frozen=True)
class Profile:
    """A GPU instance profile a GPU offers: the ``id`` NVML creates it by, its ``name`` (``1g.10gb``:
    the one in NVML's profile info, else made of its slices and memory as NVIDIA's tools do),
    its compute ``slices``, memory in GB, and how many instances of it fit at most."""

    id: int
    name: str
    slices: int
    memory_gb: int
    instance_count: int
    named_by_nvml: bool


@dataclass
class Target:
    """A GPU of the machine: its NVML index and handle, model and memory (as discovery names them)."""

    index: int
    handle: object
    model: str
    memory_gb: int


def apply_layout(nvml: ModuleType, mig: Mapping[str, int] | None, on_machine: Callable[[str, int], bool]) -> str:
    """Split each GPU of this host for which ``on_machine(model, memory_gb)`` holds into ``mig`` (None:
    whole GPUs); what was done, or LayoutChangeError saying why not (and what was done before)."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise LayoutChangeError(f"NVML cannot start ({e}); nothing was changed") from None
    try:
        targets = _machine_gpus(nvml, on_machine)
        for target in targets:
            _check_before(nvml, target, mig)
        return Repartition(nvml, targets).run(dict(mig) if mig else None)
    finally:
        nvml.nvmlShutdown()


def _machine_gpus(nvml: ModuleType, on_machine: Callable[[str, int], bool]) -> list[Target]:
    """The GPUs of the machine, in index order; LayoutChangeError when NVML cannot read them or finds none."""
    index = 0
    try:
        targets = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            model = gpu_model(as_text(nvml.nvmlDeviceGetName(handle)))
            memory_gb = round(nvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20 / 1024)
            if on_machine(model, memory_gb):
                targets.append(Target(index, handle, model, memory_gb))
    except nvml.NVMLError as e:
        raise LayoutChangeError(f"NVML failed reading GPU {index} ({e}); nothing was changed") from None
    if not targets:
        raise LayoutChangeError("NVML finds no GPU of this machine; nothing was changed")
    return targets


def _check_before(nvml: ModuleType, target: Target, mig: Mapping[str, int] | None) -> None:
    """Refuse, before anything is changed, a GPU that cannot take ``mig`` now."""
    gpu = f"GPU {target.index} ({target.model})"
    try:
        modes = mig_modes(nvml, target.handle)
        pids = _running_pids(nvml, target.handle, modes)
    except nvml.NVMLError as e:
        raise LayoutChangeError(f"NVML failed reading {gpu} ({e}); nothing was changed") from None
    if mig:
        try:
            check_layout(target.model, target.memory_gb, mig)
        except LayoutError as e:
            raise LayoutChangeError(f"{gpu}: {e}; nothing was changed") from None
        if modes is None:
            raise LayoutChangeError(f"{gpu} does not support MIG; nothing was changed")
    if modes is not None and modes[0] != modes[1]:
        waiting = f"{gpu}: a MIG mode change waits for a GPU reset"
        raise LayoutChangeError(f"{waiting}; {_reset(target)}; nothing was changed")
    if pids:
        raise LayoutChangeError(
            f"{gpu} runs process(es) {', '.join(map(str, pids))}: its layout changes only while nothing runs on it; "
            f"stop them (`nvidia-smi -i {target.index}` lists them) and ask again; nothing was changed"
        )


def _running_pids(nvml: ModuleType, handle, modes: tuple[bool, bool] | None) -> list[int]:
    """The compute processes on the GPU or on its MIG devices (NVML answers the GPU's handle in MIG mode
    only to privileged callers, each MIG device's to all)."""
    handles = [handle, *(mig_handles(nvml, handle) if modes and modes[0] else ())]
    return sorted({p.pid for h in handles for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)})


def _reset(target: Target) -> str:
    return (
        f"stop what uses GPU {target.index} and reset it as root (`nvidia-smi -i {target.index} -r`), or reboot "
        "the host, then ask for the layout again"
    )


# --- the steps --------------------------------------------------------------------------------


@dataclass
class Repartition:
    """The steps of one re-partition of ``targets``, and what they did so far, to say it when one fails:
    the GPUs ``changed`` (what each became), those ``kept`` as they were, and whether the GPU at hand
    has been ``touched``."""

    nvml: ModuleType
    targets: list[Target]
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    touched: bool = False

    def run(self, mig: dict[str, int] | None) -> str:
        for target in self.targets:
            self.touched = False
            if mig:
                self.split(target, mig)
            else:
                self.make_whole(target)
        return "; ".join(self.changed + self.kept)

    def split(self, target: Target, mig: dict[str, int]) -> None:
        """Split one GPU into ``mig``: MIG mode on, its instances destroyed, the layout's created."""
        nvml = self.nvml
        on, _pending = self.step(target, "reading its MIG mode", mig_modes, nvml, target.handle)
        if not on:
            self.set_mig_mode(target, on=True)
        profiles = self.step(target, "reading its MIG profiles", _profiles, nvml, target.handle)
        wanted = {name: _profile_named(profiles, name) for name in mig}
        missing = [name for name, profile in wanted.items() if profile is None]
        if missing:
            offered = ", ".join(sorted({p.name for p in profiles})) or "none"
            raise self.failed(target, f"GPU {target.index} offers no {', '.join(missing)} (it offers {offered})")
        present = self.step(target, "listing its instances", _instances, nvml, target.handle, profiles)
        if all(gi.computes for gi in present) and Counter(gi.profile.name for gi in present) == Counter(mig):
            self.kept.append(f"GPU {target.index} was in {_counts(mig)} already")
            return
        chosen = self.choose(target, wanted, mig)
        self.destroy(target, present)
        for name, start, size in chosen:
            self.create(target, wanted[name], start, size)
        self.changed.append(f"GPU {target.index} split into {_counts(mig)}")

    def make_whole(self, target: Target) -> None:
        """Make one GPU whole: its instances destroyed, MIG mode off."""
        modes = self.step(target, "reading its MIG mode", mig_modes, self.nvml, target.handle)
        if not modes or not modes[0]:
            self.kept.append(f"GPU {target.index} was whole already")
            return
        profiles = self.step(target, "reading its MIG profiles", _profiles, self.nvml, target.handle)
        self.destroy(target, self.step(target, "listing its instances", _instances, self.nvml, target.handle, profiles))
        self.set_mig_mode(target, on=False)
        self.changed.append(f"GPU {target.index} made whole")

    def set_mig_mode(self, target: Target, on: bool) -> None:
        """Turn MIG mode on or off; a change NVML leaves pending is refused, naming the reset to run."""
        nvml = self.nvml
        mode = nvml.NVML_DEVICE_MIG_ENABLE if on else nvml.NVML_DEVICE_MIG_DISABLE
        status = self.change(target, f"turning MIG mode {_on(on)}", nvml.nvmlDeviceSetMigMode, target.handle, mode)
        # NVML may reset the GPU to activate the mode: its handle is looked up again (NVML's documentation)
        target.handle = self.step(target, "finding it again", nvml.nvmlDeviceGetHandleByIndex, target.index)
        current, _pending = self.step(target, "reading its MIG mode", mig_modes, nvml, target.handle)
        if status != nvml.NVML_SUCCESS or current != on:
            why = f"NVML: {nvml.nvmlErrorString(status)}" if status != nvml.NVML_SUCCESS else "NVML left it pending"
            pending = f"MIG mode on GPU {target.index} turns {_on(on)} only after a GPU reset ({why})"
            raise self.failed(target, f"{pending}; {_reset(target)}")

    def choose(self, target: Target, wanted: dict[str, Profile], mig: dict[str, int]) -> list[Chosen]:
        """Where each GPU instance of ``mig`` goes, among the placements NVML allows its profile on the GPU
        (they do not depend on the instances there); refused where the GPU holds fewer instances of a
        profile, or no choice of placements keeps the instances apart."""
        over = [
            f"{profile.instance_count} x {name}"
            for name, profile in wanted.items()
            if mig[name] > profile.instance_count
        ]
        if over:
            raise self.failed(target, f"GPU {target.index} holds at most {', '.join(over)}; ask for another layout")
        possible = {
            name: self.step(
                target, f"reading the placements of {name}", _possible_placements, self.nvml, target.handle, profile
            )
            for name, profile in wanted.items()
        }
        chosen = choose_placements(mig, possible)
        if chosen is None:
            raise self.failed(
                target,
                f"{_counts(mig)} has no placement on GPU {target.index}: the memory slices NVML allows each profile "
                "cannot hold all the instances without overlapping; ask for another layout",
            )
        return chosen

    def destroy(self, target: Target, present: list[Instance]) -> None:
        """Destroy each GPU instance ``present`` on the GPU, its compute instances first."""
        for gi in present:
            for ci in gi.computes:
                self.change(target, "destroying a compute instance", self.nvml.nvmlComputeInstanceDestroy, ci)
            self.change(target, f"destroying a {gi.profile.name} instance", self.nvml.nvmlGpuInstanceDestroy, gi.handle)

    def create(self, target: Target, profile: Profile, start: int, size: int) -> None:
        """Create one GPU instance of ``profile`` at the placement ``(start, size)`` and one compute
        instance over the whole of it."""
        nvml, what = self.nvml, f"creating a {profile.name} instance at {_slices(start, size)}"
        placement = ctypes.pointer(nvml.c_nvmlGpuInstancePlacement_t(start, size))  # NVML takes a pointer to it
        gi = self.change(
            target, what, nvml.nvmlDeviceCreateGpuInstanceWithPlacement, target.handle, profile.id, placement
        )
        computes = self.step(target, what, _compute_profiles, nvml, gi)
        spanning = next((info for info in computes if info.sliceCount == profile.slices), None)
        if spanning is None:
            raise self.failed(target, f"GPU {target.index} offers no compute instance over a whole {profile.name}")
        self.change(target, what, nvml.nvmlGpuInstanceCreateComputeInstance, gi, spanning.id)

    def step(self, target: Target, what: str, call: Callable, *args):
        """``call(*args)``; an NVML error is a LayoutChangeError saying what failed, what was done and the state."""
        try:
            return call(*args)
        except self.nvml.NVMLError as e:
            if getattr(e, "value", None) == self.nvml.NVML_ERROR_NO_PERMISSION:
                raise self.failed(target, NEEDS_ROOT) from None
            raise self.failed(target, f"GPU {target.index}: {what} failed ({e})") from None

    def change(self, target: Target, what: str, call: Callable, *args):
        """A ``step`` that changes the GPU."""
        result = self.step(target, what, call, *args)
        self.touched = True
        return result

    def failed(self, target: Target, reason: str) -> LayoutChangeError:
        """The error for a step that failed on ``target``: why, what was done before, and the state left."""
        if not self.changed and not self.touched:
            return LayoutChangeError(f"{reason}; nothing was changed")
        said = [*self.changed]
        if self.touched:
            said.append(f"GPU {target.index} is left {_state(self.nvml, target)}")
        else:
            said.append(f"GPU {target.index} was not changed")
        after = [t.index for t in self.targets if t.index > target.index]
        if after:
            said.append(f"GPU(s) {', '.join(map(str, after))} were not changed")
        return LayoutChangeError(f"{reason}. Done before the failure: {'; '.join(said)}")


def _state(nvml: ModuleType, target: Target) -> str:
    """The GPU's MIG state as NVML reports it now, to say where a failed change left it."""
    try:
        modes = mig_modes(nvml, target.handle)
        if not modes or not modes[0]:
            return "with MIG mode off" + (" (on after a GPU reset)" if modes and modes[1] else "")
        present = _instances(nvml, target.handle, _profiles(nvml, target.handle))
    except nvml.NVMLError as e:
        return f"in a state NVML cannot read ({e})"
    counts = Counter(gi.profile.name for gi in present)
    idle = sum(1 for gi in present if not gi.computes)
    return (
        f"in MIG mode with {_counts(counts) if counts else 'no instance'}"
        + (f" ({idle} without a compute instance)" if idle else "")
        + ("" if modes[1] else " (MIG mode off after a GPU reset)")
    )


def _counts(layout: Mapping[str, int]) -> str:
    return describe(dict(layout)).removesuffix(" per GPU")


def _on(on: bool) -> str:
    return "on" if on else "off"


def _slices(start: int, size: int) -> str:
    return f"memory slice {start}" if size == 1 else f"memory slices {start}-{start + size - 1}"


# --- reading profiles and instances -----------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """A GPU instance on the GPU: its handle, profile and compute instances' handles."""

    handle: object
    profile: Profile
    computes: tuple


def _profiles(nvml: ModuleType, handle) -> list[Profile]:
    """The GPU instance profiles the GPU (in MIG mode) offers, in NVML's enumeration order."""
    total = nvml.nvmlDeviceGetMemoryInfo(handle).total
    profiles = []
    for enum in range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        info = _offered(nvml, nvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, enum)
        if info is None:
            continue
        memory_gb = _memory_gb(info.memorySizeMB, total)
        name = as_text(getattr(info, "name", b"")).strip()
        label = name.removeprefix("MIG ").lower() if name else f"{info.sliceCount}g.{memory_gb}gb"
        profiles.append(Profile(info.id, label, info.sliceCount, memory_gb, info.instanceCount, bool(name)))
    return profiles


def _profile_named(profiles: list[Profile], name: str) -> Profile | None:
    """The profile called ``name``; where NVML names no profile (a driver before the named profile info),
    the first one with its slices and memory (never a ``+me`` one: only a name tells it)."""
    named = next((p for p in profiles if p.named_by_nvml and p.name == name), None)
    if named is not None or name.endswith("+me"):
        return named
    slices, memory_gb = profile_slices(name), profile_memory_gb(name)
    return next((p for p in profiles if not p.named_by_nvml and (p.slices, p.memory_gb) == (slices, memory_gb)), None)


def _possible_placements(nvml: ModuleType, handle, profile: Profile) -> list[Placement]:
    """The placements NVML allows a GPU instance of ``profile`` on the GPU, in NVML's order: asked first
    with no array, for how many there are, then with an array that holds them (the count goes in and out,
    as nvmlDeviceGetGpuInstancePossiblePlacements_v2 has it)."""
    count = ctypes.c_uint(0)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile.id, None, ctypes.pointer(count))
    if not count.value:
        return []
    found = (nvml.c_nvmlGpuInstancePlacement_t * count.value)()
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile.id, found, ctypes.pointer(count))
    return [(p.start, p.size) for p in found[: count.value]]


def _memory_gb(profile_mib: int, total_bytes: int) -> int:
    """A profile's memory in GB as NVIDIA's tools name it: its share of the GPU's memory rounded up to
    eighths, times the GPU's memory in whole GB (a 9,856 MiB instance of an 80 GB H100 is a 10gb one)."""
    share = math.ceil(profile_mib * 2**20 / total_bytes * 8) / 8
    return round(share * math.ceil(total_bytes / 2**30))


def _instances(nvml: ModuleType, handle, profiles: list[Profile]) -> list[Instance]:
    """Every GPU instance on the GPU, with its compute instances."""
    found = []
    for profile in profiles:
        call, handle_type = nvml.nvmlDeviceGetGpuInstances, nvml.c_nvmlGpuInstance_t
        for gi in _listed(call, handle_type, handle, profile.id, profile.instance_count):
            found.append(Instance(gi, profile, tuple(_computes(nvml, gi))))
    return found


def _computes(nvml: ModuleType, gi) -> Iterator:
    """The compute instances of GPU instance ``gi``."""
    call, handle_type = nvml.nvmlGpuInstanceGetComputeInstances, nvml.c_nvmlComputeInstance_t
    for info in _compute_profiles(nvml, gi):
        yield from _listed(call, handle_type, gi, info.id, info.instanceCount)


def _compute_profiles(nvml: ModuleType, gi) -> list:
    """The infos of the compute instance profiles (shared engines) GPU instance ``gi`` offers."""
    shared = nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    infos = (
        _offered(nvml, nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, enum, shared)
        for enum in range(nvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
    )
    return [info for info in infos if info is not None]


def _offered(nvml: ModuleType, call: Callable, *args):
    """A profile's info, None where the GPU does not offer that profile."""
    try:
        return call(*args)
    except nvml.NVMLError as e:
        if getattr(e, "value", None) in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_INVALID_ARGUMENT):
            return None
        raise


def _listed(call: Callable, handle_type, owner, profile_id: int, capacity: int) -> list:
    """The instances ``call`` lists (nvmlDeviceGetGpuInstances, nvmlGpuInstanceGetComputeInstances): NVML
    fills an array of ``handle_type`` that the caller sizes for as many as the profile holds, and says
    how many it wrote."""
    if capacity < 1:
        return []
    found = (handle_type * capacity)()
    count = ctypes.c_uint(capacity)
    call(owner, profile_id, found, ctypes.pointer(count))
    return list(found[: count.value])
