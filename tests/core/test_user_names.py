"""User names normalised as the hub's default Authenticator.normalize_username does, or refused naming the field."""

from __future__ import annotations

import pytest

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.user_names import normalize_user_name

CASES = {
    # typed -> the hub user's name, or None when refused
    "lower case stays": ("alice", "alice"),
    "capitals are lowered": ("Bob", "bob"),
    "non-ASCII capitals are lowered": ("ÉLODIE", "élodie"),
    "e-mail style": ("Ann.Lee@Example.org", "ann.lee@example.org"),
    "digits, dashes and underscores": ("u-1_2", "u-1_2"),
    "255 characters": ("a" * 255, "a" * 255),
    "256 characters": ("a" * 256, None),
    "empty": ("", None),
    "a slash": ("a/b", None),
    "a comma (NativeAuthenticator)": ("a,b", None),
    "a space (NativeAuthenticator)": ("a b", None),
    "a space at the end (JupyterHub)": ("ab ", None),
    "only dots (JupyterHub)": ("..", None),
    "dots and more": ("a..b", "a..b"),
    "a percent sign": ("a%2Fb", None),
    "a question mark": ("a?b", None),
    "a control character": ("a\x07b", None),
    "a NUL": ("a\x00b", None),
    "a lone surrogate": ("a\ud800", None),
    "not a string": (42, None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_normalize_user_name(case):
    typed, want = case
    if want is not None:
        assert normalize_user_name(typed, "user") == want
        return
    with pytest.raises(InvalidRequest) as refused:
        normalize_user_name(typed, "members")
    assert refused.value.field == "members"
    assert "JupyterHub user name" in str(refused.value) or "not valid Unicode" in str(refused.value)


def test_a_normalised_name_normalises_to_itself():
    for _, want in CASES.values():
        if want is not None:
            assert normalize_user_name(want, "user") == want
