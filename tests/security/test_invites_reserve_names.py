"""Invites reserve the name: a stranger cannot sign up first as a name an admin invited or added.

Issue 45: after an admin made an invite for a name, a stranger's plain /hub/signup as that name made
the invite link fail ("already in use"); for a name an admin had added to a workspace, /hub/invite
then said "has signed up already" about the stranger's pending account, and authorizing it at
/hub/authorize gave the stranger the membership. Now such a signup is refused saying the name is
reserved, and a stranger's pending signup (made before, or before the admin added the name) is shown
to the admin as one, with a button that deletes it so that the invite can be made.
"""

from __future__ import annotations

import html
import re
import secrets

from ..service.hub import Hub, Page, PageSession, invite

PASSWORD = "a-long-enough-password"
STRANGERS = "the-strangers-password"


def fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def sign_up(hub: Hub, name: str, link: str = "/hub/signup", password: str = PASSWORD) -> Page:
    return PageSession(hub.url).sign_up(name, password, link)


def logs_in(hub: Hub, name: str, password: str = PASSWORD) -> bool:
    return PageSession(hub.url).log_in(name, password).status_code == 302


def authorize_row(pages: PageSession, name: str) -> str:
    """The text of ``name``'s row on /hub/authorize ("" when it has none)."""
    page = pages.session.get(pages.url("/hub/authorize"), timeout=30)
    assert page.status_code == 200
    row = re.search(rf'<tr[^>]*id="{re.escape(html.escape(name))}".*?</tr>', page.text, re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(row.group(0))).split()) if row else ""


def assert_reserved(page: Page, name: str) -> None:
    assert page.status == 403, (page.status, page.alert)
    assert page.alert == (
        f"The user name {name} is reserved: an admin invited {name} or added them to a workspace. "
        "Ask the admin for your invite link and sign up through it."
    ), page.alert


def test_a_stranger_cannot_sign_up_first_as_an_invited_name(hub):
    name = fresh("émile")
    link = hub.invite_link(name)

    assert_reserved(sign_up(hub, name, password=STRANGERS), name)
    assert_reserved(sign_up(hub, name.upper(), password=STRANGERS), name)  # the same name, normalised
    assert not logs_in(hub, name, STRANGERS)

    assert sign_up(hub, name, link=link).alert == "The signup was successful! You can now log in."
    assert logs_in(hub, name)


def test_a_stranger_cannot_sign_up_as_a_name_an_admin_added(hub, make_slice):
    name = fresh("frank")
    make_slice(members=(name,))

    assert_reserved(sign_up(hub, name, password=STRANGERS), name)
    admin_pages = hub.admin_pages()
    assert authorize_row(admin_pages, name) == ""  # nothing was created for an admin to authorize

    assert sign_up(hub, name, link=invite(admin_pages, name)).alert == "The signup was successful! You can now log in."
    assert logs_in(hub, name)


def test_a_strangers_pending_signup_is_shown_as_such_and_can_be_deleted(hub, admin, make_slice):
    # A stranger signed up as a name the hub did not know yet; then an admin added that name.
    name = fresh("gina")
    assert sign_up(hub, name, password=STRANGERS).alert == "Your information has been sent to the admin."
    team = make_slice(members=(name,))["name"]
    admin_pages = hub.admin_pages()

    row = authorize_row(admin_pages, name)
    assert "signed up without an invite" in row, row
    assert f"{name} is a hub user already" in row, row

    response = admin_pages.submit("/hub/invite", username=name)
    shown = Page(response.status_code, response.text)
    assert shown.status == 409, shown.alert
    assert shown.alert.startswith(f"{name} signed up without an invite and waits for authorization"), shown.alert
    assert 'id="delete-signup"' in shown.text

    response = admin_pages.submit("/hub/invite", username=name, action="delete-signup")
    deleted = Page(response.status_code, response.text)
    assert deleted.status == 200, deleted.alert
    assert deleted.alert == f"Deleted the pending signup of {name}. Now create the invite.", deleted.alert
    assert authorize_row(admin_pages, name) == ""
    assert admin.get(f"slices/{team}")["members"] == [name]  # the hub user and its membership stay

    assert sign_up(hub, name, link=invite(admin_pages, name)).alert == "The signup was successful! You can now log in."
    assert logs_in(hub, name)
    assert not logs_in(hub, name, STRANGERS)


def test_deleting_a_signup_deletes_only_a_pending_one(hub):
    name = fresh("hal")
    admin_pages = hub.admin_pages()
    assert sign_up(hub, name, link=invite(admin_pages, name)).alert == "The signup was successful! You can now log in."

    response = admin_pages.submit("/hub/invite", username=name, action="delete-signup")
    refused = Page(response.status_code, response.text)
    assert refused.status == 409 and refused.alert.startswith(f"{name} has no pending signup"), refused.alert
    assert logs_in(hub, name)
