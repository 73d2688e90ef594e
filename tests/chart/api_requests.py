"""A pytest plugin that records which Kubernetes API requests the code under test makes against the emulator.

Vocabulary: a *use* is (client, API group, resource, verb, scope), the triple RBAC rules
grant plus who made it and where: ``cluster`` (a cluster-scoped request, or one across
namespaces), ``slice`` (in a namespace labelled egs.io/slice), ``namespace`` (in any other) or
``absent`` (in one that is not there: answered 404 by the emulator, refused by RBAC on a
cluster). *client* is ``egs-service`` for the egs service's Kubernetes backend (its
User-Agent ``egs-hub/<version>``) and ``spawner`` for KubeSpawner in the hub (the client
library's default User-Agent, in the spawner's tests); requests of the tests' own client
(``egs-hub-tests``) and of anything else are not uses. Only requests with the emulator's own
token count: those with slice tokens (kubeconfig tests) are a slice's member's, not egs-hub's.

``pytest -p tests.chart.api_requests --record-api-requests=FILE ...`` writes the
sorted uses as JSON to FILE when the session ends. tests/chart/test_rbac.py runs
the backend's and the spawner's tests this way and compares the uses with the
chart's ClusterRoles and Roles.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from egs_hub.backends.kubernetes.backend import USER_AGENT

from ..k8s import emulator
from ..k8s.cluster import HARNESS_USER_AGENT
from ..k8s.rbac import Attributes

SPAWNER_TESTS = "tests/spawners/"


def client_of(user_agent: str, test: str) -> str | None:
    """Who made a request: the egs service's backend, KubeSpawner, or None (the tests themselves, or unknown)."""
    if user_agent == USER_AGENT:
        return "egs-service"
    if user_agent != HARNESS_USER_AGENT and test.startswith(SPAWNER_TESTS):
        return "spawner"
    return None


class Recorder:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.uses: set[tuple[str, str, str, str, str]] = set()
        self.test = ""

    def observe(self, attributes: Attributes, user_agent: str, scope: str) -> None:
        client = client_of(user_agent, self.test)
        if client is not None:
            self.uses.add((client, attributes.group, attributes.resource, attributes.verb, scope))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.test = item.nodeid
        try:
            return (yield)
        finally:
            self.test = ""

    def pytest_sessionfinish(self, session) -> None:
        self.path.write_text(json.dumps(sorted(self.uses), indent=1) + "\n")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-api-requests", metavar="FILE", help="write the Kubernetes API uses seen to FILE (JSON)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--record-api-requests")
    if path:
        recorder = Recorder(pathlib.Path(path))
        emulator.OBSERVERS.append(recorder.observe)
        config.pluginmanager.register(recorder, "api-requests-recorder")
