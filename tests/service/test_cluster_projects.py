"""Clusters held by a project, through the live service (its own hub: the test moves its only cluster):
only that project's workspaces get GPUs or namespaces there; the default project's clusters serve all."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .hub import Hub, sqlite_hub, until_status


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("cluster-projects")) as running:
        yield running


def test_a_cluster_of_a_project_serves_only_its_workspaces(hub):
    admin = hub.admin()
    member = hub.client(hub.user_token("cp-member"))
    (local,) = [c["name"] for c in admin.get("clusters")["clusters"] if c["kind"] == "local"]
    assert [c["project"] for c in admin.get("clusters")["clusters"]] == ["default"]
    admin.post("projects", {"name": "vision"}, expect=201)
    admin.post("slices", {"name": "cv", "project": "vision", "members": ["cp-member"]}, expect=201)
    admin.post("slices", {"name": "nlp", "members": ["cp-member"]}, expect=201)

    missing = admin.call("PATCH", f"clusters/{local}", {"project": "nowhere"}, expect=422)
    assert missing["field"] == "project"
    member.call("PATCH", f"clusters/{local}", {"project": "vision"}, expect=403)
    admin.call("PATCH", "clusters/nowhere", {"project": "vision"}, expect=404)
    moved = admin.call("PATCH", f"clusters/{local}", {"project": "vision"}, expect=200)
    assert moved["project"] == "vision"
    assert admin.get("projects/vision")["clusters"] == [local]
    assert local not in admin.get("projects/default")["clusters"]

    # The default project's workspace has no cluster left to run on; vision's gets GPUs there.
    refused = member.post("gprs", {"slice": "nlp", "gpus": 1, "duration": "10m"}, expect=422)
    assert refused["field"] == "gpus" and "on the clusters of project 'default' or shared ones" in refused["message"]
    waits = member.post("wait-times", {"slice": "nlp", "gpus": 1, "duration": "10m"}, expect=422)
    assert "project 'default'" in waits["message"]
    gpr = member.post("gprs", {"slice": "cv", "gpus": 1, "duration": "10m"}, expect=201)
    until_status(member, gpr["id"], "provisioned")
    # Nor can it have namespaces there.
    namespaces = admin.call("PATCH", "slices/nlp", {"namespaces": {local: ["nlp-ns"]}}, expect=422)
    assert namespaces["field"] == f"namespaces.{local}" and "project 'vision'" in namespaces["message"]

    # While vision's GPR holds GPUs there, the cluster does not move to a project it would not serve.
    admin.post("projects", {"name": "speech"}, expect=201)
    busy = admin.call("PATCH", f"clusters/{local}", {"project": "speech"}, expect=409)
    assert f"GPR {gpr['id']}" in busy["message"]
    # Back in the default project it serves every project again.
    assert admin.call("PATCH", f"clusters/{local}", {"project": "default"}, expect=200)["project"] == "default"
    later = member.post("gprs", {"slice": "nlp", "gpus": 1, "duration": "10m"}, expect=201)
    until_status(member, later["id"], "provisioned")
    for gpr_id in (gpr["id"], later["id"]):
        member.post(f"gprs/{gpr_id}/release", expect=200)
