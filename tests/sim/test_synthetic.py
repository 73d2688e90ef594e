"""The synthetic traces (egs_hub/sim/synthetic.py): seeded (the same seed gives the same trace, another seed
another), in the simulator's CSV format as load_trace reads it, and shaped as their names say."""

from __future__ import annotations

import pytest

from egs_hub.sim import Options, load_trace
from egs_hub.sim.synthetic import DAY, TRACES


@pytest.mark.parametrize("name", sorted(TRACES))
def test_a_synthetic_trace_is_seeded_and_reads_as_a_trace(name, tmp_path):
    make = TRACES[name]
    assert make(2, 1) == make(2, 1) and make(2, 1) != make(2, 2)
    path = tmp_path / f"{name}.csv"
    path.write_text(make(2, 1))
    trace = load_trace(Options(csv=path))
    assert trace.jobs and all(0 <= j.submit_s < 2 * DAY for j in trace.jobs)
    assert all(0 < j.actual_s <= j.duration_s for j in trace.jobs)


def test_the_traces_are_shaped_as_named(tmp_path):
    def jobs(name: str):
        path = tmp_path / f"{name}.csv"
        path.write_text(TRACES[name](3, 7))
        return load_trace(Options(csv=path)).jobs

    assert all(9 * 3600 <= j.submit_s % DAY <= 17 * 3600 for j in jobs("bursty"))
    assert all(j.gpus in (1, 2) and j.duration_s <= 7200 for j in jobs("small-jobs"))
    assert [j.nodes for j in jobs("huge-jobs") if j.nodes] == [4, 4, 4]
    skewed = jobs("skewed-teams")
    heavy = sum(j.gpus * j.duration_s for j in skewed if j.slice == "team-heavy")
    assert heavy > 0.7 * sum(j.gpus * j.duration_s for j in skewed)
