"""GPU threshold alerts with hysteresis, decided from samples; no I/O, no clock.

Vocabulary: an *alert kind* is one thing that can go wrong with a GPU
(temperature, power, memory-full, ecc, xid, gpu-lost). A kind raises at its
*raise threshold* and clears at its lower *clear threshold*; between the two
nothing changes, which is the *hysteresis* that keeps a GPU hovering at the
limit from raising and clearing on every sample. Event kinds (ecc, xid) raise
on a new event and clear after a quiet period; gpu-lost raises when an expected
GPU stays silent and clears when it reports again. An *active alert* is one
raised and not yet cleared; at most one is active per (GPU uuid, kind). A
*change* is the raise or the clear of an alert, the thing to notify about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from enum import StrEnum

from .samples import GpuSample


class AlertKind(StrEnum):
    TEMPERATURE = "temperature"
    POWER = "power"
    MEMORY_FULL = "memory-full"
    ECC = "ecc"
    XID = "xid"
    GPU_LOST = "gpu-lost"


@dataclass(frozen=True)
class AlertThresholds:
    """Raise and clear levels; a reading at or above a raise level raises, one below the clear level clears.

    Fractions are of the GPU's power limit (power) and of its total memory (memory-full).
    """

    temperature_raise_c: float = 85.0
    temperature_clear_c: float = 80.0
    power_raise_fraction: float = 0.98
    power_clear_fraction: float = 0.90
    memory_raise_fraction: float = 0.95
    memory_clear_fraction: float = 0.90
    ecc_clear_after: timedelta = timedelta(hours=1)  # without a new uncorrected ECC error
    xid_clear_after: timedelta = timedelta(hours=1)  # without a new XID error
    lost_after: timedelta = timedelta(seconds=60)  # an expected GPU without a sample this long is lost

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_fraction") and not 0 < value <= 1:
                raise ValueError(f"{f.name} must be a fraction in (0, 1], not {value}")
            if isinstance(value, timedelta) and value <= timedelta(0):
                raise ValueError(f"{f.name} must be a positive duration, not {value}")
        for kind, unit in (("temperature", "c"), ("power", "fraction"), ("memory", "fraction")):
            clear, raise_ = getattr(self, f"{kind}_clear_{unit}"), getattr(self, f"{kind}_raise_{unit}")
            if clear >= raise_:
                raise ValueError(f"{kind}_clear_{unit} ({clear}) must be below {kind}_raise_{unit} ({raise_})")


@dataclass(frozen=True)
class Alert:
    """One alert as raised; ``value`` and ``threshold`` share a unit (°C, W, MiB, count, seconds)."""

    kind: AlertKind
    uuid: str
    node: str | None
    value: float | None
    threshold: float | None
    message: str
    raised_at: datetime


Active = Mapping[tuple[str, AlertKind], Alert]


@dataclass(frozen=True)
class AlertChange:
    """``alert`` became active (``raised``) or stopped being active at ``time``; a clear carries the raised alert."""

    alert: Alert
    raised: bool
    time: datetime


@dataclass(frozen=True)
class GpuMemory:
    """What evaluation remembers about one GPU between calls.

    ``ecc_errors`` and ``xid`` are the last known readings (a ``None`` reading
    keeps the previous one); ``*_event_at`` is when the last new ECC error or XID
    was seen; ``expected_since`` is when the GPU (re)joined the expected ones.
    """

    sampled_at: datetime | None = None
    expected_since: datetime | None = None
    ecc_errors: int | None = None
    xid: int = 0
    ecc_event_at: datetime | None = None
    xid_event_at: datetime | None = None


@dataclass(frozen=True)
class AlertState:
    """Active alerts by (uuid, kind) and per-GPU memory; start with ``AlertState()``."""

    active: Active = field(default_factory=dict)
    gpus: Mapping[str, GpuMemory] = field(default_factory=dict)


def evaluate(
    state: AlertState,
    samples: Iterable[GpuSample],
    expected: Iterable[tuple[str, str | None]],
    thresholds: AlertThresholds,
    now: datetime,
) -> tuple[AlertState, list[AlertChange]]:
    """The next state and the changes since ``state``, sorted by (uuid, kind), oldest first within one.

    ``expected`` lists (uuid, node) of every GPU that should report. Samples are
    read oldest first; one older than the last sample of its GPU is ignored.
    Quiet periods (ecc, xid) and silence (gpu-lost) are measured up to ``now``.
    """
    active = dict(state.active)
    gpus = dict(state.gpus)
    changes: list[AlertChange] = []
    # 1. readings: level kinds and new events, sample by sample
    for sample in sorted(samples, key=lambda s: (s.time, s.uuid)):
        before = gpus.get(sample.uuid, GpuMemory())
        if before.sampled_at is not None and sample.time < before.sampled_at:
            continue
        changes += apply(active, check_levels(active, sample, thresholds))
        changes += apply(active, check_events(active, sample, before, thresholds))
        gpus[sample.uuid] = remember(before, sample)
    # 2. the clock: event kinds clear after a quiet period
    changes += apply(active, clear_quiet_events(active, gpus, thresholds, now))
    # 3. silence: expected GPUs that stopped reporting
    expected_nodes = dict(expected)
    gpus = watch_expected(gpus, expected_nodes, now)
    changes += apply(active, check_lost(active, gpus, expected_nodes, thresholds, now))
    changes.sort(key=lambda c: (c.alert.uuid, c.alert.kind))
    return AlertState(active, gpus), changes


def apply(active: dict[tuple[str, AlertKind], Alert], changes: list[AlertChange]) -> list[AlertChange]:
    """Record ``changes`` in ``active`` (evaluate's working copy) and return them."""
    for change in changes:
        key = (change.alert.uuid, change.alert.kind)
        if change.raised:
            active[key] = change.alert
        else:
            del active[key]
    return changes


# -- level kinds: temperature, power, memory-full


@dataclass(frozen=True)
class Reading:
    """A reading with its raise and clear levels in its own unit, and the message it would raise with."""

    value: float
    raise_at: float
    clear_below: float
    message: str


def read_temperature(sample: GpuSample, t: AlertThresholds) -> Reading | None:
    if sample.temperature_c is None:
        return None
    c = sample.temperature_c
    message = (
        f"{name_gpu(sample)} is at {number(c)} °C "
        f"(alert at {number(t.temperature_raise_c)} °C, clears below {number(t.temperature_clear_c)} °C)"
    )
    return Reading(c, t.temperature_raise_c, t.temperature_clear_c, message)


def read_power(sample: GpuSample, t: AlertThresholds) -> Reading | None:
    if sample.power_w is None or not sample.power_limit_w:
        return None
    watts, limit = sample.power_w, sample.power_limit_w
    message = (
        f"{name_gpu(sample)} draws {watts:,.0f} W, {watts / limit:.0%} of its {limit:,.0f} W limit "
        f"(alert at {t.power_raise_fraction:.0%}, clears below {t.power_clear_fraction:.0%})"
    )
    return Reading(watts, t.power_raise_fraction * limit, t.power_clear_fraction * limit, message)


def read_memory(sample: GpuSample, t: AlertThresholds) -> Reading | None:
    if sample.memory_used_mib is None or not sample.memory_total_mib:
        return None
    used, total = sample.memory_used_mib, sample.memory_total_mib
    message = (
        f"{name_gpu(sample)} has {used:,.0f} of {total:,.0f} MiB memory in use ({used / total:.0%}; "
        f"alert at {t.memory_raise_fraction:.0%}, clears below {t.memory_clear_fraction:.0%})"
    )
    return Reading(used, t.memory_raise_fraction * total, t.memory_clear_fraction * total, message)


READERS: dict[AlertKind, Callable[[GpuSample, AlertThresholds], Reading | None]] = {
    AlertKind.TEMPERATURE: read_temperature,
    AlertKind.POWER: read_power,
    AlertKind.MEMORY_FULL: read_memory,
}


def check_levels(active: Active, sample: GpuSample, t: AlertThresholds) -> list[AlertChange]:
    """Raise a level kind at or above its raise level, clear it below its clear level; no reading, no change."""
    changes = []
    for kind, read in READERS.items():
        reading = read(sample, t)
        if reading is None:
            continue
        current = active.get((sample.uuid, kind))
        if current is None and reading.value >= reading.raise_at:
            alert = Alert(kind, sample.uuid, sample.node, reading.value, reading.raise_at, reading.message, sample.time)
            changes.append(AlertChange(alert, True, sample.time))
        elif current is not None and reading.value < reading.clear_below:
            changes.append(AlertChange(current, False, sample.time))
    return changes


# -- event kinds: ecc, xid


def ecc_increase(before: GpuMemory, sample: GpuSample) -> int:
    """New uncorrected ECC errors since the last known count (0 without both readings, or after a reset)."""
    if sample.ecc_errors is None or before.ecc_errors is None:
        return 0
    return max(0, sample.ecc_errors - before.ecc_errors)


def is_new_xid(before: GpuMemory, sample: GpuSample) -> bool:
    return sample.xid is not None and sample.xid != 0 and sample.xid != before.xid


def check_events(active: Active, sample: GpuSample, before: GpuMemory, t: AlertThresholds) -> list[AlertChange]:
    """Raise ecc on an increased count and xid on a new XID, unless already active (then the quiet period restarts)."""
    alerts = []
    if (new := ecc_increase(before, sample)) and (sample.uuid, AlertKind.ECC) not in active:
        message = (
            f"{name_gpu(sample)} reported {new} new uncorrected ECC error{'s' if new > 1 else ''} "
            f"({sample.ecc_errors} since the driver loaded; "
            f"clears after {duration(t.ecc_clear_after)} without new ones)"
        )
        alerts.append(Alert(AlertKind.ECC, sample.uuid, sample.node, sample.ecc_errors, None, message, sample.time))
    if is_new_xid(before, sample) and (sample.uuid, AlertKind.XID) not in active:
        message = (
            f"{name_gpu(sample)} reported XID error {sample.xid} "
            f"(clears after {duration(t.xid_clear_after)} without a new one)"
        )
        alerts.append(Alert(AlertKind.XID, sample.uuid, sample.node, sample.xid, None, message, sample.time))
    return [AlertChange(alert, True, sample.time) for alert in alerts]


def remember(before: GpuMemory, sample: GpuSample) -> GpuMemory:
    return replace(
        before,
        sampled_at=sample.time,
        ecc_errors=before.ecc_errors if sample.ecc_errors is None else sample.ecc_errors,
        xid=before.xid if sample.xid is None else sample.xid,
        ecc_event_at=sample.time if ecc_increase(before, sample) else before.ecc_event_at,
        xid_event_at=sample.time if is_new_xid(before, sample) else before.xid_event_at,
    )


def clear_quiet_events(
    active: Active, gpus: Mapping[str, GpuMemory], t: AlertThresholds, now: datetime
) -> list[AlertChange]:
    """Clear ecc and xid alerts whose GPU saw no new event for the kind's quiet period."""
    changes = []
    for (uuid, kind), alert in active.items():
        if kind is AlertKind.ECC:
            last_event, quiet = gpus[uuid].ecc_event_at, t.ecc_clear_after
        elif kind is AlertKind.XID:
            last_event, quiet = gpus[uuid].xid_event_at, t.xid_clear_after
        else:
            continue
        if last_event is not None and now - last_event >= quiet:
            changes.append(AlertChange(alert, False, now))
    return changes


# -- gpu-lost


def watch_expected(
    gpus: Mapping[str, GpuMemory], expected: Mapping[str, str | None], now: datetime
) -> dict[str, GpuMemory]:
    """Start the silence clock of GPUs that just became expected; stop it for those no longer expected."""
    watched = dict(gpus)
    for uuid in expected:
        memory = watched.get(uuid, GpuMemory())
        if memory.expected_since is None:
            watched[uuid] = replace(memory, expected_since=now)
    for uuid, memory in gpus.items():
        if uuid not in expected and memory.expected_since is not None:
            watched[uuid] = replace(memory, expected_since=None)
    return watched


def silence(memory: GpuMemory, now: datetime) -> timedelta:
    """How long an expected GPU has not reported: since its last sample, or since it became expected."""
    since = max(t for t in (memory.sampled_at, memory.expected_since) if t is not None)
    return now - since


def check_lost(
    active: Active, gpus: Mapping[str, GpuMemory], expected: Mapping[str, str | None], t: AlertThresholds, now: datetime
) -> list[AlertChange]:
    """Raise gpu-lost for an expected GPU silent for ``lost_after``; clear it once it reports or is not expected."""
    changes = []
    watched = set(expected) | {uuid for uuid, kind in active if kind is AlertKind.GPU_LOST}
    for uuid in sorted(watched):
        current = active.get((uuid, AlertKind.GPU_LOST))
        silent = silence(gpus[uuid], now) if uuid in expected else None
        lost_for = silent if silent is not None and silent >= t.lost_after else None
        if lost_for is not None and current is None:
            node = expected[uuid]
            message = (
                f"{name_gpu_by_uuid(uuid, node)} has not reported for {duration(lost_for)} "
                f"(alert after {duration(t.lost_after)})"
            )
            alert = Alert(
                AlertKind.GPU_LOST, uuid, node, lost_for.total_seconds(), t.lost_after.total_seconds(), message, now
            )
            changes.append(AlertChange(alert, True, now))
        elif lost_for is None and current is not None:
            changes.append(AlertChange(current, False, now))
    return changes


# -- words


def name_gpu(sample: GpuSample) -> str:
    """Like 'GPU 3 on node-a' when the index is known, else by uuid."""
    if sample.index is None:
        return name_gpu_by_uuid(sample.uuid, sample.node)
    return f"GPU {sample.index}" + (f" on {sample.node}" if sample.node else "")


def name_gpu_by_uuid(uuid: str, node: str | None) -> str:
    return f"GPU {uuid}" + (f" on {node}" if node else "")


def number(x: float) -> str:
    """At most one decimal, none when whole: 85, 85.5."""
    return f"{x:.1f}".removesuffix(".0")


def duration(d: timedelta) -> str:
    """In the largest whole unit: 1 h, 90 min, 75 s."""
    seconds = round(d.total_seconds())
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
