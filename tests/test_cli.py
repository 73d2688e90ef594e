"""The ``egs-hub`` command: ``up`` pre-flight failures, ``db upgrade|current``, and ``configure_hub``.

``up`` cases run the real command as a subprocess and must fail in pre-flight:
each asserts the exit status, the message, that "starting JupyterHub" was never
printed and that the proxy on PATH (a fake that leaves a mark) never ran.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from traitlets.config import Config

from egs_hub import __version__, ports
from egs_hub.cli import main
from egs_hub.embedded import HUB_CONFIG_FILE, SetupError, configure_hub, free_port, service_token
from egs_hub.hub_settings import configure_roles
from egs_hub.roles import ADMIN_SCOPE
from egs_hub.store.db import head_revision

# --- up: pre-flight ------------------------------------------------------------------------


@dataclass(frozen=True)
class Workspace:
    """A temp directory with ``bin/`` (on PATH; holds the fake proxy unless told) and a free port."""

    root: Path
    bin: Path
    port: int

    @property
    def proxy_ran(self) -> bool:
        return (self.root / "proxy-ran").exists()

    def write(self, name: str, text: str) -> str:
        path = self.root / name
        path.write_text(text)
        return str(path)


def make_workspace(root: Path, with_proxy: bool = True) -> Workspace:
    """``with_proxy``: put a fake configurable-http-proxy on PATH that only records it ran and fails."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    if with_proxy:
        proxy = bin_dir / "configurable-http-proxy"
        proxy.write_text(f'#!/bin/sh\ntouch "{root}/proxy-ran"\nexit 1\n')
        proxy.chmod(0o755)
    return Workspace(root, bin_dir, free_port())


def run_up(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EGS_")}
    env["PATH"] = str(ws.bin)  # nothing else: the real proxy must not be found
    command = [sys.executable, "-m", "egs_hub.cli", "up", "--data-dir", str(ws.root / "data"), *args]
    return subprocess.run(command, cwd=ws.root, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port that another program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@dataclass(frozen=True)
class UpCase:
    args: Callable[[Workspace], list[str]]  # command-line arguments after `up --data-dir D`
    want: Callable[[Workspace], list[str]]  # parts of the error message
    with_proxy: bool = True
    want_rc: int = 1
    want_no_data_dir: bool = True  # nothing written when a check fails before the database


def inventory(ws: Workspace) -> str:
    return ws.write("inventory.yaml", "nodes:\n  - {name: gpu-a, model: H100, memory_gb: 80, gpus: 8}\n")


UP_CASES = {
    "proxy missing": UpCase(
        lambda ws: ["--port", str(ws.port)],
        lambda ws: ["configurable-http-proxy", "not on PATH", "npm install -g configurable-http-proxy"],
        with_proxy=False,
    ),
    "bad inventory": UpCase(
        lambda ws: ["--port", str(ws.port), "--inventory", ws.write("inv.yaml", "nodes:\n  - {name: a}\n")],
        lambda ws: [f"{ws.root}/inv.yaml: nodes[0].model must be a GPU model"],
    ),
    "inventory with gpus 0": UpCase(
        lambda ws: [
            "--port",
            str(ws.port),
            "--inventory",
            ws.write("inv.yaml", "nodes:\n  - {name: a, model: L4, memory_gb: 24, gpus: 0}\n"),
        ],
        lambda ws: ["nodes[0].gpus must be a whole number from 1 to 4096, not 0"],
    ),
    "inventory file missing": UpCase(
        lambda ws: ["--port", str(ws.port), "--inventory", "nowhere.yaml"],
        lambda ws: [f"cannot read inventory file {ws.root}/nowhere.yaml"],
    ),
    "config file missing": UpCase(
        lambda ws: ["--port", str(ws.port), "--inventory", inventory(ws), "--config", "extra_config.py"],
        lambda ws: [f"config file {ws.root}/extra_config.py does not exist"],
    ),
    "config that raises": UpCase(
        lambda ws: ["--port", str(ws.port), "--config", ws.write("broken.py", "c.JupyterHub.port = int('x')\n")],
        lambda ws: [f"config file {ws.root}/broken.py fails to load: ValueError"],
    ),
    "config with a syntax error": UpCase(
        lambda ws: ["--port", str(ws.port), "--config", ws.write("typo.py", "c.JupyterHub.port = \n")],
        lambda ws: [f"config file {ws.root}/typo.py fails to load: SyntaxError"],
    ),
    "config is a directory": UpCase(
        lambda ws: ["--port", str(ws.port), "--config", str(ws.bin)],
        lambda ws: [f"config file {ws.bin} does not exist"],
    ),
    "MySQL URL": UpCase(
        lambda ws: ["--port", str(ws.port), "--db-url", "mysql://x"],
        lambda ws: ["unsupported database 'mysql'", "use SQLite or PostgreSQL"],
    ),
    "not a URL": UpCase(
        lambda ws: ["--port", str(ws.port), "--db-url", "not a url"],
        lambda ws: ["'not a url' is not a database URL", "sqlite:///PATH"],
    ),
    "PostgreSQL unreachable, password kept out": UpCase(
        lambda ws: ["--port", str(ws.port), "--db-url", "postgresql://egs:s3cret@127.0.0.1:1/egs"],
        lambda ws: ["cannot prepare the database 127.0.0.1:1/egs", "Connection refused"],
        want_no_data_dir=False,
    ),
    "port 0": UpCase(lambda ws: ["--port", "0"], lambda ws: ["--port must be from 1 to 65535"], want_rc=2),
    "port 70000": UpCase(lambda ws: ["--port", "70000"], lambda ws: ["--port must be from 1 to 65535"], want_rc=2),
    "port not a number": UpCase(lambda ws: ["--port", "http"], lambda ws: ["invalid int value"], want_rc=2),
}


@pytest.mark.parametrize("case", UP_CASES.values(), ids=UP_CASES.keys())
def test_up_fails_in_pre_flight(tmp_path, case: UpCase):
    ws = make_workspace(tmp_path, with_proxy=case.with_proxy)

    done = run_up(ws, *case.args(ws))

    assert done.returncode == case.want_rc, done.stderr
    for part in case.want(ws):
        assert part in done.stderr
    assert "s3cret" not in done.stderr
    assert "starting JupyterHub" not in done.stdout
    assert not ws.proxy_ran
    if case.want_no_data_dir:
        assert not (ws.root / "data").exists()


def test_up_with_the_port_taken_names_it_and_the_option(tmp_path, taken_port: int):
    ws = make_workspace(tmp_path)

    done = run_up(ws, "--port", str(taken_port))

    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{taken_port}" in done.stderr
    assert "choose another port with --port" in done.stderr
    assert "starting JupyterHub" not in done.stdout and not ws.proxy_ran
    assert not (ws.root / "data").exists()


def two_neighbouring_ports() -> tuple[socket.socket, socket.socket]:
    """Sockets bound to two neighbouring ports below the ephemeral range: no outgoing connection
    takes such a port, so only these sockets decide what free_port finds there."""
    while True:
        port = free_port()
        first, second = socket.socket(), socket.socket()
        try:
            first.bind(("127.0.0.1", port))
            second.bind(("127.0.0.1", port + 1))
            return first, second
        except OSError:
            first.close()
            second.close()


def test_free_port_is_below_the_ephemeral_range_and_skips_a_taken_one(monkeypatch):
    low = ports._ephemeral_low()
    assert all(ports._LOWEST_FREE_PORT <= free_port() < low for _ in range(20))

    taken, neighbour = two_neighbouring_ports()
    with taken, neighbour:
        port = taken.getsockname()[1]
        taken.listen()
        monkeypatch.setattr(ports, "_LOWEST_FREE_PORT", port)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: port + 1)
        with pytest.raises(SetupError, match=f"no free port on 127.0.0.1 from {port} to {port}"):
            free_port()
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: port + 2)
        neighbour.close()
        assert free_port() == port + 1


# --- db upgrade | current ------------------------------------------------------------------


def test_db_upgrade_then_current_print_the_head_revision(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/egs.sqlite"
    head = head_revision()

    assert main(["db", "current", "--db-url", url]) == 0
    assert capsys.readouterr().out == f"schema revision none (this egs-hub expects {head})\n"
    assert main(["db", "upgrade", "--db-url", url]) == 0
    assert main(["db", "current", "--db-url", url]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"schema revision {head} (this egs-hub expects {head})"


def test_openapi_prints_the_served_document_under_the_prefix_given(capsys):
    """The document the service serves (its paths from the operations' declarations), with no service asked."""
    assert main(["openapi", "--api-prefix", "/hub-x/services/egs/api/v1/"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["servers"] == [{"url": "/hub-x/services/egs/api/v1"}]
    assert document["paths"]["/gprs"]["post"]["operationId"] == "post_gprs"
    assert document["info"]["version"] == __version__


def test_db_defaults_to_sqlite_in_the_data_dir_unless_egs_db_url(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("EGS_DB_URL", raising=False)
    assert main(["db", "upgrade", "--data-dir", str(tmp_path / "data")]) == 0
    assert (tmp_path / "data" / "egs.sqlite").is_file()

    monkeypatch.setenv("EGS_DB_URL", f"sqlite:///{tmp_path}/from-env.sqlite")
    assert main(["db", "upgrade", "--data-dir", str(tmp_path / "unused")]) == 0
    assert (tmp_path / "from-env.sqlite").is_file()
    assert not (tmp_path / "unused").exists()
    assert capsys.readouterr().out.count(f"schema revision {head_revision()}") == 2


def unknown_revision(tmp_path: Path) -> str:
    """A SQLite database stamped with a revision this egs-hub does not have (a newer egs-hub's)."""
    with sqlite3.connect(tmp_path / "newer.sqlite") as db:
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        db.execute("INSERT INTO alembic_version VALUES ('ffffffffffff')")
    return f"sqlite:///{tmp_path}/newer.sqlite"


DB_ERROR_CASES = {
    # name: (arguments after `db`, wanted part of the message)
    "MySQL URL": (lambda _: ["current", "--db-url", "mysql://x"], "unsupported database 'mysql'"),
    "not a URL": (lambda _: ["upgrade", "--db-url", "not a url"], "'not a url' is not a database URL"),
    "PostgreSQL unreachable": (
        lambda _: ["current", "--db-url", "postgresql://egs:s3cret@127.0.0.1:1/egs"],
        "cannot use the database 127.0.0.1:1/egs",
    ),
    "SQLite path cannot be made": (
        lambda _: ["upgrade", "--db-url", "sqlite:////proc/egs-nowhere/egs.sqlite"],
        "cannot use the database sqlite:////proc/egs-nowhere/egs.sqlite",
    ),
    "revision from a newer egs-hub": (
        lambda tmp: ["upgrade", "--db-url", unknown_revision(tmp)],
        "Can't locate revision identified by 'ffffffffffff'",
    ),
}


@pytest.mark.parametrize(("args", "want"), DB_ERROR_CASES.values(), ids=DB_ERROR_CASES.keys())
def test_db_errors_are_one_clear_line(tmp_path, capsys, args, want):
    assert main(["db", *args(tmp_path)]) == 1

    err = capsys.readouterr().err
    assert err.startswith("egs-hub: ") and want in err
    assert "s3cret" not in err and "Traceback" not in err


# --- configure_hub -------------------------------------------------------------------------


def hub_env(data_dir: Path, **overrides: str) -> dict[str, str]:
    """The EGS_* variables `egs-hub up` passes to the hub config; ``overrides`` add or replace."""
    env = {
        "EGS_IP": "0.0.0.0",
        "EGS_PORT": "8123",
        "EGS_DATA_DIR": str(data_dir),
        "EGS_DB_URL": f"sqlite:///{data_dir}/egs.sqlite",
        "EGS_HUB_PORT": "18081",
        "EGS_PROXY_API_PORT": "18001",
        "EGS_SERVICE_PORT": "10101",
        "EGS_PROXY": "/opt/chp/bin/configurable-http-proxy",
    }
    return {**env, **overrides}


def test_configure_hub_fills_the_embedded_default(tmp_path):
    token = service_token(str(tmp_path))
    c = Config()

    configure_hub(c, hub_env(tmp_path, EGS_INVENTORY="/etc/egs/inventory.yaml"))

    assert (c.JupyterHub.ip, c.JupyterHub.port, c.JupyterHub.hub_port) == ("0.0.0.0", 8123, 18081)
    assert c.ConfigurableHTTPProxy.api_url == "http://127.0.0.1:18001"
    assert c.ConfigurableHTTPProxy.command == ["/opt/chp/bin/configurable-http-proxy"]
    assert c.JupyterHub.db_url == f"sqlite:///{tmp_path}/jupyterhub.sqlite"
    [service] = c.JupyterHub.services
    assert service["name"] == "egs" and service["url"] == "http://127.0.0.1:10101"
    assert service["api_token"] == token == (tmp_path / "egs_service_token").read_text().strip()
    assert ADMIN_SCOPE == "custom:egs:admin" and ADMIN_SCOPE in service["oauth_client_allowed_scopes"]
    assert service["environment"] == {
        "EGS_DATA_DIR": str(tmp_path),
        "EGS_DB_URL": f"sqlite:///{tmp_path}/egs.sqlite",
        "EGS_INVENTORY": "/etc/egs/inventory.yaml",
        "EGS_ISOLATION": c.SliceLocalSpawner.isolation,
        "EGS_HOME_DIR_TEMPLATE": f"{tmp_path}/home/{{username}}",
    }
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert set(roles) == {"user", "egs-admin", "egs-service"}
    assert "access:services!service=egs" in roles["user"]["scopes"] and "self" in roles["user"]["scopes"]
    assert roles["egs-admin"]["scopes"] == [ADMIN_SCOPE] and roles["egs-admin"]["users"] == ["admin"]
    assert roles["egs-service"]["services"] == ["egs"]
    assert {"admin:groups", "admin:servers", "list:users"} <= set(roles["egs-service"]["scopes"])
    assert ADMIN_SCOPE in c.JupyterHub.custom_scopes
    assert c.JupyterHub.spawner_class == "egs_hub.spawners.SliceLocalSpawner"
    assert c.SliceLocalSpawner.egs_api_url == "http://127.0.0.1:10101/services/egs/api/v1/"
    assert c.SliceLocalSpawner.egs_api_token == token
    assert c.SliceLocalSpawner.home_dir_template == f"{tmp_path}/home/{{username}}"


def test_configure_hub_makes_the_service_token_once(tmp_path):
    configure_hub(first := Config(), hub_env(tmp_path))
    configure_hub(second := Config(), hub_env(tmp_path))

    token = first.JupyterHub.services[0]["api_token"]
    assert len(token) == 64 and second.JupyterHub.services[0]["api_token"] == token
    assert (tmp_path / "egs_service_token").stat().st_mode & 0o777 == 0o600


REQUIRED = [
    "EGS_IP",
    "EGS_PORT",
    "EGS_DATA_DIR",
    "EGS_DB_URL",
    "EGS_HUB_PORT",
    "EGS_PROXY_API_PORT",
    "EGS_SERVICE_PORT",
    "EGS_PROXY",
]


@pytest.mark.parametrize("missing", REQUIRED)
def test_configure_hub_without_a_variable_names_it(tmp_path, missing: str):
    env = hub_env(tmp_path)
    del env[missing]

    with pytest.raises(SetupError, match=f"^{missing} is not set: start the embedded hub with `egs-hub up`$"):
        configure_hub(Config(), env)


# nativeauthenticator, loaded with JupyterHub, still calls locale.getdefaultlocale().
@pytest.mark.filterwarnings("ignore:'locale.getdefaultlocale' is deprecated:DeprecationWarning")
def test_a_user_role_already_configured_keeps_its_scopes_and_gains_the_services():
    """The service's access goes to every user through the role ``user`` (JupyterHub 5.4 has no
    extra_user_scopes); a ``user`` role the hub's config defined keeps what it gave."""
    c = Config()
    c.JupyterHub.load_roles = [{"name": "user", "description": "ours", "scopes": ["self", "read:groups"]}]
    configure_roles(c, ["admin"])
    (user,) = [r for r in c.JupyterHub.load_roles if r["name"] == "user"]
    assert user["description"] == "ours"
    assert user["scopes"] == sorted(["self", "read:groups", "access:services!service=egs", "custom:egs:endpoints"])


def test_hub_config_file_loads_and_extra_config_comes_last(tmp_path, monkeypatch):
    """The shipped jupyterhub_config.py through JupyterHub's own loader, with --config's file."""
    from jupyterhub.app import JupyterHub

    extra = tmp_path / "extra_config.py"
    extra.write_text('c.JupyterHub.port = 9999\nc.Spawner.default_url = "/tree"\n')
    for key, value in hub_env(tmp_path, EGS_HUB_EXTRA_CONFIG=str(extra)).items():
        monkeypatch.setenv(key, value)
    app = JupyterHub()

    app.load_config_file(HUB_CONFIG_FILE)

    assert app.config.JupyterHub.port == 9999
    assert app.config.Spawner.default_url == "/tree"
    assert app.config.JupyterHub.ip == "0.0.0.0"
    assert app.config.JupyterHub.services[0]["environment"]["EGS_CONFIG_FILE"] == str(extra)
