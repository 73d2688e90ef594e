"""Fixtures for the chart tests: helm, the chart with its dependency in place, and ``render``.

The chart depends on Zero to JupyterHub (``jupyterhub`` 4.3.2 from
https://hub.jupyter.org/helm-chart/), which cannot be downloaded here or in CI.
``chart_with_dependency`` copies the released chart from the shared vendor folder
(``../shared/vendor/charts/`` beside the checkout, or ``$EGS_VENDOR_CHARTS``) into
``charts/egs-hub/charts/`` (git-ignored): exactly what ``helm dependency build``
would put there. ``render`` runs ``helm template`` with values files and ``--set``
values and answers the parsed documents.

helm comes from tests/k8s/install_helm.sh (``make install-test`` runs it) into .cache/bin/helm, or $HELM.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "egs-hub"
VALUES = pathlib.Path(__file__).resolve().parent / "values"
RELEASE, NAMESPACE = "egs", "egs"


def vendor_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("EGS_VENDOR_CHARTS") or ROOT.parent / "shared" / "vendor" / "charts")


def find_helm() -> str:
    found = os.environ.get("HELM") or (
        str(ROOT / ".cache/bin/helm") if (ROOT / ".cache/bin/helm").exists() else shutil.which("helm")
    )
    if found is None:
        pytest.fail("helm is not installed: run tests/k8s/install_helm.sh (make install-test runs it), or set $HELM")
    return found


@pytest.fixture(scope="session")
def helm() -> str:
    return find_helm()


def put_dependencies(chart: pathlib.Path, vendor: pathlib.Path) -> list[pathlib.Path]:
    """Copy each dependency of Chart.yaml from ``vendor`` into ``chart/charts/`` as ``<name>-<version>.tgz``.

    Atomic (a copy beside the chart, then a rename), so parallel test workers never see half a file; helm
    would take any file in charts/, a partial one too, for a subchart."""
    dependencies = yaml.safe_load((chart / "Chart.yaml").read_text()).get("dependencies") or []
    target = chart / "charts"
    target.mkdir(exist_ok=True)
    placed = []
    for dep in dependencies:
        name = f"{dep['name']}-{dep['version']}.tgz"
        source = vendor / name
        if not source.is_file():
            pytest.fail(
                f"{source} is missing: the chart's dependency {dep['name']} {dep['version']} "
                f"({dep['repository']}) comes from the shared vendor folder (see its README.md), "
                "or set $EGS_VENDOR_CHARTS to the folder that holds it"
            )
        destination = target / name
        if not destination.is_file() or destination.read_bytes() != source.read_bytes():
            with tempfile.NamedTemporaryFile(dir=chart.parent, suffix=".part", delete=False) as part:
                part.write(source.read_bytes())
            os.replace(part.name, destination)
        placed.append(destination)
    return placed


@pytest.fixture(scope="session")
def chart_with_dependency() -> pathlib.Path:
    """charts/egs-hub with Zero to JupyterHub in its charts/ folder, as `helm dependency build` leaves it."""
    put_dependencies(CHART, vendor_dir())
    return CHART


def run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def template_args(
    values_files: Iterable[str | pathlib.Path] = (),
    set_values: Mapping[str, str] | Iterable[str] = (),
    api_versions: Iterable[str] = (),
) -> list[str]:
    """helm arguments: ``-f`` for each values file (a bare name is one of tests/chart/values/), ``--set``
    for each value (``{"a.b": "c"}`` or ``["a.b=c"]``), ``--api-versions`` for each capability."""
    args = []
    for f in values_files:
        path = pathlib.Path(f)
        args += ["-f", str(path if path.is_absolute() else VALUES / path)]
    pairs = [f"{k}={v}" for k, v in set_values.items()] if isinstance(set_values, Mapping) else list(set_values)
    args += [f"--set={pair}" for pair in pairs]
    args += [f"--api-versions={v}" for v in api_versions]
    return args


def render_chart(helm: str, chart: pathlib.Path, *values_files, set_values=(), api_versions=()) -> list[dict]:
    """``helm template egs <chart> -n egs`` with the CRDs: every document, parsed."""
    out = run(
        helm,
        "template",
        RELEASE,
        str(chart),
        "--namespace",
        NAMESPACE,
        "--include-crds",
        *template_args(values_files, set_values, api_versions),
    )
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="session")
def render(helm: str, chart_with_dependency: pathlib.Path) -> Callable[..., list[dict]]:
    """``render("postgres-secret.yaml", set_values={...}, api_versions=[...])``: the parsed documents."""

    def rendered(*values_files, set_values=(), api_versions=()) -> list[dict]:
        return render_chart(
            helm, chart_with_dependency, *values_files, set_values=set_values, api_versions=api_versions
        )

    return rendered


def of_kind(docs: list[dict], kind: str, name: str | None = None) -> dict:
    """The one document of this kind (and name)."""
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} documents"
    return found[0]
