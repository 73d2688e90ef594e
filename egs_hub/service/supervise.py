"""``python -m egs_hub.service.supervise``: the EGS service, started again at once when it dies.

JupyterHub notices that a managed service exited only at its next poll of it (every
30 s), and a kubelet restarts a crashing container with a growing back-off: while the
service is down every request through the proxy answers 503. This supervisor runs the
service (``python -m egs_hub.service`` with the same arguments and environment) as its
child and starts it again within ``RESTART_DELAY`` of an unexpected exit; a child that
keeps dying soon after it started (a bad configuration, a database that is down) is
started again after a delay that doubles up to ``MAX_DELAY``, so that its log stays
readable.

SIGTERM and SIGINT are passed on to the child, and the supervisor exits with the
child's status once it has stopped. The child gets SIGTERM when the supervisor dies
(Linux: PR_SET_PDEATHSIG), so that killing the supervisor leaves no service behind.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time

log = logging.getLogger("egs_hub.service.supervise")

RESTART_DELAY = 0.1  # seconds before starting a child that died unexpectedly again
MAX_DELAY = 30.0  # the longest wait between starts of a child that keeps dying soon after starting
STEADY_SECONDS = 10.0  # a child that ran this long before it died is started again without delay
PR_SET_PDEATHSIG = 1


def child_command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "egs_hub.service", *argv]


def _die_with_parent(parent: int) -> None:
    """In the child, before it runs the service: get SIGTERM when the supervisor dies."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the supervisor died before the line above
        os._exit(1)


def next_delay(previous: float, ran_for: float) -> float:
    """How long to wait before the next start of a child that ran ``ran_for`` seconds and died,
    after waiting ``previous`` before its own start."""
    if ran_for >= STEADY_SECONDS:
        return RESTART_DELAY
    return min(MAX_DELAY, max(RESTART_DELAY, previous * 2))


def describe(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Supervisor:
    def __init__(self, command: list[str]):
        self.command = command
        self.child: subprocess.Popen | None = None
        self.stopping = False

    def _forward(self, signum: int, _frame) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._forward)
        parent, delay = os.getpid(), RESTART_DELAY
        while True:
            started = time.monotonic()
            self.child = subprocess.Popen(self.command, preexec_fn=lambda: _die_with_parent(parent))
            if self.stopping:  # asked to stop while it was being started
                self.child.terminate()
            returncode = self.child.wait()
            if self.stopping:
                return returncode if returncode >= 0 else 0
            ran_for = time.monotonic() - started
            delay = next_delay(delay, ran_for)
            log.error(
                "the EGS service (pid %d) %s after %.1f s; starting it again in %.1f s",
                self.child.pid,
                describe(returncode),
                ran_for,
                delay,
            )
            deadline = time.monotonic() + delay
            while not self.stopping and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(left, 0.1))
            if self.stopping:
                return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    return Supervisor(child_command(sys.argv[1:] if argv is None else argv)).run()


if __name__ == "__main__":
    sys.exit(main())
