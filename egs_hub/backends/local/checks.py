"""Checks that run on this host (core/checks.py judges what they print): ``nccl`` runs nccl-tests'
``all_reduce_perf`` across the GPR's GPUs, ``rdma`` runs ``ibstat``, ``custom`` the admin's command.

Each runs with ``CUDA_VISIBLE_DEVICES`` set to the GPUs checked and ``EGS_NODE``, ``EGS_CLUSTER``,
``EGS_PHASE``, ``EGS_GPUS`` (their count) and ``EGS_GPR`` (when for a GPR) in its environment; it
is killed at its timeout. A default tool that is not installed skips the check, saying so; a
command the admin named that cannot start fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence

from ...core import checks
from ...core.checks import CheckTarget, Verdict
from ...core.requests import CheckSpec

DEFAULT_COMMANDS = {
    "nccl": ("all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "{gpus}"),
    "rdma": ("ibstat",),
}
TOOLS = {"nccl": "nccl-tests' all_reduce_perf", "rdma": "ibstat (infiniband-diags)"}
KINDS = frozenset({"nccl", "rdma", "custom"})


async def run(argv: Sequence[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """Run ``argv``; its exit code (None when killed at ``timeout``) and its output, stderr after stdout."""
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        output, _ = await process.communicate()
        return None, output.decode(errors="replace")
    return process.returncode, output.decode(errors="replace")


async def run_check(spec: CheckSpec, target: CheckTarget) -> Verdict:
    node = target.node
    argv = checks.argv(spec, DEFAULT_COMMANDS.get(spec.kind, ()), len(target.gpus))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(target.gpus), **checks.environment(target)}
    try:
        code, output = await run(argv, env, spec.timeout.total_seconds())
    except FileNotFoundError:
        if spec.command is None:
            return checks.skipped(f"{TOOLS[spec.kind]} is not installed on {node}")
        return Verdict(checks.CheckStatus.FAILED, f"{argv[0]} cannot be found on {node}")
    except PermissionError as e:
        return Verdict(checks.CheckStatus.FAILED, f"{argv[0]} cannot run on {node}: {e}")
    if code is None:
        return checks.timed_out(spec, output)
    if spec.kind == "nccl":
        return checks.nccl(spec, code, output)
    if spec.kind == "rdma":
        return checks.rdma(spec, code, output)
    return checks.command(code, output)
