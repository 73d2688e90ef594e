"""Workspace requests through the live service: a user asks, the project's admins see and approve
(the workspace is made with the members asked for) or deny; nobody approves their own."""

from __future__ import annotations

import secrets


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def test_a_user_asks_and_a_project_admin_approves_or_denies(admin, user):
    alice, as_alice = user("alice")
    bob, as_bob = user("bob")
    carol, as_carol = user("carol")
    project = _name("p")
    admin.post("projects", {"name": project}, expect=201)
    admin.call("PUT", f"projects/{project}/admins/{bob}", expect=200)
    team = _name("team")

    asked = as_alice.post(
        "workspace-requests",
        {
            "project": project,
            "name": team,
            "display_name": "Vision",
            "purpose": "fine-tune a detector",
            "members": [carol, alice],
            "quota": {"max_gpus": 4},
        },
        expect=201,
    )
    assert (asked["status"], asked["requested_by"], asked["members"]) == ("pending", alice, [carol])
    assert asked["quota"] == {"max_gpus": 4, "max_gpu_hours": None, "max_cost_month": None}
    rid = asked["id"]
    assert [r["id"] for r in as_bob.get("workspace-requests?status=pending")["workspace_requests"]] == [rid]
    assert as_alice.get(f"workspace-requests/{rid}")["id"] == rid  # her own
    assert as_carol.get("workspace-requests")["workspace_requests"] == []
    as_carol.get(f"workspace-requests/{rid}", expect=404)
    as_carol.post(f"workspace-requests/{rid}/approve", expect=404)

    # The same name twice, or a workspace's name, is a 409; a project or cluster that is not, a 422.
    as_carol.post("workspace-requests", {"project": project, "name": team}, expect=409)
    refused = as_carol.post("workspace-requests", {"project": "no-such", "name": _name("x")}, expect=422)
    assert refused["field"] == "project"
    refused = as_carol.post("workspace-requests", {"name": _name("x"), "clusters": ["nowhere"]}, expect=422)
    assert refused["field"] == "clusters"

    # A project admin never approves their own request.
    admin.call("PUT", f"projects/{project}/admins/{alice}", expect=200)
    own = as_alice.post(f"workspace-requests/{rid}/approve", expect=403)
    assert "nobody approves their own workspace request" in own["message"]

    done = as_bob.post(f"workspace-requests/{rid}/approve", {"quota": {"max_gpus": 2}, "reason": "ok"}, expect=200)
    assert (done["status"], done["decided_by"], done["slice"], done["reason"]) == ("approved", bob, team, "ok")
    made = admin.get(f"slices/{team}")
    assert (made["project"], made["display_name"], made["members"]) == (project, "Vision", sorted([alice, carol]))
    assert made["quota"]["max_gpus"] == 2
    assert as_carol.get(f"slices/{team}")["name"] == team  # carol is a member now
    kinds = [e["kind"] for e in admin.get(f"events?slice={team}")["events"]]
    assert {"slice-created", "workspace-approved"} <= set(kinds)
    assert as_bob.post(f"workspace-requests/{rid}/deny", expect=409)["status"] == 409

    other = as_carol.post("workspace-requests", {"project": project, "name": _name("late")}, expect=201)
    denied = as_bob.post(f"workspace-requests/{other['id']}/deny", {"reason": "use team"}, expect=200)
    assert (denied["status"], denied["reason"]) == ("denied", "use team")
    assert as_bob.post(f"workspace-requests/{other['id']}/approve", expect=409)["status"] == 409
    assert [r["id"] for r in as_carol.get("workspace-requests?status=denied")["workspace_requests"]] == [other["id"]]

    admin.call("DELETE", f"slices/{team}", expect=204)
    admin.call("DELETE", f"projects/{project}", expect=204)
