"""Projects through the live service: admins make projects and project admins; a project admin runs
their project's slices, members, templates and approvals, and nothing of another project."""

from __future__ import annotations

import secrets

import pytest

from .hub import until_status


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@pytest.fixture
def make_project(admin):
    made: list[str] = []

    def make(**body) -> dict:
        body.setdefault("name", _name("p"))
        created = admin.post("projects", body, expect=201)
        made.append(created["name"])
        return created

    yield make
    for name in made:
        left = admin.get(f"projects/{name}")
        for slice_name in left.get("slices", ()):  # none when the test deleted the project
            admin.call("DELETE", f"slices/{slice_name}")
        admin.call("DELETE", f"projects/{name}")


def test_admins_make_projects_and_project_admins(admin, make_project, user):
    bob, as_bob = user("bob")
    project = make_project(display_name="Research", quota={"max_gpus": 16}, share=2)
    name = project["name"]
    assert project["admin_group"] == f"{name}-admins" and project["admins"] == [] and project["slices"] == []
    assert (project["quota"]["max_gpus"], project["share"], project["display_name"]) == (16, 2.0, "Research")

    assert as_bob.get(f"projects/{name}", expect=404)["message"] == f"no project named {name!r}"  # not his to see
    assert as_bob.get("projects")["projects"] == []
    made = admin.call("PUT", f"projects/{name}/admins/{bob}", expect=200)
    assert made["admins"] == [bob]
    assert [p["name"] for p in as_bob.get("projects")["projects"]] == [name]
    assert as_bob.get(f"projects/{name}")["admins"] == [bob]
    as_bob.get("projects/default", expect=404)

    changed = admin.call("PATCH", f"projects/{name}", {"quota": {"max_cost_month": 500}, "share": 1}, expect=200)
    assert changed["quota"] == {"max_gpus": 16, "max_gpu_hours": None, "max_cost_month": 500.0}
    as_bob.call("PATCH", f"projects/{name}", {"share": 9}, expect=403)
    as_bob.post("projects", {"name": _name("mine")}, expect=403)

    assert admin.post("projects", {"name": name}, expect=409)["status"] == 409
    assert admin.post("projects", {"name": "Bad Name"}, expect=400)["field"] == "name"
    assert admin.call("DELETE", "projects/default", expect=409)["status"] == 409
    assert [p["name"] for p in admin.get("projects")["projects"]].count("default") == 1

    unmade = admin.call("DELETE", f"projects/{name}/admins/{bob}", expect=200)
    assert unmade["admins"] == []
    as_bob.get(f"projects/{name}", expect=404)


def test_a_project_admin_runs_their_projects_slices_and_nothing_else(admin, make_project, make_slice, user):
    bob, as_bob = user("bob")
    alice, as_alice = user("alice")
    name = make_project()["name"]
    admin.call("PUT", f"projects/{name}/admins/{bob}", expect=200)
    elsewhere = make_slice(members=(alice,))["name"]  # in the default project

    team = _name("team")
    made = as_bob.post("slices", {"name": team, "project": name, "members": [alice]}, expect=201)
    assert made["project"] == name and made["members"] == [alice]
    assert admin.get(f"projects/{name}")["slices"] == [team]
    as_bob.post("slices", {"name": _name("x"), "members": []}, expect=403)  # the default project is not his
    refused = admin.post("slices", {"name": _name("x"), "project": "no-such-project"}, expect=422)
    assert refused["field"] == "project"

    # His project's slice: he sees it, changes it and its members; another project's is as if it did not exist.
    assert {s["name"] for s in as_bob.get("slices")["slices"]} == {team}
    as_bob.call("PATCH", f"slices/{team}", {"policy": {"auto_approve_max_gpus": 1}}, expect=200)
    as_bob.call("PATCH", f"slices/{elsewhere}", {"display_name": "mine now"}, expect=404)
    as_bob.call("PUT", f"slices/{team}/members/{bob}", expect=200)
    as_bob.call("DELETE", f"slices/{team}/members/{bob}", expect=200)
    as_bob.call("PUT", f"slices/{elsewhere}/members/{bob}", expect=404)
    as_bob.get(f"gprs?slice={elsewhere}", expect=404)

    # He approves and denies his project's requests; another project's are not his to decide.
    big = as_alice.post("gprs", {"slice": team, "gpus": 2, "duration": 60}, expect=201)
    assert big["status"] == "pending-approval"
    assert as_bob.get(f"gprs?slice={team}")["gprs"][0]["id"] == big["id"]
    denied = as_bob.post(f"gprs/{big['id']}/deny", {"reason": "too big"}, expect=200)
    assert denied["status"] == "rejected"
    admin.call("PATCH", f"slices/{elsewhere}", {"policy": {"auto_approve_max_gpus": 1}}, expect=200)
    other = as_alice.post("gprs", {"slice": elsewhere, "gpus": 2, "duration": 60}, expect=201)
    as_bob.post(f"gprs/{other['id']}/approve", expect=404)
    admin.call("DELETE", f"gprs/{other['id']}", expect=200)

    # Templates for his project and its slices; not global ones.
    template = as_bob.post("templates", {"name": _name("t"), "project": name, "gpus": 1, "duration": 60}, expect=201)
    as_bob.post("templates", {"name": _name("t"), "gpus": 1, "duration": 60}, expect=403)
    theirs = {"name": _name("t"), "slice": elsewhere, "gpus": 1, "duration": 60}
    refused = as_bob.post("templates", theirs, expect=422)
    assert refused["message"] == f"no slice named {elsewhere!r}; GET /slices lists them"
    as_bob.call("DELETE", f"templates/{template['name']}", expect=204)

    # A project with a slice stays; without, it goes.
    assert admin.call("DELETE", f"projects/{name}", expect=409)["message"].endswith("delete or move them first")
    as_bob.call("DELETE", f"slices/{team}", expect=204)
    admin.call("DELETE", f"projects/{name}", expect=204)
    admin.get(f"projects/{name}", expect=404)


def test_a_projects_quota_caps_the_sum_of_its_slices(admin, make_project, user):
    alice, as_alice = user("alice")
    name = make_project(quota={"max_gpus": 3})["name"]
    first, second = _name("a"), _name("b")
    for team in (first, second):
        admin.post("slices", {"name": team, "project": name, "members": [alice]}, expect=201)
    held = as_alice.post("gprs", {"slice": first, "gpus": 2, "duration": "10m"}, expect=201)
    until_status(as_alice, held["id"], "provisioned")
    # Two more GPUs in the other slice would bring the project to 4 at once.
    (reason,) = as_alice.post("wait-times", {"slice": second, "gpus": 2, "duration": "10m"})["needs_approval"]
    assert reason == f"2 more GPUs would bring project {name} to 4 GPUs at once, over its quota of 3"
    assert as_alice.post("wait-times", {"slice": second, "gpus": 1, "duration": "10m"})["needs_approval"] == []
    waiting = as_alice.post("gprs", {"slice": second, "gpus": 2, "duration": "10m"}, expect=201)
    assert waiting["status"] == "pending-approval" and waiting["status_reason"] == reason
    admin.call("DELETE", f"gprs/{waiting['id']}", expect=200)
    admin.post(f"gprs/{held['id']}/release", expect=200)
    until_status(admin, held["id"], "complete")
