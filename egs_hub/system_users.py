"""Who a member's code runs as on this host: their JupyterLab servers (spawners/local.py) and their
inference endpoints' servers (backends/local/endpoint_servers.py) start the same way.

Vocabulary: the *isolation* mode is one of MODES.

- ``system-users`` (the default when egs-hub runs as root): each hub user gets a *system account* of
  their own, ``egs-<name>`` (core/system_names.py), made with ``useradd`` the first time one of their
  servers starts, with a *home* at ``/home/egs-<name>`` (0700, theirs, outside the service's data
  directory), no password, and no group but its own. Their processes run as it: its uid, gid and groups
  (initgroups), in its home, with its HOME, USER, LOGNAME and SHELL. The service's data directory is
  the service's user's alone (0700), so they cannot read its tokens or databases.
- ``none``: every member's code runs as the OS user running egs-hub, in the member's home under
  ``home_dir_template`` (the embedded default's ``<data dir>/home/<user>``): it can read everything
  the service can. For trusted members only; egs-hub says so at start and on the admin dashboard, and
  refuses ``command`` endpoints unless ``c.EGSService.allow_unisolated_commands`` allows them.

A *member process* is how one member's process starts in a mode (MemberProcess). As in The Littlest
JupyterHub (``tljh/user.py``), accounts stay when their hub user goes: an admin removes them
(``userdel --remove egs-<name>``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

from .core.system_names import system_username

SYSTEM_USERS = "system-users"
NONE = "none"
MODES = (SYSTEM_USERS, NONE)
HOME_ROOT = "/home"
SHELL = "/bin/bash"
# useradd is in sbin, which a service started without a login shell may not have on PATH.
SBIN = ("/usr/sbin", "/sbin")


class AccountError(Exception):
    """A member's system account cannot be made or used; the message says why."""


def default_mode() -> str:
    """``system-users`` for a process running as root (it can make accounts and switch to them), else ``none``."""
    return SYSTEM_USERS if os.geteuid() == 0 else NONE


def mode_error(mode: str) -> str | None:
    """Why ``mode`` cannot be used by this process (None: it can)."""
    if mode not in MODES:
        return f"isolation must be one of {', '.join(MODES)}, not {mode!r}"
    if mode == SYSTEM_USERS and os.geteuid() != 0:
        return (
            f"isolation {SYSTEM_USERS} makes a system account per member and starts their code as it, which "
            f"needs root; egs-hub runs as {service_user()}. Start it as root, or choose isolation {NONE} (every "
            "member's code then runs as you)"
        )
    return None


def service_user() -> str:
    """The name of the OS user this process runs as (its uid where it has no name, as in some containers)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def unisolated_notice(commands_allowed: bool) -> str:
    """What egs-hub says at start and on the admin dashboard in isolation none."""
    commands = (
        "command endpoints are allowed (c.EGSService.allow_unisolated_commands = True)"
        if commands_allowed
        else "command endpoints are refused unless c.EGSService.allow_unisolated_commands = True"
    )
    return (
        f"Members are not isolated (isolation {NONE}): every member's code (JupyterLab servers, endpoints) runs "
        f"as the OS user running egs-hub ({service_user()}), and can read the service's data directory: its "
        f"tokens, cookie secret and databases. For trusted members only; {commands}. Start egs-hub as root "
        f"(isolation {SYSTEM_USERS}) to give every member a system account of their own."
    )


@dataclass(frozen=True)
class MemberProcess:
    """How a process of one member starts: as ``uid``/``gid`` with ``groups`` (None: as this process),
    in ``home``, with the variables of ``environment()``."""

    user: str  # USER and LOGNAME: the system account, or (isolation none) the hub user's name
    home: str
    shell: str = SHELL
    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] = ()

    def environment(self) -> dict[str, str]:
        return {"HOME": self.home, "USER": self.user, "LOGNAME": self.user, "SHELL": self.shell}

    def popen_options(self) -> dict:
        """``subprocess.Popen`` options that start a process this way: the child sets its groups, gid and
        uid (in that order, before it runs anything) and enters the home."""
        if self.uid is None:
            return {"cwd": self.home}
        return {"cwd": self.home, "user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


@dataclass(frozen=True)
class Isolation:
    """A mode (MODES) and, for mode none, the members' homes (``{username}`` is the hub user's name)."""

    mode: str
    home_dir_template: str

    def __post_init__(self) -> None:
        error = mode_error(self.mode)
        if error is not None:
            raise AccountError(error)

    def member_process(self, hub_name: str) -> MemberProcess:
        """How hub user ``hub_name``'s processes start; makes their account (or home) when missing.
        Blocking: it may run useradd."""
        if self.mode == NONE:
            home = self.home_dir_template.format(username=hub_name)
            os.makedirs(home, 0o700, exist_ok=True)
            return MemberProcess(user=hub_name, home=home)
        entry = ensure_account(hub_name)
        return MemberProcess(
            user=entry.pw_name,
            home=entry.pw_dir,
            shell=entry.pw_shell or SHELL,
            uid=entry.pw_uid,
            gid=entry.pw_gid,
            groups=tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)),
        )


def ensure_account(hub_name: str) -> pwd.struct_passwd:
    """The system account of hub user ``hub_name``, made (useradd, home 0700) when it does not exist.

    Two processes (the hub's spawner, the service's endpoints) may make it at once: the one whose
    useradd loses finds the other's account."""
    name = system_username(hub_name)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = _create_account(name)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise AccountError(
            f"the system account {name} has uid {entry.pw_uid}, gid {entry.pw_gid}: no member runs as root"
        )
    if not os.path.isdir(entry.pw_dir):
        os.makedirs(entry.pw_dir, 0o700)
        os.chown(entry.pw_dir, entry.pw_uid, entry.pw_gid)
    owner = os.stat(entry.pw_dir).st_uid
    if owner != entry.pw_uid:
        # useradd keeps a home it finds (of an account removed without --remove, say), and its owner
        raise AccountError(
            f"the home {entry.pw_dir} of the system account {name} belongs to uid {owner}, not to {name}: "
            f"move it away (or chown it to {name}) and start again"
        )
    return entry


def _create_account(name: str) -> pwd.struct_passwd:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    useradd = shutil.which("useradd", path=path)
    if useradd is None:
        raise AccountError(f"cannot make the system account {name}: useradd is not installed (package passwd)")
    home = os.path.join(HOME_ROOT, name)
    made = subprocess.run(
        [
            useradd,
            "--create-home",
            "--home-dir",
            home,
            "--shell",
            SHELL,
            "--user-group",
            "--comment",
            "egs-hub member",
            name,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise AccountError(f"cannot make the system account {name}: useradd said: {made.stderr.strip()}") from None
    if made.returncode == 0:
        # useradd makes the home with the login.defs umask (0755 on Debian): close it to other members
        os.chmod(entry.pw_dir, 0o700)
    return entry
