"""The ``egs-hub`` command.

egs-hub up [--ip IP] [--port N] [--data-dir DIR] [--db-url URL] [--inventory FILE] [--config FILE]
    [--isolation system-users|none]
egs-hub db upgrade [--data-dir DIR] [--db-url URL]
egs-hub db current [--data-dir DIR] [--db-url URL]
egs-hub simulate (--trace philly | --csv FILE) [--nodes N --gpus-per-node G | --cluster FILE] [--load L] ...
egs-hub cluster add NAME (--kubeconfig PATH [--context CTX] | --in-cluster) [--node-selector SELECTOR]
    [--exit-grace DURATION] [--api-url URL] [--api-token TOKEN]
egs-hub cluster list [--api-url URL] [--api-token TOKEN]
egs-hub cluster remove NAME [--api-url URL] [--api-token TOKEN]

The cluster commands call the running service's REST API: --api-url (default $EGS_API_URL, e.g.
http://127.0.0.1:8000/services/egs/api/v1/) with an admin's hub API token (--api-token, default
$EGS_API_TOKEN).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime

from alembic.util import CommandError
from sqlalchemy.exc import SQLAlchemyError

from . import __version__
from .backends.local.declared import InventoryError
from .client import EGSClient, EGSError
from .embedded import HUB_CONFIG_FILE, SetupError, prepare
from .store.db import DatabaseError, current_revision, default_db_url, head_revision, make_engine, upgrade
from .system_users import MODES, NONE, SYSTEM_USERS


def _db_url(args: argparse.Namespace) -> str:
    return args.db_url or os.environ.get("EGS_DB_URL") or default_db_url(args.data_dir)


def cmd_up(args: argparse.Namespace) -> int:
    settings = prepare(args.ip, args.port, args.data_dir, args.db_url, args.inventory, args.config, args.isolation)
    os.environ.update(settings.to_env())
    print(f"egs-hub {__version__}: starting JupyterHub at http://{args.ip}:{args.port} (Ctrl-C stops it)")
    print(f"egs-hub: data in {settings.data_dir}")
    if settings.isolation == SYSTEM_USERS:
        print(f"egs-hub: isolation {SYSTEM_USERS}: every member's code runs as their own system account (egs-<name>)")
    sys.stdout.flush()
    from jupyterhub.app import JupyterHub

    JupyterHub.launch_instance(["-f", HUB_CONFIG_FILE])
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    url = _db_url(args)
    try:
        engine = make_engine(url)
        if args.action == "upgrade":
            upgrade(engine)
        current = current_revision(engine)
    except (SQLAlchemyError, CommandError, OSError) as e:
        # Unreachable server, unwritable SQLite path, a revision this egs-hub does not know.
        raise DatabaseError(f"cannot use the database {url.split('@')[-1]}: {e}") from None
    print(f"schema revision {current or 'none'} (this egs-hub expects {head_revision()})")
    return 0


def cmd_openapi(args: argparse.Namespace) -> int:
    """The document as this egs-hub serves it under the hub's default prefixes (no service is asked)."""
    from .service.app import api_document  # the service's modules load only for this command

    print(json.dumps(api_document(args.api_prefix, __version__), indent=2, sort_keys=True))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from .sim import Options, SimInputError, build_inventory, load_trace, policies_for, run_policies
    from .sim.plot import write_plot
    from .sim.report import table, write_json

    if args.from_db is not None:
        try:
            return _simulate_history(args)
        except SimInputError as e:
            print(f"egs-hub simulate: {e}", file=sys.stderr)
            return 2
    options = Options(
        trace=args.trace,
        csv=args.csv,
        trace_file=args.trace_file,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        cluster=args.cluster,
        load=args.load,
        limit=args.limit,
        days=args.days,
    )
    try:
        policies = policies_for(args.policy)
        order = _order(args)
        trace = load_trace(options)
        inventory = build_inventory(options, trace)
        print(
            f"{trace.name}: {len(trace.jobs)} GPRs in {len(trace.slices)} slices over {trace.span_s / 86400:.2f} days "
            f"on {inventory.describe()}",
            flush=True,
        )
        report, runs = run_policies(trace, inventory, policies, progress=not args.quiet, order=order)
        print(table(report))
        if args.json:
            write_json(report, args.json)
            print(f"wrote {args.json}")
        if args.plot:
            write_plot(runs, args.plot)
            print(f"wrote {args.plot}")
    except SimInputError as e:
        print(f"egs-hub simulate: {e}", file=sys.stderr)
        return 2
    return 0


def _order(args: argparse.Namespace):
    """The queue order ``--order-fair-share-s`` and ``--order-size-s`` give; SimInputError when bad."""
    from .core.model import Order, order_weight_error
    from .sim import SimInputError

    for flag, value in (("--order-fair-share-s", args.order_fair_share_s), ("--order-size-s", args.order_size_s)):
        error = order_weight_error(value)
        if error is not None:
            raise SimInputError(f"{flag} {error}")
    return Order(args.order_fair_share_s, args.order_size_s)


def _simulate_history(args: argparse.Namespace) -> int:
    """``simulate --from-db``: the service's history replayed on its nodes, and on them changed;
    SimInputError on bad input."""
    from .core.errors import InvalidRequest
    from .core.units import parse_duration
    from .sim import SimInputError, policies_for, run_policies
    from .sim.history import capacity_cost, changed, load_history, parse_change, parse_price, priced
    from .sim.report import duration, table, write_json

    given = [name for name in ("trace", "csv", "nodes", "gpus_per_node", "cluster", "load") if getattr(args, name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise SimInputError(f"--from-db replays the service's own GPRs on its own nodes: drop {flags}")
    try:
        since = parse_duration(args.since, "--since")
    except InvalidRequest as e:
        raise SimInputError(str(e)) from None
    add = [parse_change(v, "--add-nodes") for v in args.add_nodes]
    remove = [parse_change(v, "--remove-nodes") for v in args.remove_nodes]
    prices = [parse_price(v) for v in args.price]
    policies = policies_for(args.policy)
    order = _order(args)
    history = load_history(args.from_db, since, datetime.now(UTC))
    trace, inventory = history.trace, history.inventory
    if args.limit is not None or args.days is not None:
        trace = trace.limited(args.limit, args.days)
    recorded = history.recorded
    print(f"history: {len(trace.jobs)} GPRs in {len(trace.slices)} slices over the last {args.since}")
    print(
        f"recorded: {recorded['gprs']} started, wait mean {duration(recorded['wait_mean_s'])}, "
        f"p50 {duration(recorded['wait_p50_s'])}, p95 {duration(recorded['wait_p95_s'])}"
    )
    results = {"recorded": recorded}
    cases = [("current", inventory)]
    if add or remove:
        cases.append(("changed", changed(inventory, add, remove)))
    for shape, price in prices:
        if not any(g.shape.matches(shape) for _, nodes in cases for g in nodes.groups):
            raise SimInputError(f"--price {shape}={price}: no node of that shape")
    for name, nodes in cases:
        cost = capacity_cost(nodes, priced(history.prices, nodes, prices), trace.span_s)
        print(f"\n{name}: {nodes.describe()}", flush=True)
        if cost is not None:
            print(f"the nodes' GPU-hours over the {args.since} at their prices: {cost:,.2f}")
        report, _ = run_policies(trace, nodes, policies, progress=not args.quiet, order=order)
        print(table(report))
        results[name] = {**report, "capacity_cost": cost}
    if "changed" in results:
        before_cost, after_cost = results["current"]["capacity_cost"], results["changed"]["capacity_cost"]
        if before_cost is not None and after_cost is not None:
            print(f"the nodes' cost over the {args.since}: {before_cost:,.2f} -> {after_cost:,.2f}")
        for policy in policies:
            before, after = results["current"][policy], results["changed"][policy]
            print(
                f"{policy}: wait mean {duration(before['wait_mean_s'])} -> {duration(after['wait_mean_s'])}, "
                f"p95 {duration(before['wait_p95_s'])} -> {duration(after['wait_p95_s'])}, "
                f"bound utilization {before['util_bound']:.1%} -> {after['util_bound']:.1%}"
            )
    if args.json:
        write_json(results, args.json)
        print(f"wrote {args.json}")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    with EGSClient(args.api_url, args.api_token) as client:
        if args.action == "add":
            added = client.register_cluster(
                args.name,
                kubeconfig=args.kubeconfig,
                context=args.context,
                in_cluster=args.in_cluster,
                node_selector=args.node_selector,
                exit_grace=args.exit_grace,
            )
            state = added.health + (f": {added.message}" if added.message else "")
            counts = f"{added.nodes} node(s), {added.gpus} GPU(s)"
            print(f"cluster {added.name} registered ({added.where}); {state}; {counts}")
        elif args.action == "remove":
            client.remove_cluster(args.name)
            print(f"cluster {args.name} removed")
        else:
            rows = [("NAME", "KIND", "ORIGIN", "HEALTH", "NODES", "GPUS", "WHERE")]
            for c in client.clusters():
                where = c.where + (f" ({c.message})" if c.message else "")
                rows.append((c.name, c.kind, c.origin, c.health, str(c.nodes), str(c.gpus), where))
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
            for row in rows:
                print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="egs-hub", description="Elastic GPU Service for JupyterHub")
    top.add_argument("--version", action="version", version=__version__)
    commands = top.add_subparsers(dest="command", required=True)

    def data_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", default="egs-data", help="state directory (default: ./egs-data)")
        p.add_argument(
            "--db-url",
            default=None,
            help="egs-hub database: sqlite:///PATH or postgresql://USER@HOST/DB "
            "(default: $EGS_DB_URL, else SQLite in the data directory)",
        )

    up = commands.add_parser("up", help="start JupyterHub with egs-hub on this machine")
    up.add_argument("--ip", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    up.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    data_options(up)
    up.add_argument("--inventory", default=None, help="YAML file declaring GPUs, used where NVML finds none")
    up.add_argument("--config", default=None, help="extra JupyterHub/egs-hub config file, loaded last")
    up.add_argument(
        "--isolation",
        choices=MODES,
        default=None,
        help=f"who members' code runs as: {SYSTEM_USERS} (a system account each, egs-<name>; needs root) or "
        f"{NONE} (this user: trusted members only). Default: c.EGSService.isolation in --config, else "
        f"{SYSTEM_USERS} as root and {NONE} otherwise",
    )
    up.set_defaults(run=cmd_up)

    db = commands.add_parser("db", help="database schema")
    db.add_argument("action", choices=["upgrade", "current"])
    data_options(db)
    db.set_defaults(run=cmd_db)

    openapi = commands.add_parser(
        "openapi", help="print the OpenAPI 3.1 document of REST API v1, to generate clients from"
    )
    openapi.add_argument(
        "--api-prefix",
        default="/services/egs/api/v1/",
        help="the API's path on the hub, which the document's server URL names (default: /services/egs/api/v1/)",
    )
    openapi.set_defaults(run=cmd_openapi)

    sim = commands.add_parser(
        "simulate",
        help="replay a GPU job trace through the planner in virtual time, against fifo and EASY backfill",
        description="Replay a trace in virtual time through the planner and report waits, estimate quality, "
        "utilization, fairness and planner cost per policy. CSV header: "
        "submit_s,slice,gpus,nodes,duration_s,actual_s,priority.",
    )
    source = sim.add_argument_group("trace (one of)")
    source.add_argument("--trace", default=None, help="a named scenario: philly (shared/traces/philly/README.md)")
    source.add_argument("--csv", default=None, metavar="FILE", help="a trace in the simulator's CSV format")
    source.add_argument(
        "--from-db",
        default=None,
        metavar="URL",
        help="the GPRs a service recorded (its --db-url), on its nodes: what-if capacity planning",
    )
    what_if = sim.add_argument_group("what-if, with --from-db")
    what_if.add_argument("--since", default="30d", help="how far back to replay (default: 30d)")
    what_if.add_argument(
        "--add-nodes", action="append", default=[], metavar="SHAPE:N", help="replay with N more nodes of SHAPE"
    )
    what_if.add_argument(
        "--remove-nodes", action="append", default=[], metavar="SHAPE:N", help="replay with N fewer nodes of SHAPE"
    )
    what_if.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="SHAPE=USD",
        help="price per GPU-hour of SHAPE's nodes (default: the service's prices)",
    )
    sim.add_argument(
        "--trace-file", default=None, metavar="PATH", help="where philly.csv is (default: beside the checkout)"
    )
    sim.add_argument("--nodes", type=int, default=None, metavar="N", help="nodes of one shape")
    sim.add_argument("--gpus-per-node", type=int, default=None, metavar="G", help="GPUs per node of that shape")
    sim.add_argument(
        "--cluster",
        default=None,
        metavar="FILE",
        help="YAML of shapes, clusters and node pools (egs_hub/sim/cluster.py)",
    )
    sim.add_argument(
        "--load", type=float, default=None, metavar="L", help="scale the node count so the offered load is L"
    )
    sim.add_argument("--policy", default="all", help="planner, fifo, easy or all (default: all, side by side)")
    sim.add_argument("--limit", type=int, default=None, metavar="N", help="replay only the first N jobs")
    sim.add_argument("--days", type=float, default=None, metavar="D", help="replay only the jobs of the first D days")
    sim.add_argument(
        "--order-fair-share-s",
        type=float,
        default=None,
        metavar="S",
        help="order each band by virtual submit time, a fair-share factor of 1 worth S seconds of waiting "
        "(default: fair share first; the service's queue_fair_share_s)",
    )
    sim.add_argument(
        "--order-size-s",
        type=float,
        default=0.0,
        metavar="S",
        help="move a GPR's virtual submit time S seconds later per GPU-hour it asks for "
        "(default 0; the service's queue_size_s_per_gpu_hour)",
    )
    sim.add_argument("--json", default=None, metavar="FILE", help="write the figures as JSON, one object per policy")
    sim.add_argument(
        "--plot", default=None, metavar="FILE", help="write a PNG: queue, GPUs bound/used, waits over time"
    )
    sim.add_argument("--quiet", action="store_true", help="no progress bar")
    sim.set_defaults(run=cmd_simulate)

    api_options = argparse.ArgumentParser(add_help=False)
    api_options.add_argument(
        "--api-url", default=None, metavar="URL", help="the service's API v1 URL (default: $EGS_API_URL)"
    )
    api_options.add_argument(
        "--api-token", default=None, metavar="TOKEN", help="an admin's hub API token (default: $EGS_API_TOKEN)"
    )
    cluster = commands.add_parser(
        "cluster",
        help="register, list and remove Kubernetes clusters of a running egs-hub (through its REST API)",
    )
    actions = cluster.add_subparsers(dest="action", required=True)
    add = actions.add_parser(
        "add", parents=[api_options], help="register a cluster by kubeconfig and context, or in-cluster"
    )
    add.add_argument("name", help="the cluster's name in egs-hub (a DNS label)")
    how = add.add_mutually_exclusive_group(required=True)
    how.add_argument("--kubeconfig", metavar="PATH", help="absolute path of a kubeconfig file on the service's host")
    how.add_argument("--in-cluster", action="store_true", help="the service's own cluster (its pod's ServiceAccount)")
    add.add_argument("--context", metavar="CTX", help="the kubeconfig's context (default: its current-context)")
    add.add_argument(
        "--node-selector", metavar="SELECTOR", help="label selector of the GPU nodes to manage (default: egs.io/slice)"
    )
    add.add_argument(
        "--exit-grace",
        metavar="DURATION",
        help="how long a slice's pods get to leave a node, like 5m or 300 (default: 5m)",
    )
    actions.add_parser("list", parents=[api_options], help="clusters with their health, nodes and GPUs")
    remove = actions.add_parser("remove", parents=[api_options], help="remove a cluster registered through the API")
    remove.add_argument("name")
    cluster.set_defaults(run=cmd_cluster)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "db" and args.db_url is None and os.environ.get("EGS_DB_URL") is None:
        os.makedirs(args.data_dir, exist_ok=True)
    if getattr(args, "port", 1) is not None and not 0 < getattr(args, "port", 1) < 65536:
        print("egs-hub: --port must be from 1 to 65535", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except (SetupError, DatabaseError, InventoryError, EGSError) as e:
        print(f"egs-hub: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
