"""pytest-jupyter's server fixtures (``jp_fetch``) with the egs_hub.lab extension enabled.

The fixtures come in by import rather than ``pytest_plugins``, which pytest allows
only in the top-level conftest. ``jp_asyncio_loop`` is pytest-asyncio's loop here:
pytest-asyncio runs this repository's async tests, so the jupyter server must
serve on the loop the test awaits on.

A test module sets what the extension is told with the fixtures
``egs_extension_config`` (``c.EGSExtension`` traits) and ``egs_server_env``
(environment variables the server starts with), by overriding them or by
parametrizing them directly.
"""

from __future__ import annotations

import asyncio

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403
from traitlets.config import Config


@pytest.fixture
async def jp_asyncio_loop():
    return asyncio.get_running_loop()


@pytest.fixture
def egs_extension_config() -> dict:
    return {}


@pytest.fixture
def egs_server_env() -> dict[str, str]:
    return {}


@pytest.fixture
def jp_server_config(egs_extension_config, egs_server_env, monkeypatch) -> Config:
    for name in (
        "EGS_API_URL",
        "EGS_API_TOKEN",
        "JUPYTERHUB_API_TOKEN",
        "JUPYTERHUB_USER",
        "JUPYTERHUB_SERVER_NAME",
        "EGS_SLICE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in egs_server_env.items():
        monkeypatch.setenv(name, value)
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"egs_hub.lab": True}},
            "EGSExtension": egs_extension_config,
        }
    )
