"""GPR templates through the live service: who may list, use and change them, and GPRs and wait
times asked from one."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@pytest.fixture
def make_template(admin):
    made: list[str] = []

    def make(**body) -> dict:
        body.setdefault("name", _name("tpl"))
        created = admin.post("templates", body, expect=201)
        made.append(created["name"])
        return created

    yield make
    for name in made:
        admin.call("DELETE", f"templates/{name}")


def test_members_use_the_templates_their_slice_may_use(admin, make_slice, make_template, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    other = make_slice()["name"]
    everyone = make_template(gpus=1, duration="30m", description="one GPU for half an hour", preemptible=False)
    ours = make_template(slice=team, nodes=1, duration="2h", priority=150)
    theirs = make_template(slice=other, gpus=2, duration="1h")
    project = make_template(project="default", gpus=2, duration="1h")
    assert everyone["scope"] == "global" and ours["scope"] == f"slice {team}"
    assert project["scope"] == "project default"
    assert admin.get(f"templates/{everyone['name']}") == everyone

    listed = {t["name"] for t in as_alice.get(f"templates?slice={team}")["templates"]}
    assert {everyone["name"], ours["name"], project["name"]} <= listed and theirs["name"] not in listed
    assert {t["name"] for t in as_alice.get("templates")["templates"]} == listed
    assert as_alice.get(f"templates/{ours['name']}")["name"] == ours["name"]
    as_alice.get(f"templates/{theirs['name']}", expect=404)
    as_alice.get(f"templates?slice={other}", expect=404)

    # A GPR from a template: what it leaves out is the template's, what it gives wins.
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    asked = {"slice": team, "template": everyone["name"], "duration": 600, "start_after": later}
    gpr = as_alice.post("gprs", asked, expect=201)
    assert (gpr["template"], gpr["gpus"], gpr["duration"], gpr["preemptible"]) == (everyone["name"], 1, 600, False)
    as_alice.call("DELETE", f"gprs/{gpr['id']}", expect=200)
    waits = as_alice.post("wait-times", {"slice": team, "template": everyone["name"]}, expect=200)
    assert waits["options"] and all(o["gpus"] == 1 for o in waits["options"])

    # Another slice's template answers as a missing one: whose it is is not hers to learn.
    refused = as_alice.post("gprs", {"slice": team, "template": theirs["name"]}, expect=422)
    assert refused["field"] == "template" and other not in refused["message"]
    missing = as_alice.post("gprs", {"slice": team, "template": "no-such-template"}, expect=422)
    assert refused["message"].replace(theirs["name"], "no-such-template") == missing["message"]
    # The slice's policy still holds for what a template gives: members ask for at most priority 300
    # unless the policy says less.
    admin.call("PATCH", f"slices/{team}", {"policy": {"max_priority": 120}}, expect=200)
    refused = as_alice.post("gprs", {"slice": team, "template": ours["name"]}, expect=422)
    assert refused["field"] == "priority"
    assert as_alice.get(f"gprs?slice={team}")["gprs"][0]["status"] == "cancelled"  # nothing else written


def test_only_admins_change_templates_and_bad_ones_are_refused(admin, make_slice, make_template, user):
    alice, as_alice = user("alice")
    team = make_slice(members=(alice,))["name"]
    template = make_template(slice=team, gpus=1, duration="1h")
    name = template["name"]
    as_alice.post("templates", {"name": _name("mine"), "gpus": 1, "duration": 60}, expect=403)
    as_alice.call("PATCH", f"templates/{name}", {"gpus": 2}, expect=403)
    as_alice.call("DELETE", f"templates/{name}", expect=403)

    for body, field in [
        ({"name": name, "gpus": 1, "duration": 60}, None),  # exists: 409
        ({"name": _name("x"), "gpus": 1, "duration": 60, "slice": "no-such-slice"}, "slice"),
        ({"name": _name("x"), "gpus": 1, "duration": 60, "project": "no-such-project"}, "project"),
        ({"name": _name("x"), "gpus": 1, "duration": 60, "project": "default", "slice": team}, "slice"),
        ({"name": _name("x"), "duration": 60}, "gpus"),
        ({"name": "Not A Name", "gpus": 1, "duration": 60}, "name"),
    ]:
        answer = admin.post("templates", body)
        assert answer["field" if field else "status"] == (field or 409), (body, answer)
    before = admin.get(f"templates/{name}")

    changed = admin.call("PATCH", f"templates/{name}", {"nodes": 1, "description": "a whole node"}, expect=200)
    assert (changed["gpus"], changed["nodes"], changed["description"]) == (None, 1, "a whole node")
    assert changed["created_at"] == before["created_at"] and changed["slice"] == team
    assert admin.call("PATCH", f"templates/{name}", {"project": "no-such-project"}, expect=422)["field"] == "project"
    assert admin.get(f"templates/{name}") == changed  # the refused change wrote nothing
    kinds = [e["kind"] for e in admin.get(f"events?slice={team}")["events"]]
    assert {"template-created", "template-updated"} <= set(kinds)

    admin.call("DELETE", f"templates/{name}", expect=204)
    admin.get(f"templates/{name}", expect=404)


def test_a_slices_templates_go_with_it(admin, make_template):
    team = _name("gone")
    admin.post("slices", {"name": team}, expect=201)
    template = make_template(slice=team, gpus=1, duration="1h")
    admin.call("DELETE", f"slices/{team}", expect=204)
    admin.get(f"templates/{template['name']}", expect=404)
