"""SliceLocalSpawner: JupyterLab on this host, seeing only its slice's GPUs.

It is JupyterHub's SimpleLocalProcessSpawner (a LocalProcessSpawner that runs
every server as the OS user running the hub, in a per-user home directory),
with ``CUDA_VISIBLE_DEVICES`` set to the GPU UUIDs bound to the user's slice
(empty when none), and ``EGS_API_URL`` set to the service's API as this host
reaches it, where the server's extension (egs_hub.lab) calls it with the
server's own hub token.

Not a security boundary: an environment variable only tells CUDA which
devices to use; code in the server can unset it and open every GPU, and all
servers run as the same OS user. On a shared host, isolate with a container
per server that gets only the slice's devices (DockerSpawner with the NVIDIA
container toolkit, ``--gpus device=UUID``), or use the Kubernetes backend,
where the device plugin enforces the assignment.
"""

from __future__ import annotations

import asyncio
import os

from jupyterhub.spawner import SimpleLocalProcessSpawner

from .slice import SliceSpawnerMixin


class SliceLocalSpawner(SliceSpawnerMixin, SimpleLocalProcessSpawner):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._egs_env: dict[str, str] = {}
        self._egs_preparation: asyncio.Future[dict[str, str]] | None = None
        self._egs_start_notes()

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        env.update(self._egs_env)
        env["EGS_API_URL"] = self.egs_api_url
        return env

    def get_args(self) -> list[str]:
        args = list(super().get_args())  # a copy: the base returns the trait's own list
        if os.geteuid() == 0:
            # Every server runs as the hub's OS user; jupyter-server refuses root unless told.
            args.append("--ServerApp.allow_root=True")
        return args

    async def start(self):
        self._egs_start_notes()
        self._egs_preparation = asyncio.ensure_future(self.egs_environment())
        self._egs_env = await self._egs_preparation
        return await super().start()

    async def progress(self):
        """The start's notes: the workspace, and the GPR it waits for (its place and estimated start)."""
        while self._egs_preparation is None:
            await asyncio.sleep(0.1)
        async for event in self.egs_progress(self._egs_preparation):
            yield event

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        self._egs_preparation = None
        await self.forget_server()
