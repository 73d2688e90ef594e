"""SliceLocalSpawner: JupyterLab on this host, seeing only its slice's GPUs.

It is JupyterHub's SimpleLocalProcessSpawner (a LocalProcessSpawner that
starts servers in a per-user home directory), with ``CUDA_VISIBLE_DEVICES``
set to the GPU UUIDs bound to the user's slice (empty when none), and
``EGS_API_URL`` set to the service's API as this host reaches it, where the
server's extension (egs_hub.lab) calls it with the server's own hub token.

Who the server runs as is the ``isolation`` mode (system_users.py), the same
as the service's for the member's endpoints: in ``system-users`` as the
member's system account (made at their first start), with JupyterHub's own
preexec (setgid, initgroups, setuid, then the account's home), as
LocalProcessSpawner does for existing users; in ``none`` as the hub's OS user
in ``home_dir_template``.

Not a GPU boundary: an environment variable only tells CUDA which devices to
use; code in the server can unset it and open every GPU the host's device
files let its user open. On a shared host, isolate GPUs with a container per
server that gets only the slice's devices (DockerSpawner with the NVIDIA
container toolkit, ``--gpus device=UUID``), or use the Kubernetes backend,
where the device plugin enforces the assignment.
"""

from __future__ import annotations

import asyncio
import os

from jupyterhub.spawner import SimpleLocalProcessSpawner, set_user_setuid
from traitlets import CaselessStrEnum, default

from ..system_users import MODES, SYSTEM_USERS, Isolation, MemberProcess, default_mode
from .slice import SliceSpawnerMixin


class SliceLocalSpawner(SliceSpawnerMixin, SimpleLocalProcessSpawner):
    isolation = CaselessStrEnum(
        list(MODES),
        help="""Who the server runs as: "system-users", the member's own system account egs-<name> (made
        at their first start, home /home/egs-<name>; the hub must run as root), or "none", the hub's OS
        user in home_dir_template. It must be the service's EGSService.isolation, which starts the
        member's endpoints the same way: `egs-hub up` sets both. Default: "system-users" as root, else
        "none".

        .. versionadded:: 0.3
        """,
    ).tag(config=True)

    @default("isolation")
    def _default_isolation(self) -> str:
        return default_mode()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._egs_env: dict[str, str] = {}
        self._egs_preparation: asyncio.Future[dict[str, str]] | None = None
        self._egs_member: MemberProcess | None = None
        self._egs_start_notes()

    @property
    def _isolated(self) -> bool:
        return self.isolation == SYSTEM_USERS

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        env.update(self._egs_env)
        env["EGS_API_URL"] = self.egs_api_url
        return env

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        if self._isolated:
            env.update(self._member().environment())
            return env
        return super().user_env(env)

    def make_preexec_fn(self, name: str):
        if self._isolated:
            return set_user_setuid(self._member().user)
        return super().make_preexec_fn(name)

    def _member(self) -> MemberProcess:
        if self._egs_member is None:
            raise RuntimeError(f"{self.user.name}'s system account was not made before the server starts")
        return self._egs_member

    def get_args(self) -> list[str]:
        args = list(super().get_args())  # a copy: the base returns the trait's own list
        if os.geteuid() == 0 and not self._isolated:
            # Every server runs as the hub's OS user; jupyter-server refuses root unless told.
            args.append("--ServerApp.allow_root=True")
        return args

    async def start(self):
        self._egs_start_notes()
        if self._isolated:
            isolation = Isolation(self.isolation, self.home_dir_template)
            self._egs_member = await asyncio.to_thread(isolation.member_process, self.user.name)
            self.egs_note(f"Starting as the system account {self._egs_member.user}.")
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
