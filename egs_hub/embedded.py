"""The embedded default: JupyterHub, the EGS service and SliceLocalSpawner on one host.

``egs-hub up`` checks what can be checked before anything starts (port,
proxy, inventory, database), prepares the data directory, then runs
JupyterHub with ``hub_config/jupyterhub_config.py``, which calls
``configure_hub`` with the settings passed in ``EGS_*`` variables.

Data directory layout: ``egs.sqlite`` (egs-hub, unless --db-url),
``jupyterhub.sqlite`` and ``jupyterhub_cookie_secret`` (the hub),
``egs_service_token`` (the service's hub token, which the spawner also uses),
``home/<user>`` (members' homes in isolation none). It is the OS user running
egs-hub's alone (0700: a looser one is closed at start, another user's refused).

The *isolation* mode (system_users.py) is chosen once, by ``--isolation`` or
``c.EGSService.isolation`` in the --config file (default: system-users as root,
none otherwise), and handed to both the spawner and the service, with the one
home template of mode none (``c.SliceLocalSpawner.home_dir_template``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import stat
import sys
from dataclasses import dataclass
from importlib.resources import files

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from . import ports
from .backends.local.declared import declared_inventory, load_inventory_file
from .hub_settings import SERVICE_API_PATH, configure_roles, service_entry
from .store.db import default_db_url, make_engine, normalize_url, upgrade
from .system_users import NONE, default_mode, mode_error, unisolated_notice

# Service options that `egs-hub up` passes on from its own environment (JupyterHub gives a
# managed service only the variables it is configured with).
SERVICE_ENV_FROM_HUB = ("EGS_PROMETHEUS_URL", "EGS_SLACK_WEBHOOK_URL")

HUB_CONFIG_FILE = str(files("egs_hub") / "hub_config" / "jupyterhub_config.py")


class SetupError(Exception):
    """egs-hub cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class EmbeddedSettings:
    ip: str
    port: int
    data_dir: str
    db_url: str
    inventory: str | None
    hub_port: int
    proxy_api_port: int
    service_port: int
    proxy: str
    extra_config: str | None
    isolation: str  # system_users.MODES
    home_dir_template: str  # members' homes in isolation none

    def to_env(self) -> dict[str, str]:
        env = {
            "EGS_IP": self.ip,
            "EGS_PORT": str(self.port),
            "EGS_DATA_DIR": self.data_dir,
            "EGS_DB_URL": self.db_url,
            "EGS_HUB_PORT": str(self.hub_port),
            "EGS_PROXY_API_PORT": str(self.proxy_api_port),
            "EGS_SERVICE_PORT": str(self.service_port),
            "EGS_PROXY": self.proxy,
            "EGS_ISOLATION": self.isolation,
            "EGS_HOME_DIR_TEMPLATE": self.home_dir_template,
        }
        if self.inventory:
            env["EGS_INVENTORY"] = self.inventory
        if self.extra_config:
            env["EGS_HUB_EXTRA_CONFIG"] = self.extra_config
        return env

    @classmethod
    def from_env(cls, env: dict[str, str]) -> EmbeddedSettings:
        try:
            return cls(
                ip=env["EGS_IP"],
                port=int(env["EGS_PORT"]),
                data_dir=env["EGS_DATA_DIR"],
                db_url=env["EGS_DB_URL"],
                inventory=env.get("EGS_INVENTORY") or None,
                hub_port=int(env["EGS_HUB_PORT"]),
                proxy_api_port=int(env["EGS_PROXY_API_PORT"]),
                service_port=int(env["EGS_SERVICE_PORT"]),
                proxy=env["EGS_PROXY"],
                extra_config=env.get("EGS_HUB_EXTRA_CONFIG") or None,
                isolation=env.get("EGS_ISOLATION") or default_mode(),
                home_dir_template=env.get("EGS_HOME_DIR_TEMPLATE") or default_home(env["EGS_DATA_DIR"]),
            )
        except KeyError as e:
            raise SetupError(f"{e.args[0]} is not set: start the embedded hub with `egs-hub up`") from None


def free_port(ip: str = "127.0.0.1") -> int:
    """A free port on ``ip`` (ports.py); SetupError when there is none."""
    try:
        return ports.free_port(ip)
    except ports.NoFreePort as e:
        raise SetupError(str(e)) from None


def check_port(ip: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip, port))
        except OSError as e:
            raise SetupError(
                f"cannot listen on {ip}:{port} ({e.strerror}): another program uses it. "
                "Stop it or choose another port with --port."
            ) from None


def find_proxy() -> str:
    found = shutil.which("configurable-http-proxy")
    if found is None:
        raise SetupError(
            "configurable-http-proxy (JupyterHub's proxy) is not on PATH. "
            "Install it with: npm install -g configurable-http-proxy"
        )
    return found


def service_token(data_dir: str) -> str:
    """The service's hub API token, made on first start and kept in the data directory."""
    path = os.path.join(data_dir, "egs_service_token")
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    with open(path) as f:
        return f.read().strip()


def default_home(data_dir: str) -> str:
    """Where members' homes are in isolation none, unless the config says otherwise."""
    return os.path.join(data_dir, "home", "{username}")


def close_data_dir(path: str) -> None:
    """Make the data directory its owner's alone (0700), saying so on stderr when it was open to others;
    SetupError when another user owns it."""
    found = os.stat(path)
    if found.st_uid != os.geteuid():
        raise SetupError(
            f"the data directory {path} belongs to uid {found.st_uid}, not to uid {os.geteuid()} that runs egs-hub: "
            "it holds the service's tokens and databases, which must be egs-hub's user's alone. "
            "Choose another --data-dir, or chown it to egs-hub's user"
        )
    mode = stat.S_IMODE(found.st_mode)
    if mode & 0o077:
        os.chmod(path, 0o700)
        print(
            f"egs-hub: the data directory {path} was open to other users (mode {mode:o}); it holds the service's "
            "tokens, cookie secret and databases, so it is 0700 now",
            file=sys.stderr,
        )


def choose_isolation(flag: str | None, extra: Config) -> str:
    """The one isolation mode: ``--isolation``, else the config file's, else system-users as root and none
    otherwise; SetupError when they disagree or this process cannot use it."""
    chosen = {"--isolation": flag} if flag else {}
    for section in ("EGSService", "SliceLocalSpawner"):
        if "isolation" in extra.get(section, {}):
            chosen[f"c.{section}.isolation"] = str(extra[section]["isolation"]).lower()
    if len(set(chosen.values())) > 1:
        said = ", ".join(f"{where} = {mode}" for where, mode in chosen.items())
        raise SetupError(f"the isolation mode is chosen twice ({said}): choose it once, with --isolation")
    mode = next(iter(chosen.values()), None) or default_mode()
    error = mode_error(mode)
    if error is not None:
        raise SetupError(error)
    return mode


def prepare(
    ip: str,
    port: int,
    data_dir: str,
    db_url: str | None,
    inventory: str | None,
    extra_config: str | None,
    isolation: str | None = None,
) -> EmbeddedSettings:
    """Check everything that can fail before the hub starts; bring the database up to date. In isolation
    none, say on stderr that every member's code runs as this process's user."""
    check_port(ip, port)
    proxy = find_proxy()
    if inventory is not None:
        inventory = os.path.abspath(inventory)
        declared_inventory(load_inventory_file(inventory), "local", inventory)
    extra = Config()
    if extra_config is not None:
        extra_config = os.path.abspath(extra_config)
        if not os.path.isfile(extra_config):
            raise SetupError(f"config file {extra_config} does not exist")
        try:
            extra = PyFileConfigLoader(os.path.basename(extra_config), os.path.dirname(extra_config)).load_config()
        except Exception as e:
            raise SetupError(f"config file {extra_config} fails to load: {type(e).__name__}: {e}") from None
    isolation = choose_isolation(isolation, extra)
    data_dir = os.path.abspath(data_dir)
    db_url = normalize_url(db_url or default_db_url(data_dir))
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    close_data_dir(data_dir)
    home_dir_template = str(extra.get("SliceLocalSpawner", {}).get("home_dir_template") or default_home(data_dir))
    if isolation == NONE:
        service = extra.get("EGSService", {})
        print(f"egs-hub: {unisolated_notice(bool(service.get('allow_unisolated_commands')))}", file=sys.stderr)
    try:
        upgrade(make_engine(db_url))
    except Exception as e:
        raise SetupError(f"cannot prepare the database {db_url.split('@')[-1]}: {e}") from None
    service_token(data_dir)
    return EmbeddedSettings(
        ip=ip,
        port=port,
        data_dir=data_dir,
        db_url=db_url,
        inventory=inventory,
        hub_port=free_port(),
        proxy_api_port=free_port(),
        service_port=free_port(),
        proxy=proxy,
        extra_config=extra_config,
        isolation=isolation,
        home_dir_template=home_dir_template,
    )


def configure_hub(c, env: dict[str, str] | None = None) -> None:
    """Fill JupyterHub's config ``c`` for the embedded default."""
    s = EmbeddedSettings.from_env(dict(os.environ if env is None else env))
    token = service_token(s.data_dir)
    service_url = f"http://127.0.0.1:{s.service_port}"

    c.JupyterHub.ip = s.ip
    c.JupyterHub.port = s.port
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = s.hub_port
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
    c.ConfigurableHTTPProxy.command = [s.proxy]
    c.JupyterHub.db_url = f"sqlite:///{os.path.join(s.data_dir, 'jupyterhub.sqlite')}"
    c.JupyterHub.cookie_secret_file = os.path.join(s.data_dir, "jupyterhub_cookie_secret")

    # Land on the hub home after login instead of starting a server before any GPUs are bound.
    c.JupyterHub.redirect_to_server = False
    c.JupyterHub.authenticator_class = "egs_hub.authenticator.EGSAuthenticator"
    c.Authenticator.admin_users = {"admin"}
    c.Authenticator.allow_all = True
    c.NativeAuthenticator.minimum_password_length = 8

    c.JupyterHub.spawner_class = "egs_hub.spawners.SliceLocalSpawner"
    # the service gets the same two in its environment: its endpoints start as the spawner's servers do
    c.SliceLocalSpawner.isolation = s.isolation
    c.SliceLocalSpawner.home_dir_template = s.home_dir_template
    c.SliceLocalSpawner.egs_api_url = service_url + SERVICE_API_PATH
    c.SliceLocalSpawner.egs_api_token = token
    c.Spawner.default_url = "/lab"
    c.Spawner.cmd = [os.path.join(os.path.dirname(sys.executable), "jupyterhub-singleuser")]
    configure_roles(c, c.Authenticator.admin_users)
    c.JupyterHub.services = [
        service_entry(
            service_url,
            token,
            command=[sys.executable, "-m", "egs_hub.service.supervise"],
            environment={
                key: value
                for key, value in {
                    "EGS_DATA_DIR": s.data_dir,
                    "EGS_DB_URL": s.db_url,
                    "EGS_INVENTORY": s.inventory or "",
                    "EGS_CONFIG_FILE": s.extra_config or "",
                    "EGS_ISOLATION": s.isolation,
                    "EGS_HOME_DIR_TEMPLATE": s.home_dir_template,
                    **{name: os.environ.get(name, "") for name in SERVICE_ENV_FROM_HUB},
                }.items()
                if value
            },
        )
    ]
