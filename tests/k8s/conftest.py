"""Fixtures for tests/k8s: a cluster (the emulator over HTTP on loopback, or a real one) and backends on it.

``--k8s-context=NAME`` (registered in tests/conftest.py) runs these tests against
that context of $KUBECONFIG (or ~/.kube/config) instead of the emulator; tests
that need the emulator's own controls (outage, compaction) are then deselected,
which pytest reports.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest
from kmock import Server

from egs_hub.backends.kubernetes import KubernetesBackend

from .cluster import KubeCluster
from .emulator import ClusterEmulator
from .kubeconfig import write_kubeconfig

CONTEXT = "emulated"


def _context(config: pytest.Config) -> str | None:
    return config.getoption("--k8s-context", default=None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _context(config) is None:
        return
    emulator_only = [i for i in items if "emulator" in getattr(i, "fixturenames", ())]
    if emulator_only:
        config.hook.pytest_deselected(items=emulator_only)
        items[:] = [i for i in items if i not in emulator_only]


@pytest.fixture
async def emulator() -> AsyncIterator[ClusterEmulator]:
    async with ClusterEmulator() as emulator, Server(emulator):
        yield emulator


@pytest.fixture
def kubeconfig(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> tuple[str, str]:
    """(path, context) of the cluster under test."""
    context = _context(request.config)
    if context is not None:
        return os.environ.get("KUBECONFIG", os.path.expanduser("~/.kube/config")), context
    emulator = request.getfixturevalue("emulator")
    server = str(emulator.url).rstrip("/")
    return str(write_kubeconfig(tmp_path / "kubeconfig", server, emulator.token, CONTEXT)), CONTEXT


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, kubeconfig: tuple[str, str]) -> AsyncIterator[KubeCluster]:
    emulator = None if _context(request.config) else request.getfixturevalue("emulator")
    async with KubeCluster(*kubeconfig, emulator=emulator) as cluster:
        yield cluster


@pytest.fixture
async def make_backend(kubeconfig: tuple[str, str]) -> AsyncIterator[Callable[..., KubernetesBackend]]:
    """Backends on the cluster under test (short timeouts); closed after the test."""
    made: list[KubernetesBackend] = []

    def make(**options) -> KubernetesBackend:
        path, context = kubeconfig
        defaults = dict(kubeconfig=path, context=context, exit_grace=timedelta(seconds=30), request_timeout=3.0)
        backend = KubernetesBackend("emu", **{**defaults, **options})
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()
