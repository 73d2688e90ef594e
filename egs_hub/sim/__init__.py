"""Trace-driven simulator over core/: replay GPU jobs in virtual time through the planner.

Vocabulary (modules): a *trace* (trace.py, philly.py) is the jobs to submit; an
*inventory* (cluster.py) the nodes they run on, fixed node groups and dynamic
node pools (pools.py keeps a replay's pools); a *scenario* (scenario.py) both,
from the command's options; a *replay* (engine.py) runs one *policy* of the
planner over a scenario; *figures* (metrics.py) summarize a replay; the report
(report.py, plot.py) shows policies side by side. ``egs-hub simulate`` and
``benchmarks/bench_trace.py`` drive it.
"""

from .engine import POLICIES, Replay, replay
from .runner import POLICY_CHOICES, policies_for, run_policies
from .scenario import Options, build_inventory, load_trace
from .trace import Job, SimInputError, Trace, read_csv

__all__ = [
    "POLICIES",
    "POLICY_CHOICES",
    "Job",
    "Options",
    "Replay",
    "SimInputError",
    "Trace",
    "build_inventory",
    "load_trace",
    "policies_for",
    "read_csv",
    "replay",
    "run_policies",
]
