"""A scenario: the trace and the inventory a replay runs, from the command's options.

Vocabulary: the *base inventory* is the one the options name (``--nodes`` and
``--gpus-per-node``, ``--cluster FILE``, or Philly's own 352 nodes); ``--load``
then scales its node groups' counts so that the trace's offered load is that
number (node pools keep their ``min`` and ``max``: cluster.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.model import Shape
from .cluster import Inventory, NodeGroup, one_shape, read_inventory, scale_to_load
from .philly import GPUS_PER_NODE, VC_NODES, read_philly
from .trace import SimInputError, Trace, read_csv

TRACES = ("philly",)
PHILLY_SHAPE = Shape("P100", 16, GPUS_PER_NODE)


@dataclass(frozen=True)
class Options:
    """What ``egs-hub simulate`` and the benchmark pass in (None = not given)."""

    trace: str | None = None
    csv: str | Path | None = None
    trace_file: str | Path | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    cluster: str | Path | None = None
    load: float | None = None
    limit: int | None = None
    days: float | None = None


def load_trace(options: Options) -> Trace:
    if (options.trace is None) == (options.csv is None):
        raise SimInputError("give exactly one of --trace philly and --csv FILE")
    if options.trace is not None and options.trace not in TRACES:
        raise SimInputError(f"--trace must be one of {', '.join(TRACES)}, got {options.trace!r}")
    if options.limit is not None and options.limit < 1:
        raise SimInputError(f"--limit must be at least 1, got {options.limit}")
    if options.days is not None and not options.days > 0:
        raise SimInputError(f"--days must be positive, got {options.days}")
    trace = read_philly(options.trace_file) if options.trace else read_csv(options.csv)
    if options.limit is not None or options.days is not None:
        trace = trace.limited(options.limit, options.days)
    return trace


def build_inventory(options: Options, trace: Trace) -> Inventory:
    if options.cluster is not None and (options.nodes is not None or options.gpus_per_node is not None):
        raise SimInputError("give --cluster FILE or --nodes/--gpus-per-node, not both")
    if options.cluster is not None:
        inventory = read_inventory(options.cluster)
    elif options.gpus_per_node is not None:
        if options.nodes is None and options.load is None:
            raise SimInputError("--gpus-per-node needs --nodes N (or --load L to size the cluster)")
        inventory = one_shape(options.nodes if options.nodes is not None else 1, options.gpus_per_node)
    elif options.nodes is not None:
        raise SimInputError("--nodes needs --gpus-per-node G")
    elif trace.name == "philly" and trace.windowed:
        inventory = Inventory((NodeGroup("philly", PHILLY_SHAPE, sum(VC_NODES.values())),))
    else:
        raise SimInputError("a --csv trace needs --nodes N --gpus-per-node G or --cluster FILE")
    if options.load is not None:
        inventory = scale_to_load(inventory, trace, options.load)
    return inventory
