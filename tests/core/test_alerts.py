"""GPU alerts: raise and clear levels with hysteresis, events with quiet periods, lost GPUs.

A case is a run of steps on one GPU ("g0", GPU 0 on node-a) from ``AlertState()``;
each step is one evaluate() at ``seconds`` after NOW with (usually) one sample
taken then. Changes are written ``"+kind@seconds"`` (raise) and ``"-kind@seconds"`` (clear).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egs_hub.core.alerts import Alert, AlertChange, AlertKind, AlertState, AlertThresholds, evaluate
from egs_hub.core.samples import GpuSample

from .builders import NOW

DEFAULTS = AlertThresholds()
HOUR = 3600


def at_s(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def sample(uuid: str = "g0", seconds: float = 0, **readings) -> GpuSample:
    return GpuSample(uuid=uuid, time=at_s(seconds), node="node-a", index=int(uuid[1:]), **readings)


@dataclass(frozen=True)
class Step:
    seconds: float  # now, after NOW
    readings: dict | None  # GpuSample fields of g0's sample; None: no sample this step
    late: float = 0  # the sample was taken this many seconds before now
    expected: bool = True  # g0 is among the GPUs that should report


def step(seconds: float, late: float = 0, **readings) -> Step:
    return Step(seconds, readings, late)


def silent(seconds: float, expected: bool = True) -> Step:
    return Step(seconds, None, expected=expected)


@dataclass(frozen=True)
class Case:
    steps: list[Step]
    want: list[str]  # every change of the run, in order: "+kind@seconds" or "-kind@seconds"
    want_active: set[AlertKind] = field(default_factory=set)  # g0's active kinds after the last step
    want_message: str | None = None  # message of the first change


TEMPERATURE, POWER, MEMORY = AlertKind.TEMPERATURE, AlertKind.POWER, AlertKind.MEMORY_FULL
ECC, XID, LOST = AlertKind.ECC, AlertKind.XID, AlertKind.GPU_LOST
WATTS = {"power_limit_w": 300.0}  # raise at 294 W, clear below 270 W
MIB = {"memory_total_mib": 80_000.0}  # raise at 76,000 MiB, clear below 72,000 MiB

CASES = {
    # temperature
    "temperature at the raise level raises": Case(
        [step(0, temperature_c=85)],
        want=["+temperature@0"],
        want_active={TEMPERATURE},
        want_message="GPU 0 on node-a is at 85 °C (alert at 85 °C, clears below 80 °C)",
    ),
    "temperature just below the raise level is quiet": Case([step(0, temperature_c=84.9)], want=[]),
    "temperature raises once while it stays hot": Case(
        [step(0, temperature_c=86), step(10, temperature_c=95), step(20, temperature_c=91)],
        want=["+temperature@0"],
        want_active={TEMPERATURE},
    ),
    "temperature between the levels holds the alert": Case(
        [step(0, temperature_c=86), step(10, temperature_c=82), step(20, temperature_c=80)],
        want=["+temperature@0"],
        want_active={TEMPERATURE},
    ),
    "temperature between the levels raises nothing": Case([step(0, temperature_c=84), step(10, temperature_c=82)], []),
    "temperature clears below the clear level": Case(
        [step(0, temperature_c=86), step(10, temperature_c=79.9)], want=["+temperature@0", "-temperature@10"]
    ),
    "temperature raises again after a clear": Case(
        [step(0, temperature_c=90), step(10, temperature_c=70), step(20, temperature_c=88)],
        want=["+temperature@0", "-temperature@10", "+temperature@20"],
        want_active={TEMPERATURE},
    ),
    "temperature None neither clears": Case(
        [step(0, temperature_c=90), step(10, temperature_c=None), step(20)],
        want=["+temperature@0"],
        want_active={TEMPERATURE},
    ),
    "temperature None neither raises": Case([step(0, temperature_c=None, power_w=100.0, **WATTS)], want=[]),
    # power
    "power at 98% of the limit raises": Case(
        [step(0, power_w=295.0, **WATTS)],
        want=["+power@0"],
        want_active={POWER},
        want_message="GPU 0 on node-a draws 295 W, 98% of its 300 W limit (alert at 98%, clears below 90%)",
    ),
    "power raises once and holds between the levels": Case(
        [step(0, power_w=299.0, **WATTS), step(10, power_w=300.0, **WATTS), step(20, power_w=271.0, **WATTS)],
        want=["+power@0"],
        want_active={POWER},
    ),
    "power clears below 90% of the limit": Case(
        [step(0, power_w=299.0, **WATTS), step(10, power_w=269.0, **WATTS)], want=["+power@0", "-power@10"]
    ),
    "power without a limit is no reading": Case(
        [step(0, power_w=400.0), step(10, power_w=400.0, power_limit_w=0.0)], want=[]
    ),
    "power None neither clears": Case(
        [step(0, power_w=299.0, **WATTS), step(10, power_w=None, **WATTS)], want=["+power@0"], want_active={POWER}
    ),
    # memory-full
    "memory at 95% used raises": Case(
        [step(0, memory_used_mib=77_000.0, **MIB)],
        want=["+memory-full@0"],
        want_active={MEMORY},
        want_message="GPU 0 on node-a has 77,000 of 80,000 MiB memory in use (96%; alert at 95%, clears below 90%)",
    ),
    "memory raises once and holds between the levels": Case(
        [step(0, memory_used_mib=79_000.0, **MIB), step(10, memory_used_mib=73_000.0, **MIB)],
        want=["+memory-full@0"],
        want_active={MEMORY},
    ),
    "memory clears below 90% used": Case(
        [step(0, memory_used_mib=79_000.0, **MIB), step(10, memory_used_mib=71_000.0, **MIB)],
        want=["+memory-full@0", "-memory-full@10"],
    ),
    "memory None neither clears": Case(
        [step(0, memory_used_mib=79_000.0, **MIB), step(10, memory_used_mib=None, memory_total_mib=None)],
        want=["+memory-full@0"],
        want_active={MEMORY},
    ),
    "memory without a total is no reading": Case([step(0, memory_used_mib=79_000.0)], want=[]),
    # ecc
    "ecc: the first count is a baseline": Case([step(0, ecc_errors=5)], want=[]),
    "ecc: an increase raises": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=7)],
        want=["+ecc@10"],
        want_active={ECC},
        want_message="GPU 0 on node-a reported 2 new uncorrected ECC errors "
        "(7 since the driver loaded; clears after 1 h without new ones)",
    ),
    "ecc: further increases do not raise twice": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=7), step(20, ecc_errors=9)], want=["+ecc@10"], want_active={ECC}
    ),
    "ecc: clears an hour after the last increase": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=7), step(HOUR + 9, ecc_errors=7), step(HOUR + 10, ecc_errors=7)],
        want=["+ecc@10", f"-ecc@{HOUR + 10}"],
    ),
    "ecc: a new increase restarts the quiet hour": Case(
        [
            step(0, ecc_errors=5),
            step(10, ecc_errors=7),
            step(1800, ecc_errors=8),
            step(HOUR + 10, ecc_errors=8),
            step(HOUR + 1800, ecc_errors=8),
        ],
        want=["+ecc@10", f"-ecc@{HOUR + 1800}"],
    ),
    "ecc: None keeps the last count": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=None), step(20, ecc_errors=6)], want=["+ecc@20"], want_active={ECC}
    ),
    "ecc: None then the same count is no increase": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=None), step(20, ecc_errors=5)], want=[]
    ),
    "ecc: a reset is a new baseline": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=0), step(20, ecc_errors=1)], want=["+ecc@20"], want_active={ECC}
    ),
    "ecc: a sample older than the last one is ignored": Case(
        [step(0, ecc_errors=5), step(10, ecc_errors=5), step(20, late=15, ecc_errors=3), step(30, ecc_errors=5)],
        want=[],
    ),
    # xid
    "xid: a nonzero XID raises": Case(
        [step(0, xid=79)],
        want=["+xid@0"],
        want_active={XID},
        want_message="GPU 0 on node-a reported XID error 79 (clears after 1 h without a new one)",
    ),
    "xid: zero and None raise nothing": Case([step(0, xid=0), step(10, xid=None)], want=[]),
    "xid: the same XID again does not raise twice": Case(
        [step(0, xid=79), step(10, xid=79)], want=["+xid@0"], want_active={XID}
    ),
    "xid: clears an hour after the last new XID": Case(
        [step(0, xid=79), step(HOUR - 1, xid=79), step(HOUR, xid=79)], want=["+xid@0", f"-xid@{HOUR}"]
    ),
    "xid: a different XID restarts the quiet hour": Case(
        [step(0, xid=79), step(1800, xid=43), step(HOUR, xid=43), step(HOUR + 1800, xid=43)],
        want=["+xid@0", f"-xid@{HOUR + 1800}"],
    ),
    "xid: the same XID after a zero raises again": Case(
        [step(0, xid=79), step(HOUR, xid=0), step(HOUR + 10, xid=79)],
        want=["+xid@0", f"-xid@{HOUR}", f"+xid@{HOUR + 10}"],
        want_active={XID},
    ),
    "xid: None keeps the last XID (so the same one again is not new)": Case(
        [step(0, xid=79), step(1800, xid=None), step(HOUR, xid=79)], want=["+xid@0", f"-xid@{HOUR}"]
    ),
    # gpu-lost
    "lost: an expected GPU that never reports": Case(
        [silent(0), silent(59), silent(60), silent(120)],
        want=["+gpu-lost@60"],
        want_active={LOST},
        want_message="GPU g0 on node-a has not reported for 1 min (alert after 1 min)",
    ),
    "lost: silent for a minute after its last sample, then back": Case(
        [step(0), silent(59), silent(75), step(80)], want=["+gpu-lost@75", "-gpu-lost@80"]
    ),
    "lost: a late sample does not bring it back": Case(
        [step(0), silent(75), step(150, late=61)], want=["+gpu-lost@75"], want_active={LOST}
    ),
    "lost: a GPU no longer expected clears": Case(
        [step(0), silent(60), silent(70, expected=False)], want=["+gpu-lost@60", "-gpu-lost@70"]
    ),
    "lost: a GPU not expected is never lost": Case([Step(0, {}, expected=False), silent(600, expected=False)], want=[]),
    "lost: the silence clock restarts when it is expected again": Case(
        [silent(0), silent(10, expected=False), silent(600), silent(659), silent(660)],
        want=["+gpu-lost@660"],
        want_active={LOST},
    ),
}


def run_steps(steps: list[Step]) -> tuple[AlertState, list[AlertChange]]:
    """Evaluate each step from ``AlertState()``; every clear carries the alert its raise carried."""
    state, changes, raised = AlertState(), [], {}
    for s in steps:
        samples = [] if s.readings is None else [sample("g0", s.seconds - s.late, **s.readings)]
        expected = [("g0", "node-a")] if s.expected else []
        state, new = evaluate(state, samples, expected, DEFAULTS, at_s(s.seconds))
        for change in new:
            key = (change.alert.uuid, change.alert.kind)
            assert change.raised or raised.pop(key) == change.alert
            raised[key] = change.alert
        changes += new
    return state, changes


def describe(change: AlertChange) -> str:
    return f"{'+' if change.raised else '-'}{change.alert.kind}@{(change.time - NOW).total_seconds():g}"


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_alerts(case: Case):
    state, changes = run_steps(case.steps)
    assert [describe(c) for c in changes] == case.want
    assert {kind for uuid, kind in state.active} == case.want_active
    if case.want_message is not None:
        assert changes[0].alert.message == case.want_message


def test_changes_are_sorted_by_gpu_then_kind():
    samples = [
        sample("g1", temperature_c=90, power_w=299.0, **WATTS),
        sample("g0", memory_used_mib=79_000.0, **MIB),
        sample("g2", xid=13),
    ]
    watching, _ = evaluate(AlertState(), [], [("g3", None)], DEFAULTS, at_s(0))
    _, changes = evaluate(watching, samples, [("g3", None)], DEFAULTS, at_s(60))
    assert [(c.alert.uuid, c.alert.kind) for c in changes] == [
        ("g0", MEMORY),
        ("g1", POWER),
        ("g1", TEMPERATURE),
        ("g2", XID),
        ("g3", LOST),
    ]
    message = "GPU g3 has not reported for 1 min (alert after 1 min)"
    assert changes[-1] == AlertChange(Alert(LOST, "g3", None, 60.0, 60.0, message, at_s(60)), True, at_s(60))


def test_defaults():
    assert (DEFAULTS.temperature_raise_c, DEFAULTS.temperature_clear_c) == (85, 80)
    assert (DEFAULTS.power_raise_fraction, DEFAULTS.power_clear_fraction) == (0.98, 0.90)
    assert (DEFAULTS.memory_raise_fraction, DEFAULTS.memory_clear_fraction) == (0.95, 0.90)
    assert DEFAULTS.ecc_clear_after == DEFAULTS.xid_clear_after == timedelta(hours=1)
    assert DEFAULTS.lost_after == timedelta(seconds=60)


INVALID = {
    "temperature clear not below raise": ({"temperature_clear_c": 85}, "temperature_clear_c"),
    "power raise above 1": ({"power_raise_fraction": 1.2}, "power_raise_fraction"),
    "power clear zero": ({"power_clear_fraction": 0}, "power_clear_fraction"),
    "power clear not below raise": ({"power_clear_fraction": 0.99}, "power_clear_fraction"),
    "memory raise negative": ({"memory_raise_fraction": -0.5}, "memory_raise_fraction"),
    "memory clear not below raise": ({"memory_clear_fraction": 0.95}, "memory_clear_fraction"),
    "ecc quiet period zero": ({"ecc_clear_after": timedelta(0)}, "ecc_clear_after"),
    "xid quiet period negative": ({"xid_clear_after": timedelta(minutes=-1)}, "xid_clear_after"),
    "lost after zero": ({"lost_after": timedelta(0)}, "lost_after"),
}


@pytest.mark.parametrize(("fields", "want_field"), INVALID.values(), ids=INVALID.keys())
def test_invalid_thresholds(fields: dict, want_field: str):
    with pytest.raises(ValueError, match=rf"^{want_field} "):
        AlertThresholds(**fields)


# -- properties over random runs of two GPUs

GPUS = ["g0", "g1"]
READINGS = st.fixed_dictionaries(
    {
        "temperature_c": st.sampled_from([None, 60.0, 79.0, 80.0, 82.0, 85.0, 95.0]),
        "power_w": st.sampled_from([None, 100.0, 269.0, 270.0, 290.0, 294.0, 300.0]),
        "memory_used_mib": st.sampled_from([None, 1_000.0, 71_000.0, 74_000.0, 76_000.0, 80_000.0]),
        "ecc_errors": st.sampled_from([None, 0, 1, 2, 3]),
        "xid": st.sampled_from([None, 0, 43, 79]),
    }
)


@st.composite
def runs(draw) -> list[tuple[datetime, list[GpuSample], list[tuple[str, str | None]]]]:
    """Steps of (now, samples, expected); time moves on by 0 s to 2 h per step."""
    seconds, steps = 0, []
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        seconds += draw(st.sampled_from([0, 1, 10, 30, 59, 60, 600, HOUR, 2 * HOUR]))
        reporting = draw(st.lists(st.sampled_from(GPUS), unique=True))
        samples = [sample(uuid, seconds, **draw(READINGS), **WATTS, **MIB) for uuid in reporting]
        expected = [(uuid, "node-a") for uuid in draw(st.lists(st.sampled_from(GPUS), unique=True))]
        steps.append((at_s(seconds), samples, expected))
    return steps


@given(runs())
def test_raises_and_clears_alternate_starting_with_a_raise(steps):
    """(a) Per (uuid, kind), changes go raise, clear, raise, ... whatever the readings."""
    state, history = AlertState(), {}
    for now, samples, expected in steps:
        state, changes = evaluate(state, samples, expected, DEFAULTS, now)
        for change in changes:
            history.setdefault((change.alert.uuid, change.alert.kind), []).append(change.raised)
    for flags in history.values():
        assert flags == [i % 2 == 0 for i in range(len(flags))]


@given(runs())
def test_active_means_raised_and_not_cleared_since(steps):
    """(b) After every step, the active alerts are exactly those raised and not cleared since."""
    state, raised = AlertState(), set()
    for now, samples, expected in steps:
        state, changes = evaluate(state, samples, expected, DEFAULTS, now)
        for change in changes:
            key = (change.alert.uuid, change.alert.kind)
            (raised.add if change.raised else raised.remove)(key)
        assert set(state.active) == raised


@given(runs())
def test_evaluate_never_mutates_its_input_state(steps):
    """(c) The state passed in is equal, before and after, to a deep copy of itself."""
    state = AlertState()
    for now, samples, expected in steps:
        before = copy.deepcopy(state)
        next_state, _ = evaluate(state, samples, expected, DEFAULTS, now)
        assert state == before
        state = next_state


@given(runs())
def test_temperature_follows_the_hysteresis_model(steps):
    """Active iff the last reading was >= 85 °C, or the alert was active and the reading is >= 80 °C or None."""
    state, model = AlertState(), dict.fromkeys(GPUS, False)
    for now, samples, expected in steps:
        state, _ = evaluate(state, samples, expected, DEFAULTS, now)
        for s in samples:
            if s.temperature_c is not None:
                model[s.uuid] = s.temperature_c >= 85 or (model[s.uuid] and s.temperature_c >= 80)
        assert {uuid for uuid, kind in state.active if kind is TEMPERATURE} == {u for u, on in model.items() if on}
