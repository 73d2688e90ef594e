"""Scheduling quality: the planner vs EASY backfill vs FIFO, side by side, on synthetic traces and
(``--philly``) the Philly scenario, with issue 21's targets marked met or MISSED.

Synthetic traces (egs_hub/sim/synthetic.py: bursty, small-jobs, huge-jobs, skewed-teams, identical-jobs; ``--days``
days, seed ``--seed``) run on 8-GPU nodes scaled to offer ``--load``. Targets per trace (printed, not
asserted): planner mean wait <= 0.85 x EASY's; p50 and p95 <= EASY's; at least 95 % start by the
estimate given at submit (+60 s); bound utilization >= EASY's - 0.01.

    python benchmarks/bench_quality.py --json quality.json
    python benchmarks/bench_quality.py --philly --days 7 --loads 0.7 0.9   # the scenario's first week too
    python benchmarks/bench_quality.py --order-fair-share-s 3600 --order-size-s 600   # every policy in that order
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from egs_hub.core.model import Order
from egs_hub.sim import POLICIES, Options, SimInputError, build_inventory, load_trace, run_policies
from egs_hub.sim.report import table, write_json
from egs_hub.sim.synthetic import TRACES

MEAN_FACTOR = 0.85
KEPT_TARGET = 0.95
UTIL_MARGIN = 0.01


def targets(report: dict) -> list[tuple[str, bool, str]]:
    """(target, met, the figures behind it) for one trace's report."""
    ours, easy = report["planner"], report["easy"]
    kept = ours["estimate_kept_share"] or 0.0
    return [
        (
            f"mean wait <= {MEAN_FACTOR} x EASY's",
            ours["wait_mean_s"] <= MEAN_FACTOR * easy["wait_mean_s"],
            f"{ours['wait_mean_s']:.0f} s vs {easy['wait_mean_s']:.0f} s",
        ),
        (
            "p50 wait <= EASY's",
            ours["wait_p50_s"] <= easy["wait_p50_s"],
            f"{ours['wait_p50_s']:.0f} s vs {easy['wait_p50_s']:.0f} s",
        ),
        (
            "p95 wait <= EASY's",
            ours["wait_p95_s"] <= easy["wait_p95_s"],
            f"{ours['wait_p95_s']:.0f} s vs {easy['wait_p95_s']:.0f} s",
        ),
        (f"at least {KEPT_TARGET:.0%} start by their estimate (+60 s)", kept >= KEPT_TARGET, f"{kept:.1%}"),
        (
            f"bound utilization >= EASY's - {UTIL_MARGIN}",
            ours["util_bound"] >= easy["util_bound"] - UTIL_MARGIN,
            f"{ours['util_bound']:.2%} vs {easy['util_bound']:.2%}",
        ),
    ]


def run(name: str, options: Options, order: Order) -> dict:
    trace = load_trace(options)
    inventory = build_inventory(options, trace)
    print(f"\n== {name}: {len(trace.jobs)} GPRs on {inventory.describe()}", flush=True)
    began = time.perf_counter()
    report, _ = run_policies(trace, inventory, POLICIES, order=order)
    print(table(report))
    print(f"({time.perf_counter() - began:.0f} s for the three replays)")
    for target, met, figures in targets(report):
        print(f"  [{'met' if met else 'MISSED'}] {target}: {figures}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", nargs="+", choices=sorted(TRACES), default=list(TRACES))
    parser.add_argument("--days", type=int, default=3, help="days of each synthetic trace (default 3)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--loads", type=float, nargs="+", default=[0.9], help="offered loads (default 0.9)")
    parser.add_argument("--philly", action="store_true", help="also the Philly scenario (its first --days days)")
    parser.add_argument("--trace-file", default=None, help="philly.csv (default: shared/ beside the checkout)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write {trace: {load: {policy: figures}}}")
    parser.add_argument(
        "--order-fair-share-s", type=float, default=None, metavar="S", help="queue order (core/queue.py)"
    )
    parser.add_argument("--order-size-s", type=float, default=0.0, metavar="S", help="seconds per GPU-hour asked for")
    args = parser.parse_args(argv)
    try:
        order = Order(args.order_fair_share_s, args.order_size_s)
    except ValueError as e:
        parser.error(str(e))
    results: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory() as directory:
            for name in args.traces:
                csv = Path(directory, f"{name}.csv")
                csv.write_text(TRACES[name](args.days, args.seed))
                for load in args.loads:
                    options = Options(csv=csv, gpus_per_node=8, load=load)
                    results.setdefault(name, {})[str(load)] = run(f"{name} at load {load}", options, order)
                    if args.json:
                        write_json(results, args.json)
            if args.philly:
                for load in args.loads:
                    options = Options(trace="philly", trace_file=args.trace_file, load=load, days=args.days)
                    results.setdefault("philly", {})[str(load)] = run(f"philly at load {load}", options, order)
                    if args.json:
                        write_json(results, args.json)
    except SimInputError as e:
        print(f"bench_quality: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
