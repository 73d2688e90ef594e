"""Which hub server a GPU process belongs to.

A spawner sets ``JUPYTERHUB_USER`` and ``JUPYTERHUB_SERVER_NAME`` in a server's
environment and every kernel and terminal it starts inherits them, so a
process's environment names its server. Another OS user's environment is
readable only with privileges; such a process is shown without an owner.
"""

from __future__ import annotations

import os


def server_of(pid: int, proc: str = "/proc") -> tuple[str, str] | None:
    """(user, server name) of the hub server ``pid`` runs under; None when unknown or unreadable."""
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return None
    environment = dict(e.split(b"=", 1) for e in entries if b"=" in e)
    user = environment.get(b"JUPYTERHUB_USER")
    if not user:
        return None
    return user.decode(errors="replace"), environment.get(b"JUPYTERHUB_SERVER_NAME", b"").decode(errors="replace")
