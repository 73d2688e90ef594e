"""``egs-hub simulate`` end to end: the table, the JSON keys, the PNG, bad input, the Philly trace."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from egs_hub.cli import main
from egs_hub.sim.philly import default_path

from .builders import HAND_ROWS, row, write_csv

REQUIRED_KEYS = {
    "wait_mean_s",
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "estimate_kept_share",
    "estimate_error_p50_s",
    "estimate_error_p95_s",
    "estimate_broken",
    "estimate_broken_by_p95_s",
    "estimate_broken_causes",
    "util_bound",
    "util_used",
    "offered_load",
    "jain",
    "plan_pass_mean_s",
    "plan_pass_p99_s",
    "gprs",
}
TWO_SLICES = [*HAND_ROWS, row(5, nodes=1, duration=60, slice="other"), row(6, gpus=8, duration=30, slice="other")]


def test_simulate_csv_end_to_end(tmp_path):
    """The installed command, as a person runs it: every policy side by side, JSON and PNG."""
    trace = write_csv(tmp_path, TWO_SLICES)
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    args = ["--csv", trace, "--nodes", "2", "--gpus-per-node", "8", "--json", out, "--plot", png]
    done = subprocess.run(
        [shutil.which("egs-hub"), "simulate", *map(str, args)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "planner" in done.stdout and "fifo" in done.stdout and "easy" in done.stdout
    assert "wait p95" in done.stdout and "other (2)" in done.stdout
    report = json.loads(out.read_text())
    assert list(report) == ["planner", "fifo", "easy"]
    for figures in report.values():
        assert set(figures) >= REQUIRED_KEYS
        assert figures["gprs"] == 7 and figures["started"] == 7
        assert set(figures["slices"]) == {"team", "other"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_one_policy(tmp_path, capsys):
    trace = write_csv(tmp_path, HAND_ROWS)
    out = tmp_path / "out.json"
    args = ["--csv", str(trace), "--nodes", "1", "--gpus-per-node", "4", "--policy", "easy", "--json", str(out)]
    assert main(["simulate", *args]) == 0
    report = json.loads(out.read_text())
    assert list(report) == ["easy"] and report["easy"]["wait_mean_s"] == pytest.approx(68.6)
    assert "easy" in capsys.readouterr().out


def test_simulate_cluster_file_and_load(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("shapes: {s: {model: H100, memory_gb: 80, gpus_per_node: 4}}\nclusters: {c: {s: 50}}\n")
    out = tmp_path / "out.json"
    args = ["--csv", str(write_csv(tmp_path, HAND_ROWS)), "--cluster", str(cluster), "--load", "0.5"]
    assert main(["simulate", *args, "--policy", "planner", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())["planner"]
    # 891 GPU-s over 152 s at load 0.5 is 11.7 GPUs: 3 nodes of 4.
    assert figures["capacity_gpus"] == 12 and figures["offered_load"] == pytest.approx(891 / (12 * 152))


# name -> (trace.csv content: rows, raw text or None for no file; arguments after --csv, where
# "{dir}" is the test's directory; what the one line on stderr says)
ONE_NODE = ["--nodes", "1", "--gpus-per-node", "4"]
BAD_INPUT = {
    "bad header": ("submit,slice\n0,a\n", ONE_NODE, "trace.csv:1: the header must be"),
    "gpus and nodes": ([row(0, gpus=1, nodes=1)], ONE_NODE, "trace.csv:2: set exactly one of gpus and nodes"),
    "negative duration": ([row(0, gpus=1, duration=-1)], ONE_NODE, "trace.csv:2: duration_s must be"),
    "unknown policy": (HAND_ROWS, [*ONE_NODE, "--policy", "sjf"], "--policy must be one of planner, fifo, easy"),
    "missing csv": (None, ONE_NODE, "trace.csv: no such file"),
    "no cluster": (HAND_ROWS, ["--nodes", "1"], "--nodes needs --gpus-per-node G"),
    "bad load": (HAND_ROWS, [*ONE_NODE, "--load", "-1"], "--load must be a positive number"),
    "missing cluster file": (HAND_ROWS, ["--cluster", "{dir}/c.yaml"], "c.yaml: no such file"),
    "unwritable JSON": (HAND_ROWS, [*ONE_NODE, "--json", "{dir}/no/out.json"], "cannot write the JSON report"),
    "negative size weight": (
        HAND_ROWS,
        [*ONE_NODE, "--order-size-s", "-600"],
        "--order-size-s must be a finite number of seconds >= 0, not -600.0",
    ),
    "infinite fair-share weight": (
        HAND_ROWS,
        [*ONE_NODE, "--order-fair-share-s", "inf"],
        "--order-fair-share-s must be a finite number of seconds >= 0, not inf",
    ),
}


@pytest.mark.parametrize("content,args,want", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input(content, args, want, tmp_path, capsys):
    if isinstance(content, str):
        (tmp_path / "trace.csv").write_text(content)
    elif content is not None:
        write_csv(tmp_path, content)
    args = [a.replace("{dir}", str(tmp_path)) for a in args]
    assert main(["simulate", "--csv", str(tmp_path / "trace.csv"), "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("egs-hub simulate: ") and want in err


def test_missing_philly_trace(tmp_path, capsys):
    assert main(["simulate", "--trace", "philly", "--trace-file", str(tmp_path / "philly.csv")]) == 2
    err = capsys.readouterr().err
    assert err == f"egs-hub simulate: the Philly trace is not at {tmp_path / 'philly.csv'}: pass --trace-file PATH\n"


def test_philly_two_days(tmp_path, capsys):
    """The real trace, 2 days of it, at the benchmark's highest load."""
    assert Path(default_path()).is_file(), f"the Philly trace belongs at {default_path()} (shared/ beside the checkout)"
    out = tmp_path / "philly.json"
    args = ["simulate", "--trace", "philly", "--days", "2", "--load", "0.9", "--quiet", "--json", str(out)]
    assert main([*args, "--policy", "easy"]) == 0
    figures = json.loads(out.read_text())["easy"]
    assert figures["gprs"] == figures["started"] > 1000
    assert figures["offered_load"] == pytest.approx(0.9, abs=0.02)
    assert figures["span_s"] == 2 * 86400
    assert 0 < figures["util_used"] <= figures["util_bound"] <= 1
    assert "philly:" in capsys.readouterr().out


def test_simulate_in_a_multifactor_order(tmp_path):
    """``--order-size-s``: on one 8-GPU node, a 1-GPU job submitted a second after an 8-GPU one (both
    waiting for the first job) starts first: shortest first with aging, in every policy."""
    rows = [row(0, gpus=8, duration=100, actual=100), row(1, gpus=8, duration=3600), row(2, gpus=1, duration=60)]
    trace = write_csv(tmp_path, rows)
    out = tmp_path / "out.json"
    args = ["simulate", "--csv", str(trace), "--nodes", "1", "--gpus-per-node", "8", "--quiet", "--json", str(out)]
    assert main([*args, "--policy", "fifo"]) == 0
    by_submit = json.loads(out.read_text())["fifo"]
    assert main([*args, "--policy", "fifo", "--order-size-s", "600"]) == 0
    by_size = json.loads(out.read_text())["fifo"]
    # FIFO by submit: the 1-GPU job waits for the 8-GPU one's hour; by size it goes first.
    assert by_size["wait_mean_s"] < by_submit["wait_mean_s"]
    assert main([*args, "--order-fair-share-s", "3600", "--order-size-s", "600"]) == 0
    assert set(json.loads(out.read_text())) == {"planner", "fifo", "easy"}
