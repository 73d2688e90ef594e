"""Dynamic node pools in the simulator: the wait / cost trade-off of growing a pool for a bursty queue.

The synthetic bursty trace (egs_hub/sim/synthetic.py: ``--days`` working days of 160 jobs between 9:00 and
17:00, 1 to 8 GPUs for 1 to 4 hours, three teams; seed ``--seed``) is replayed by the
planner on 8 fixed H100 x8 nodes, and on the same nodes with a pool of 0 to N more (N in ``--pools``,
10 minutes to join, given back after 30 minutes idle). Printed and written (``--json``): each run's
waits, the pool's node-hours and GPU-hours (what the cloud bills), its peak, asks and give-backs.

    python benchmarks/bench_pools.py --json pools.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from egs_hub.sim import Options, build_inventory, load_trace, run_policies
from egs_hub.sim.report import write_json
from egs_hub.sim.synthetic import bursty

FIXED_NODES = 8
SHAPE = "h100: {model: H100, memory_gb: 80, gpus_per_node: 8}"


def cluster_yaml(pool_max: int) -> str:
    text = f"shapes:\n  {SHAPE}\nclusters:\n  east:\n    h100: {FIXED_NODES}\n"
    if pool_max:
        text += (
            "pools:\n  burst:\n    cluster: east\n    shape: h100\n    min: 0\n"
            f"    max: {pool_max}\n    scale_up_delay: 10m\n    scale_down_idle: 30m\n"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=3, help="working days of the trace (default 3)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pools", type=int, nargs="+", default=[0, 4, 8, 12], help="pool sizes (0: no pool)")
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args(argv)
    results = {}
    columns = (("pool max", 8), ("mean wait", 10), ("p50", 8), ("p95", 9), ("node-h", 7), ("GPU-h", 7), ("peak", 5))
    header = " ".join(f"{name:>{width}}" for name, width in (*columns, ("asks", 5)))
    print(f"{args.days} bursty days on {FIXED_NODES} x H100x8, planner\n{header}")
    with tempfile.TemporaryDirectory() as directory:
        csv = Path(directory, "bursty.csv")
        csv.write_text(bursty(args.days, args.seed))
        for size in args.pools:
            cluster = Path(directory, f"cluster-{size}.yaml")
            cluster.write_text(cluster_yaml(size))
            options = Options(csv=csv, cluster=cluster)
            trace = load_trace(options)
            began = time.perf_counter()
            report, _ = run_policies(trace, build_inventory(options, trace), ["planner"])
            r = report["planner"]
            r["replay_s"] = round(time.perf_counter() - began, 1)
            results[str(size)] = r
            print(
                f"{size:>8} {r['wait_mean_s']:>9.0f}s {r['wait_p50_s']:>7.0f}s {r['wait_p95_s']:>8.0f}s "
                f"{r['pool_node_hours']:>7.1f} {r['pool_gpu_hours']:>7.1f} {r['pool_peak_nodes']:>5} "
                f"{r['pool_scale_ups']:>5}",
                flush=True,
            )
    if args.json:
        write_json(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
