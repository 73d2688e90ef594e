"""Start one rendered container's command in a private mount namespace, with its files at their paths.

Run as ``unshare --mount --propagation private python -m tests.chart.pod_exec SPEC``
(by pods.py): SPEC is a JSON file ``{"binds": [[staged, target], ...], "covers":
[[staged, folder], ...], "cwd", "env", "argv"}``. The container expects files at
absolute paths (Zero to JupyterHub's ``/usr/local/etc/jupyterhub/...``, a
ServiceAccount's ``/var/run/secrets/kubernetes.io/serviceaccount``). A path that
does not exist here is first made: its nearest existing folder is covered by a
skeleton folder that holds an empty file or folder there and, bind-mounted,
every entry the folder had (``covers``). Then each staged file or folder is
bind-mounted at its path (``binds``, in order), so that containers of one pod
share their volumes as in Kubernetes.
Nothing of this machine's files changes, and only this process and its children
see the pod's files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def bind(source: str, target: str) -> None:
    subprocess.run(["mount", "--rbind", source, target], check=True, capture_output=True, text=True)


def mount_all(binds: list[list[str]], covers: list[list[str]]) -> None:
    for skeleton, anchor in covers:
        for entry in os.listdir(anchor):
            placeholder = os.path.join(skeleton, entry)
            if os.path.lexists(placeholder):
                continue  # the pod's entry covers this one
            original = os.path.join(anchor, entry)
            if os.path.islink(original):
                os.symlink(os.readlink(original), placeholder)
                continue
            if os.path.isdir(original):
                os.mkdir(placeholder)
            else:
                open(placeholder, "w").close()
            bind(original, placeholder)
        bind(skeleton, anchor)
    for staged, target in binds:
        bind(staged, target)


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    try:
        mount_all(spec["binds"], spec["covers"])
    except subprocess.CalledProcessError as e:
        sys.exit(f"pod_exec: {' '.join(e.cmd)} failed: {e.stderr.strip()}")
    os.chdir(spec["cwd"])
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
