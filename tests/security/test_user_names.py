"""One user per name: user names are NFKC-normalised, and invisible or text-direction characters refused.

Issue 45: "café" typed in NFC and in NFD were two hub users that look the same, and names holding
U+202E RIGHT-TO-LEFT OVERRIDE or U+200B ZERO WIDTH SPACE were accepted, so that one name could pass
for another. Now the hub (signup, login, /hub/invite) and the service (members) normalise a name the
same way (egs_hub/core/user_names.py) and refuse such characters, naming them.
"""

from __future__ import annotations

import html
import secrets
import unicodedata
from urllib.parse import quote

import pytest

from ..service.hub import Hub, Page, PageSession

PASSWORD = "a-long-enough-password"


def hub_user_names(hub: Hub) -> set[str]:
    names: set[str] = set()
    while page := hub.hub_api("GET", f"users?offset={len(names)}&limit=200"):
        names |= {u["name"] for u in page}
    return names


def test_the_nfd_form_of_a_name_is_the_same_user(hub, admin, make_slice):
    nfc = unicodedata.normalize("NFC", f"café-{secrets.token_hex(3)}")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    signed_up = PageSession(hub.url).sign_up(nfc, PASSWORD, hub.invite_link(nfc))
    assert signed_up.alert == "The signup was successful! You can now log in."

    taken = PageSession(hub.url).sign_up(nfd, "another-long-password")
    assert "this username is already in use" in taken.alert, taken.alert
    assert PageSession(hub.url).log_in(nfd, PASSWORD).status_code == 302  # the NFC user, logged in

    # The service keeps the same form: a member given in NFD is the NFC hub user.
    team = make_slice(members=(nfd,))["name"]
    assert admin.get(f"slices/{team}")["members"] == [nfc]
    assert admin.call("PUT", f"slices/{team}/members/{quote(nfd, safe='')}", expect=200)["members"] == [nfc]
    assert nfd not in hub_user_names(hub)


INVISIBLE = {
    "right-to-left override": ("\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    "zero width space": ("\u200b", "U+200B ZERO WIDTH SPACE"),
}


@pytest.mark.parametrize("case", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_a_name_with_an_invisible_character_is_refused_everywhere(hub, admin, make_slice, case):
    character, named = case
    name = f"eve{character}{secrets.token_hex(3)}"
    before = hub_user_names(hub)

    signed_up = PageSession(hub.url).sign_up(name, PASSWORD)
    assert signed_up.status == 400 and named in signed_up.alert, (signed_up.status, signed_up.alert)

    team = make_slice()["name"]
    error = admin.call("PUT", f"slices/{team}/members/{quote(name, safe='')}", expect=400)
    assert error["field"] == "user" and named in error["message"], error
    error = admin.post("slices", {"name": f"t-{secrets.token_hex(3)}", "members": [name]}, expect=400)
    assert error["field"] == "members" and named in error["message"], error

    admin_pages = hub.admin_pages()
    response = admin_pages.submit("/hub/invite", username=name)
    invited = Page(response.status_code, response.text)
    assert invited.status == 400 and named in invited.alert, (invited.status, invited.alert)

    assert hub_user_names(hub) == before
    assert name not in html.unescape(admin_pages.session.get(f"{hub.url}/hub/authorize", timeout=30).text)
