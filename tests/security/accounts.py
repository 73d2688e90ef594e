"""What the isolation tests need of this host: an interpreter the members' system accounts can run,
the identity of a process, running a probe as an account, and removing the accounts a test made.

Names of the hub users these tests make start with MEMBER_PREFIX, so that their accounts
(``egs-isotest-...``) are recognisable, and removed (``userdel -r``) after each test, failed or not.
"""

from __future__ import annotations

import os
import pwd
import signal
import site
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import pytest

from egs_hub.core.system_names import system_username

MEMBER_PREFIX = "isotest"
PROCESS_GRACE = 15.0  # seconds the service takes to stop an account's processes before the test kills them


def others_can_reach(path: str) -> bool:
    """Whether a user who owns none of ``path`` and its directories may open it (o+x on every directory,
    o+r on the file itself)."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    for depth in range(1, len(parts)):
        directory = os.sep.join(parts[:depth]) or os.sep
        if not os.stat(directory).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(real).st_mode & stat.S_IROTH)


def member_python(root: str) -> str:
    """A Python that the system accounts can run, with this interpreter's packages (egs-hub, JupyterHub,
    JupyterLab): this one when they can reach it, else a venv in ``root`` (which others can enter) made
    from the system's python of the same version, its site-packages pointing at this one's.

    CI's interpreter lives under /root (0700), which no account may enter: on such a host an admin
    installs egs-hub where every user can read it (the README's security notes)."""
    packages = site.getsitepackages()
    if not all(others_can_reach(p) for p in packages):
        pytest.fail(f"the system accounts cannot read this Python's packages ({', '.join(packages)})")
    if others_can_reach(sys.executable):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = [p for d in ("/usr/bin", "/usr/local/bin") if os.path.exists(p := os.path.join(d, version))]
    usable = [p for p in found if others_can_reach(p)]
    if not usable:
        pytest.fail(f"no {version} that other users can run (looked in /usr/bin, /usr/local/bin)")
    env = os.path.join(root, "env")
    subprocess.run([usable[0], "-m", "venv", "--without-pip", env], check=True)
    (own,) = [p for p in os.listdir(os.path.join(env, "lib")) if p.startswith("python")]
    with open(os.path.join(env, "lib", own, "site-packages", "egs_tests.pth"), "w") as f:
        # a .pth line that imports is run: addsitedir also reads the editable install's own .pth
        f.write("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in packages) + "\n")
    return os.path.join(env, "bin", "python")


def open_directory() -> str:
    """A fresh directory under /tmp that every user may enter (a pytest tmp_path's parents are 0700,
    which would hide what the test means to show: that the data directory itself is closed)."""
    path = tempfile.mkdtemp(prefix="egs-iso-", dir="/tmp")
    os.chmod(path, 0o755)
    return path


@dataclass(frozen=True)
class Identity:
    uids: tuple[int, ...]  # real, effective, saved, filesystem
    gids: tuple[int, ...]
    groups: frozenset[int]
    cwd: str
    environ: dict[str, str]


def identity(pid: int) -> Identity:
    """Who process ``pid`` runs as, where, and with what environment (from /proc)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    return Identity(
        uids=tuple(map(int, fields["Uid"])),
        gids=tuple(map(int, fields["Gid"])),
        groups=frozenset(map(int, fields["Groups"])),
        cwd=os.readlink(f"/proc/{pid}/cwd"),
        environ={k.decode(): v.decode(errors="replace") for k, v in pairs},
    )


def endpoint_pid(slice_name: str, name: str) -> int:
    """The pid of the (only) server process of endpoint ``slice_name/name`` on this host."""
    marks = {f"EGS_SLICE={slice_name}".encode(), f"EGS_ENDPOINT={name}".encode()}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environment = set(f.read().split(b"\0"))
        except OSError:
            continue
        if marks <= environment:
            found.append(int(entry))
    assert len(found) == 1, f"endpoint {slice_name}/{name}: server processes {found}"
    return found[0]


def run_as(account: str, argv: list[str]) -> subprocess.CompletedProcess:
    """``argv`` run as system account ``account`` (its uid, gid and groups, in its home)."""
    entry = pwd.getpwnam(account)
    return subprocess.run(
        argv,
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=os.getgrouplist(account, entry.pw_gid),
        cwd=entry.pw_dir,
        env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pids_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except FileNotFoundError:
                continue
    return pids


def remove_account(hub_name: str) -> None:
    """Remove the system account of test hub user ``hub_name`` and its home, once the processes it still
    runs (the service stops an endpoint's within PROCESS_GRACE) are gone; nothing if it has none."""
    assert hub_name.startswith(MEMBER_PREFIX), f"{hub_name} is not a test user: its account stays"
    account = system_username(hub_name)
    try:
        uid = pwd.getpwnam(account).pw_uid
    except KeyError:
        return
    deadline = time.monotonic() + PROCESS_GRACE
    while _pids_of(uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _pids_of(uid):  # left behind by a failed test: only this test's account runs them
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 10
    while _pids_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    removed = subprocess.run(["userdel", "--remove", account], capture_output=True, text=True)
    assert removed.returncode == 0, f"userdel --remove {account}: exit {removed.returncode}: {removed.stderr}"
