"""Hub groups are the service's: no slice, workspace request or project reaches a group that gives rights.

Issue 45: a slice's hub ``group`` could be any name but ``egs-admins``. A project admin made a slice
in their project whose group was another project's admin group, with themselves as a member, and so
became that project's admin; a workspace request named like a project's admin group did the same once
approved. Now a slice's group is one the service makes for it, or (named by an egs-hub admin only) an
existing group that holds no role and is no project's admin group; and a project's admin group is never
a slice's group.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from ..service.hub import Client, Hub

ROLE_GROUP = "test-role-holders"  # holds a role in the test hub's config (tests/service/hub_test_config.py)


def fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def group_members(hub: Hub, group: str) -> list[str] | None:
    """The hub group's members; None when there is no such group."""
    found = hub.hub_api("GET", f"groups/{group}", expect=(200, 404))
    return None if found.get("status") == 404 else sorted(found["users"])


@pytest.fixture
def make_project(admin: Client) -> Iterator:
    made: list[str] = []

    def make(**body) -> dict:
        body.setdefault("name", fresh("p"))
        created = admin.post("projects", body, expect=201)
        made.append(created["name"])
        return created

    yield make
    for name in made:
        for slice_name in admin.get(f"projects/{name}").get("slices", ()):
            admin.call("DELETE", f"slices/{slice_name}")
        admin.call("DELETE", f"projects/{name}")


@pytest.fixture
def project_admin(admin: Client, make_project, user) -> tuple[str, Client, str]:
    """(name, client, project): an admin of a new project, and nothing else."""
    name, client = user("pa")
    project = make_project()["name"]
    admin.call("PUT", f"projects/{project}/admins/{name}", expect=200)
    return name, client, project


def test_a_project_admin_cannot_take_another_projects_admin_group(hub, admin, make_project, project_admin):
    pa, as_pa, projb = project_admin
    projc = make_project()
    before = group_members(hub, projc["admin_group"])

    team = fresh("team")
    refused = as_pa.post(
        "slices", {"name": team, "project": projb, "group": projc["admin_group"], "members": [pa]}, expect=422
    )
    assert refused["field"] == "group" and f"project {projc['name']!r}" in refused["message"], refused
    assert group_members(hub, projc["admin_group"]) == before
    as_pa.get(f"projects/{projc['name']}", expect=404)  # not theirs: as if there were none
    admin.get(f"slices/{team}", expect=404)


def test_a_project_admin_cannot_take_an_existing_group_but_an_admin_may(hub, admin, project_admin, user):
    pa, as_pa, projb = project_admin
    other, _ = user("other")
    lab = fresh("lab")
    hub.hub_api("POST", f"groups/{lab}", expect=(201,))
    hub.hub_api("POST", f"groups/{lab}/users", {"users": [other]})
    try:
        team = fresh("team")
        refused = as_pa.post("slices", {"name": team, "project": projb, "group": lab, "members": [pa]}, expect=422)
        assert refused["field"] == "group", refused
        assert "an egs-hub admin" in refused["message"], refused
        assert group_members(hub, lab) == [other]

        # An egs-hub admin may give a slice an existing group without roles; deleting the slice keeps it.
        made = admin.post("slices", {"name": team, "project": projb, "group": lab}, expect=201)
        assert (made["group"], made["members"]) == (lab, [other])
        admin.call("DELETE", f"slices/{team}", expect=204)
        assert group_members(hub, lab) == [other]
    finally:
        hub.hub_api("DELETE", f"groups/{lab}", expect=(204, 404))

    # A group the service makes for the slice works as before, and goes with the slice.
    own = fresh("own")
    made = as_pa.post("slices", {"name": fresh("team"), "project": projb, "group": own, "members": [pa]}, expect=201)
    assert group_members(hub, own) == [pa]
    as_pa.call("PUT", f"slices/{made['name']}/members/{pa}", expect=200)
    as_pa.call("DELETE", f"slices/{made['name']}", expect=204)
    assert group_members(hub, own) is None


def test_not_even_an_admin_gives_a_slice_a_group_that_holds_a_role(hub, admin):
    assert hub.hub_api("GET", f"groups/{ROLE_GROUP}")["roles"] == ["test-group-role"]
    team = fresh("team")
    refused = admin.post("slices", {"name": team, "group": ROLE_GROUP, "members": []}, expect=422)
    assert refused["field"] == "group" and "test-group-role" in refused["message"], refused
    admin.get(f"slices/{team}", expect=404)


def test_a_workspace_request_cannot_be_named_as_a_project_admin_group(hub, admin, make_project, make_slice, user):
    _, as_requester = user("req")
    projd = make_project()
    refused = as_requester.post(
        "workspace-requests", {"project": projd["name"], "name": projd["admin_group"]}, expect=422
    )
    assert refused["field"] == "name", refused
    # Nor as a hub group that exists already: approving it would make the requester its member.
    refused = as_requester.post("workspace-requests", {"project": projd["name"], "name": ROLE_GROUP}, expect=422)
    assert refused["field"] == "name", refused
    # A workspace's own name (its group exists too) is still the 409 that says to ask its admins.
    team = make_slice()["name"]
    taken = as_requester.post("workspace-requests", {"project": projd["name"], "name": team}, expect=409)
    assert "ask its admins to add you" in taken["message"], taken


def test_approving_a_workspace_whose_name_became_an_admin_group_is_refused(hub, admin, make_project, user):
    requester, as_requester = user("req")
    approver, as_approver = user("appr")
    projd = make_project()["name"]
    admin.call("PUT", f"projects/{projd}/admins/{approver}", expect=200)
    name = fresh("later")
    asked = as_requester.post("workspace-requests", {"project": projd, "name": name}, expect=201)
    # Meanwhile an admin makes a project whose admin group has the requested workspace's name.
    proje = make_project(admin_group=name)["name"]

    refused = as_approver.post(f"workspace-requests/{asked['id']}/approve", expect=422)
    assert refused["field"] == "name" and f"project {proje!r}" in refused["message"], refused
    assert admin.get(f"workspace-requests/{asked['id']}")["status"] == "pending"
    assert requester not in group_members(hub, name)
    as_requester.get(f"projects/{proje}", expect=404)


def test_a_project_admin_group_cannot_be_a_slices_group(hub, admin, make_project, make_slice, user):
    member, as_member = user("m")
    team = make_slice(members=(member,))["name"]  # its group is its name
    name = fresh("p")
    refused = admin.post("projects", {"name": name, "admin_group": team}, expect=422)
    assert refused["field"] == "admin_group" and f"slice {team!r}" in refused["message"], refused
    admin.get(f"projects/{name}", expect=404)
    assert as_member.get("projects", expect=200)["projects"] == []

    # Also the default admin group (NAME-admins), when a slice has that name.
    clash = make_slice(name=fresh("q") + "-admins")["name"]
    refused = admin.post("projects", {"name": clash.removesuffix("-admins")}, expect=422)
    assert refused["field"] == "admin_group", refused


def test_no_slice_takes_the_group_a_project_without_admins_will_get(admin):
    # The default project names its admin group default-admins at its first admin (or has done so).
    refused = admin.post("slices", {"name": "default-admins"}, expect=422)
    assert refused["field"] == "group" and "project 'default'" in refused["message"], refused
    admin.get("slices/default-admins", expect=404)
