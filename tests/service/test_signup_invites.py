"""Signup at the embedded hub: a name an admin added signs up through its invite; other signups wait for approval.

Before issue 25, whoever signed up first at /hub/signup as a name the hub already
knew (an admin had added it to a workspace) was authorized at once: the name was
theirs. Since issue 45 such a name is reserved: it signs up only through an invite
link an admin made at /hub/invite for it. Any other signup waits for an admin at
/hub/authorize.
Everything here goes through the hub's real pages, as a browser would (forms,
cookies, _xsrf), with ``requests``.
"""

from __future__ import annotations

import html
import os
import re
import secrets
import time
from collections.abc import Iterator

import pytest
import requests

from egs_hub.embedded import free_port

from .hub import HERE, Hub, Page, PageSession, invite, start_hub, stop_hub

PASSWORD = "a-long-enough-password"


def logs_in(hub: Hub, name: str, password: str = PASSWORD) -> bool:
    return PageSession(hub.url).log_in(name, password).status_code == 302


@pytest.fixture
def admin_pages(hub: Hub) -> PageSession:
    """The hub admin, logged in at the hub's pages."""
    return hub.admin_pages()


def sign_up(hub: Hub, name: str, link: str = "/hub/signup") -> Page:
    return PageSession(hub.url).sign_up(name, PASSWORD, link)


def fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def test_a_name_added_to_a_workspace_cannot_be_claimed_by_signup_without_its_invite(hub, make_slice):
    name = fresh("frank")
    make_slice(members=(name,))

    # Issue 45: the name is reserved for the invite; a signup without it creates nothing.
    signed_up = sign_up(hub, name)
    assert signed_up.status == 403
    assert signed_up.alert.startswith(f"The user name {name} is reserved")
    refused = PageSession(hub.url).log_in(name, PASSWORD)
    assert refused.status_code == 403
    assert "Invalid username or password." in html.unescape(refused.text)

    assert sign_up(hub, name, link=hub.invite_link(name)).alert == "The signup was successful! You can now log in."
    assert logs_in(hub, name)


def test_a_signup_with_a_valid_invite_logs_in_at_once(hub, make_slice, admin_pages):
    name = fresh("grace")
    make_slice(members=(name,))
    link = invite(admin_pages, name.upper())  # the invite is for the normalised name
    assert "?invite=" in link and link.startswith(f"{hub.url}/hub/signup")

    browser = PageSession(hub.url)
    shown = browser.get(link)
    assert shown.status == 200
    assert f"This invitation lets you sign up as {name} until" in shown.alert

    # A password the hub refuses creates nothing and leaves the invite unused.
    too_short = browser.sign_up(name, "short", link)
    assert too_short.alert.startswith("Something went wrong!") and "at least 8 characters" in too_short.alert
    assert not logs_in(hub, name, "short")

    signed_up = browser.sign_up(name.title(), PASSWORD, link)
    assert signed_up.alert == "The signup was successful! You can now log in."
    assert logs_in(hub, name)


def test_an_invite_for_one_name_does_not_work_for_another(hub, admin_pages):
    invited, other = fresh("heidi"), fresh("ivan")
    link = invite(admin_pages, invited)

    refused = sign_up(hub, other, link=link)
    assert refused.status == 400
    assert refused.alert == f"This invitation is for the user name {invited}, not {other}. Sign up as {invited}."
    assert not logs_in(hub, other)
    # Nothing was created, and the invite still works for its name.
    assert sign_up(hub, other).alert == "Your information has been sent to the admin."
    assert sign_up(hub, invited, link=link).alert == "The signup was successful! You can now log in."


def test_a_used_invite_is_refused_saying_so(hub, admin_pages):
    name = fresh("judy")
    link = invite(admin_pages, name)
    assert sign_up(hub, name, link=link).alert == "The signup was successful! You can now log in."

    for attempt in (PageSession(hub.url).get(link), sign_up(hub, fresh("mallory"), link=link)):
        assert attempt.status == 400
        assert attempt.alert.startswith(f"This invitation was used already, to sign up {name} on ")


def test_an_unknown_invite_and_a_replaced_one_are_refused(hub, admin_pages):
    name = fresh("ken")
    first = invite(admin_pages, name)
    second = invite(admin_pages, name)  # replaces the first
    for link in (first, f"{hub.url}/hub/signup?invite=not-a-token"):
        refused = sign_up(hub, name, link=link)
        assert refused.status == 400
        assert refused.alert.startswith("This invitation link is not valid")
    assert not logs_in(hub, name)
    assert sign_up(hub, name, link=second).alert == "The signup was successful! You can now log in."


def test_the_invite_page_refuses_bad_names_and_names_that_signed_up(hub, admin_pages):
    for name, want in (("a b", "is not a user name the hub accepts"), ("admin", "admin has signed up already")):
        response = admin_pages.submit("/hub/invite", username=name)
        assert response.status_code == 400
        assert want in Page(response.status_code, response.text).alert


def test_only_admins_may_make_invites(hub, admin_pages):
    name = fresh("lou")
    sign_up(hub, name, link=invite(admin_pages, name))
    lou = PageSession(hub.url)
    assert lou.log_in(name, PASSWORD).status_code == 302
    assert lou.session.get(f"{hub.url}/hub/invite", timeout=30).status_code == 403
    assert requests.get(f"{hub.url}/hub/invite", timeout=30, allow_redirects=False).status_code == 403


@pytest.fixture(scope="module")
def short_lived_hub(tmp_path_factory) -> Iterator[Hub]:
    """A hub whose invites expire after 2 seconds (c.EGSAuthenticator.invite_lifetime)."""
    data_dir = tmp_path_factory.mktemp("short-invites")
    config = data_dir / "config.py"
    config.write_text(
        f"load_subconfig({os.path.join(HERE, 'hub_test_config.py')!r})\nc.EGSAuthenticator.invite_lifetime = 2\n"
    )
    running = start_hub(str(data_dir), f"sqlite:///{data_dir}/egs.sqlite", free_port(), config=str(config))
    yield running
    stop_hub(running)


def test_an_expired_invite_is_refused_saying_so(short_lived_hub):
    hub = short_lived_hub
    name = fresh("mia")
    link = hub.invite_link(name)
    time.sleep(2.5)
    for attempt in (PageSession(hub.url).get(link), sign_up(hub, name, link=link)):
        assert attempt.status == 400
        assert re.fullmatch(
            r"This invitation expired on \d{4}-\d\d-\d\d \d\d:\d\d UTC\. Ask an admin for a new link\.", attempt.alert
        )
    assert not logs_in(hub, name)
