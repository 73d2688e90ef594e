"""System account names (core/system_names.py): every hub name gets a valid Linux user name of its own,
and no hub user can choose a name whose account is another user's."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from egs_hub.core.system_names import MAX_LENGTH, system_username

# What useradd accepts on Debian without --badname (NAME_REGEX's default), within Linux's length.
LINUX_NAME = re.compile(r"[a-z_][a-z0-9_-]*")
HASHED = re.compile(r"egs-[a-z0-9_-]{0,10}--[0-9a-f]{16}")


@dataclass(frozen=True)
class Case:
    hub_name: str
    want: str | None = None  # the exact account, where it is readable; None: only the rules hold
    want_prefix: str | None = None  # the readable start of a hashed account


CASES = {
    "a plain name is kept": Case("alice", want="egs-alice"),
    "digits, underscores and single hyphens are plain": Case("bob_2-x", want="egs-bob_2-x"),
    "the longest plain name fits": Case("a" * 28, want="egs-" + "a" * 28),
    "one more character is hashed": Case("a" * 29, want_prefix="egs-aaaaaaaaaa--"),
    "capitals are hashed": Case("Alice", want_prefix="egs-alice--"),
    "a dot is hashed": Case("a.b", want_prefix="egs-a-b--"),
    "an e-mail address is hashed": Case("carol@example.org", want_prefix="egs-carol-exam--"),
    "unicode keeps its ASCII letters": Case("ünïcödé", want_prefix="egs-unicode--"),
    "a name of no ASCII at all is the hash": Case("用户", want_prefix="egs---"),
    "a double hyphen is hashed": Case("a--b", want_prefix="egs-a-b--"),
    "a leading hyphen is hashed": Case("-x", want_prefix="egs-x--"),
    "root is not root": Case("root", want="egs-root"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_every_hub_name_gets_a_valid_linux_user_name(case: Case):
    name = system_username(case.hub_name)
    assert name.isascii() and len(name) <= MAX_LENGTH and LINUX_NAME.fullmatch(name), name
    assert name.startswith("egs-") and system_username(case.hub_name) == name  # deterministic
    if case.want is not None:
        assert name == case.want
    if case.want_prefix is not None:
        assert name.startswith(case.want_prefix) and HASHED.fullmatch(name), name


def test_no_chosen_name_takes_another_users_account():
    victims = ["Alice", "alice", "a.b", "a-b", "ünï", "uni", "a" * 40, "a" * 39 + "b", "用户", "用户2"]
    accounts = {system_username(name): name for name in victims}
    assert len(accounts) == len(victims), accounts
    for victim in victims:
        # a hub user who names themself after the victim's account (without its prefix), or its hash part
        account = system_username(victim)
        for chosen in (account.removeprefix("egs-"), account, account.split("--")[-1]):
            if chosen != victim:
                assert system_username(chosen) != account, (chosen, victim)
