"""The ``egs-hub`` command.

egs-hub up [--ip IP] [--port N] [--data-dir DIR] [--db-url URL] [--inventory FILE] [--config FILE]
egs-hub db upgrade [--data-dir DIR] [--db-url URL]
egs-hub db current [--data-dir DIR] [--db-url URL]
"""

from __future__ import annotations

import argparse
import os
import sys

from alembic.util import CommandError
from sqlalchemy.exc import SQLAlchemyError

from . import __version__
from .backends.local.declared import InventoryError
from .embedded import HUB_CONFIG_FILE, SetupError, prepare
from .store.db import DatabaseError, current_revision, default_db_url, head_revision, make_engine, upgrade


def _db_url(args: argparse.Namespace) -> str:
    return args.db_url or os.environ.get("EGS_DB_URL") or default_db_url(args.data_dir)


def cmd_up(args: argparse.Namespace) -> int:
    settings = prepare(args.ip, args.port, args.data_dir, args.db_url, args.inventory, args.config)
    os.environ.update(settings.to_env())
    print(f"egs-hub {__version__}: starting JupyterHub at http://{args.ip}:{args.port} (Ctrl-C stops it)")
    print(f"egs-hub: data in {settings.data_dir}", flush=True)
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
    up.set_defaults(run=cmd_up)

    db = commands.add_parser("db", help="database schema")
    db.add_argument("action", choices=["upgrade", "current"])
    data_options(db)
    db.set_defaults(run=cmd_db)
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
    except (SetupError, DatabaseError, InventoryError) as e:
        print(f"egs-hub: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
