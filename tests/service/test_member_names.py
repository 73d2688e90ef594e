"""Member names are normalised as the hub normalises user names (lower case), never a 502 or a stray hub user.

Before issue 25, ``PUT /slices/team-a/members/Bob`` created the hub user ``Bob``
(the hub's POST /users/{name} keeps the name as given), then the hub refused to
add him to the group (its group API lower-cases names: "No such user: bob"): a
502, and a hub user ``Bob`` left behind that someone could sign up as.
"""

from __future__ import annotations

import secrets

import pytest

from egs_hub.service.hub import HubAPIError, HubClient

from .hub import Hub


def hub_user_names(hub: Hub) -> set[str]:
    """Every hub user's name, page by page."""
    names: set[str] = set()
    while page := hub.hub_api("GET", f"users?offset={len(names)}&limit=200"):
        names |= {u["name"] for u in page}
    return names


def test_a_member_name_with_capitals_is_the_hub_user_it_normalises_to(hub, admin, make_slice):
    team = make_slice()["name"]
    typed = f"Bob-{secrets.token_hex(3).upper()}"
    answer = admin.call("PUT", f"slices/{team}/members/{typed}", expect=200)
    assert answer["members"] == [typed.lower()]
    names = hub_user_names(hub)
    assert typed.lower() in names and typed not in names
    assert typed.lower() in {g["name"]: g["users"] for g in hub.hub_api("GET", "groups")}[team]
    added = [e for e in admin.get(f"events?slice={team}")["events"] if e["kind"] == "member-added"]
    assert [e["data"]["user"] for e in added] == [typed.lower()]

    # Removing by any case of the name removes the same member.
    answer = admin.call("DELETE", f"slices/{team}/members/{typed.upper()}", expect=200)
    assert answer["members"] == []


def test_members_given_at_creation_are_normalised_and_listed_once(hub, make_slice):
    carol, dave = f"carol-{secrets.token_hex(3)}", f"dave-{secrets.token_hex(3)}"
    created = make_slice(members=(carol.upper(), carol, dave.title()))
    assert created["members"] == sorted([carol, dave])
    names = hub_user_names(hub)
    assert {carol, dave} <= names and not {carol.upper(), dave.title()} & names


REFUSED = {
    "a comma": "a,b",
    "a space": "a%20b",
    "only dots": "...",
    "a percent sign": "a%25b",
    "a control character": "a%07b",
}


@pytest.mark.parametrize("typed", REFUSED.values(), ids=REFUSED.keys())
def test_a_name_the_hub_would_refuse_is_a_400_naming_the_field(hub, admin, make_slice, typed):
    team = make_slice()["name"]
    before = hub_user_names(hub)
    error = admin.call("PUT", f"slices/{team}/members/{typed}", expect=400)
    assert error["field"] == "user" and "must be a JupyterHub user name" in error["message"], error
    assert hub_user_names(hub) == before


async def test_users_created_for_a_group_that_cannot_take_them_are_deleted_again(hub):
    client = HubClient(f"{hub.url}/hub/api", hub.admin_token)
    newcomer = f"newcomer-{secrets.token_hex(3)}"
    with pytest.raises(HubAPIError) as failed:
        await client.add_members(f"no-such-group-{secrets.token_hex(3)}", [newcomer])
    assert failed.value.status == 404
    assert newcomer not in hub_user_names(hub)
