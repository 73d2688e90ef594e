"""Free TCP ports on this host, for the embedded hub's listeners (embedded.py) and the inference
endpoints' servers (backends/local/endpoint_servers.py)."""

from __future__ import annotations

import random
import socket

_LOWEST_FREE_PORT = 20000


class NoFreePort(Exception):
    """No port was free; the message names the address and the range tried."""


def free_port(ip: str = "127.0.0.1") -> int:
    """A port nothing listens on, below the kernel's ephemeral range: a port from the range
    (what binding port 0 gives) can be taken by any outgoing connection before its
    listener binds it, one below it only by another listener."""
    low = _ephemeral_low()
    for port in random.sample(range(_LOWEST_FREE_PORT, low), min(64, low - _LOWEST_FREE_PORT)):
        with socket.socket() as s:
            try:
                s.bind((ip, port))
            except OSError:
                continue
            return port
    raise NoFreePort(f"no free port on {ip} from {_LOWEST_FREE_PORT} to {low - 1}")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 elsewhere and by default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return max(_LOWEST_FREE_PORT + 1024, int(f.read().split()[0]))
    except (OSError, ValueError, IndexError):
        return 32768
