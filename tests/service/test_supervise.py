"""The supervisor (service/supervise.py) starts a dead EGS service again within 2 s, passes a stop on,
and leaves no service behind when it is killed itself. The child here is a stand-in that writes its
pid and waits for a signal, so the test watches the supervisor alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from egs_hub.service.supervise import MAX_DELAY, RESTART_DELAY, STEADY_SECONDS, describe, next_delay

from .hub import wait_for

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()}\\n")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(0.05)
    """
)


def test_next_delay_restarts_at_once_unless_it_keeps_dying_soon_after_starting():
    assert next_delay(RESTART_DELAY, STEADY_SECONDS) == RESTART_DELAY
    assert next_delay(5.0, STEADY_SECONDS + 1) == RESTART_DELAY
    assert next_delay(RESTART_DELAY, 0.5) == 2 * RESTART_DELAY
    delays = [RESTART_DELAY]
    for _ in range(20):
        delays.append(next_delay(delays[-1], 0.5))
    assert delays == sorted(delays) and delays[-1] == MAX_DELAY


@pytest.mark.parametrize(
    ("returncode", "said"),
    [(-signal.SIGSEGV, "killed by SIGSEGV"), (-signal.SIGKILL, "killed by SIGKILL"), (3, "exited with status 3")],
)
def test_describe_names_the_signal_or_the_status(returncode, said):
    assert describe(returncode) == said


def pids(path) -> list[int]:
    try:
        with open(path) as f:
            return [int(line) for line in f.read().split()]
    except FileNotFoundError:
        return []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[-1][0] != "Z"


def start_supervisor(tmp_path) -> tuple[subprocess.Popen, str]:
    started = str(tmp_path / "pids")
    script = (
        "import sys; from egs_hub.service.supervise import Supervisor; "
        f"sys.exit(Supervisor([sys.executable, '-c', {CHILD!r}, {started!r}]).run())"
    )
    supervisor = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    wait_for(lambda: pids(started), 20, "the first child")
    return supervisor, started


def test_a_killed_service_is_started_again_within_two_seconds(tmp_path):
    supervisor, started = start_supervisor(tmp_path)
    try:
        for kills in range(1, 4):
            (child,) = pids(started)[-1:]
            killed = time.monotonic()
            os.kill(child, signal.SIGSEGV if kills % 2 else signal.SIGKILL)
            wait_for(lambda n=kills: len(pids(started)) > n, 2, "the service to be started again", interval=0.02)
            assert time.monotonic() - killed < 2
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(10) == 0
        assert not any(alive(pid) for pid in pids(started))
        log = supervisor.stderr.read()
        assert "killed by SIGSEGV" in log and "killed by SIGKILL" in log, log
    finally:
        supervisor.kill()
        supervisor.wait()


def test_a_killed_supervisor_takes_its_service_with_it(tmp_path):
    supervisor, started = start_supervisor(tmp_path)
    (child,) = pids(started)
    supervisor.kill()
    supervisor.wait()
    wait_for(lambda: not alive(child), 5, "the service to stop with its supervisor", interval=0.05)
