"""The configuration the chart renders runs: a real hub, proxy and egs service from `helm template`'s output.

rendered_hub_scenario.py renders the chart (with the vendored Zero to JupyterHub
dependency), starts Zero to JupyterHub's proxy and hub (its own
jupyterhub_config.py and z2jh.py reading the rendered hub Secret and ConfigMap,
our hub_config/ from jupyterhub_config.d) and the egs service's Deployment with
its env, config file and init container, against the Kubernetes API emulator;
then, through the proxy, the admin logs in and makes a workspace, alice asks for
GPUs and starts a server, and the pod SliceKubeSpawner makes is checked. Values
that render but do not work fail it.

It runs in namespaces of its own (``unshare``: user, network, mount, PID), so that
the rendered paths (``/usr/local/etc/jupyterhub/...``), Service names and
fixed ports (the hub binds 8081) are the release's without touching this
machine's files or ports. Zero to JupyterHub's files stay unmodified.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).with_name("rendered_hub_scenario.py")
LIMIT = 240  # seconds for the whole scenario; it takes about 20 on 2 cores


def test_the_rendered_release_runs(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed to give the release its own network and mount namespaces"
    assert shutil.which("mount"), "mount (util-linux) is needed to put the rendered files at their paths"
    # A user namespace maps this user to root in there: the mounts and port 80 need no privilege here.
    # In its own PID namespace, every process it started ends with it, even when the time limit kills it.
    command = [unshare, "--user", "--map-root-user", "--net", "--mount", "--propagation", "private"]
    command += ["--pid", "--fork", "--kill-child"]
    command += [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    command += ["--basetemp", str(tmp_path / "scenario"), str(SCENARIO.relative_to(ROOT))]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EGS_RENDERED_NETNS": "1"}
    try:
        ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired as e:
        partial = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        pytest.fail(f"the scenario did not end within {LIMIT}s (all its processes were killed):\n{partial[-20000:]}")
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-20000:]
    assert "1 passed" in output, output[-5000:]
