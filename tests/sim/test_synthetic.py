"""The synthetic traces (egs_hub/sim/synthetic.py): seeded (the same seed gives the same trace, another seed
another), in the simulator's CSV format as load_trace reads it, and shaped as their names say."""

from __future__ import annotations

import pytest

from egs_hub.sim import POLICIES, Options, build_inventory, load_trace, run_policies
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
    identical = jobs("identical-jobs")
    assert {(j.gpus, j.duration_s, j.actual_s) for j in identical} == {(1, 3600, 3600)}
    assert len(identical) == 3 * 345 and len({j.slice for j in identical}) == 3


def test_on_interchangeable_jobs_every_policy_has_the_same_mean_wait_and_only_fair_share_breaks_estimates(tmp_path):
    """identical-jobs: jobs that are all alike and run their whole window wait the same in all under
    every policy that idles no GPU while one waits (so no policy's mean can beat another's there), and
    where one team submits them all, nothing moves an estimate given at submit: the planner's estimates
    break on the three-team trace only because fair share reorders it (mostly a job of a team that used
    less going ahead, ``overtaken``; a few promises no longer fit where they were after such reordering,
    ``taken``)."""
    three_teams = tmp_path / "identical.csv"
    three_teams.write_text(TRACES["identical-jobs"](2, 7))
    one_team = tmp_path / "one-team.csv"
    one_team.write_text(
        "".join(
            line.replace("team-b", "team-a").replace("team-c", "team-a")
            for line in three_teams.read_text().splitlines(True)
        )
    )
    for path, kept in ((one_team, True), (three_teams, False)):
        options = Options(csv=path, gpus_per_node=8, load=0.9)
        trace = load_trace(options)
        report, _ = run_policies(trace, build_inventory(options, trace), POLICIES)
        means = {policy: round(figures["wait_mean_s"], 3) for policy, figures in report.items()}
        assert len(set(means.values())) == 1 and means["planner"] > 0, means
        if kept:
            assert all(figures["estimate_kept_share"] == 1.0 for figures in report.values())
        else:
            assert report["planner"]["estimate_kept_share"] < 1.0
            assert set(report["planner"]["estimate_broken_causes"]) <= {"overtaken", "taken"}
