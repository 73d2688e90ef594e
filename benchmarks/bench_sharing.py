"""GPU sharing (issue 23): the notebooks trace (egs_hub/sim/synthetic.py: sessions asking for a tenth
to half a GPU, and training jobs of whole GPUs) replayed by the planner on nodes whose GPUs are split
into MIG instances, and again with the same GPUs whole, side by side.

The cluster: ``--whole`` nodes of 8 whole H100s for training and ``--mig`` nodes of 8 H100s split into
``3g.40gb + 2g.20gb + 2 x 1g.10gb`` each. Utilization counts GPU-equivalents (an instance is its part of
a GPU); a session holds the smallest instance of at least its part, or a whole GPU without MIG.

    python benchmarks/bench_sharing.py --json sharing.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from egs_hub.sim import SimInputError, run_policies
from egs_hub.sim.cluster import read_inventory
from egs_hub.sim.report import table, write_json
from egs_hub.sim.synthetic import notebooks
from egs_hub.sim.trace import read_csv

CLUSTER = """
shapes:
  h100: {{model: H100, memory_gb: 80, gpus_per_node: 8}}
  h100-mig: {{model: H100, memory_gb: 80, gpus_per_node: 8, mig: {{3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}}}
clusters:
  lab: {{h100: {whole}, h100-mig: {mig}}}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=3, help="days of the trace (default 3)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--whole", type=int, default=2, help="nodes of whole GPUs (default 2)")
    parser.add_argument("--mig", type=int, default=2, help="nodes of MIG GPUs (default 2)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write {policy: figures}, without_mig inside")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory() as directory:
            csv, cluster = Path(directory, "notebooks.csv"), Path(directory, "cluster.yaml")
            csv.write_text(notebooks(args.days, args.seed))
            cluster.write_text(CLUSTER.format(whole=args.whole, mig=args.mig))
            trace, inventory = read_csv(csv), read_inventory(cluster)
            print(f"notebooks: {len(trace.jobs)} GPRs on {inventory.describe()}", flush=True)
            began = time.perf_counter()
            report, _ = run_policies(trace, inventory, ["planner"])
    except SimInputError as e:
        print(f"bench_sharing: {e}", file=sys.stderr)
        return 2
    print(table(report))
    print(f"({time.perf_counter() - began:.0f} s for both replays)")
    if args.json:
        write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
