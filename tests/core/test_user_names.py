"""User names folded (NFKC, lower case) as the hub's authenticator folds them, or refused naming the field."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from egs_hub.core.errors import InvalidRequest
from egs_hub.core.user_names import (
    USER_NAME_MAX,
    fold_user_name,
    hidden_character,
    normalize_user_name,
    user_name_problem,
)

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
    "NFD is NFC": ("cafe\u0301", "caf\u00e9"),
    "NFKC: the Kelvin sign is k": ("\u212aate", "kate"),
    "NFKC: a ligature is its letters": ("\ufb01ona", "fiona"),
    "NFKC: full-width letters": ("\uff21\uff4e\uff4e", "ann"),
    "a capital I with a dot above": ("\u0130lker", "i\u0307lker"),
    "a no-break space becomes a space": ("a\u00a0b", None),
    "an ideographic space becomes a space": ("a\u3000b", None),
    "255 characters once folded": ("\ufb01" * 128, None),
    "right-to-left override (Cf)": ("eve\u202ebob", None),
    "left-to-right mark (Cf)": ("eve\u200e", None),
    "zero width space (Cf)": ("e\u200bve", None),
    "zero width joiner (Cf)": ("e\u200dve", None),
    "soft hyphen (Cf)": ("e\u00adve", None),
    "byte order mark (Cf)": ("\ufeffeve", None),
    "a tag character (Cf)": ("eve\U000e0041", None),
    "a C1 control character": ("eve\x85", None),
    "a private-use character": ("eve\ue000", None),
    "an unassigned code point": ("eve\u0378", None),
    "a combining grapheme joiner": ("e\u034fve", None),
    "a variation selector": ("eve\ufe0f", None),
    "a Hangul filler": ("\u3164", None),
    "a blank Braille pattern": ("eve\u2800", None),
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


HIDDEN_NAMED = {
    "\u202e": "U+202E RIGHT-TO-LEFT OVERRIDE",
    "\u200b": "U+200B ZERO WIDTH SPACE",
    "\u2066": "U+2066 LEFT-TO-RIGHT ISOLATE",
    "\u0378": "U+0378 (Cn, unnamed)",
}


@pytest.mark.parametrize("character", HIDDEN_NAMED, ids=HIDDEN_NAMED.values())
def test_a_hidden_character_is_named_in_the_refusal(character):
    with pytest.raises(InvalidRequest) as refused:
        normalize_user_name(f"Eve{character}Bob", "user")
    assert refused.value.field == "user"
    assert f"it holds {HIDDEN_NAMED[character]}, an invisible or text-direction character" in str(refused.value)


# Any text, weighted towards what folds: letters with marks, compatibility forms, format characters.
TYPED = st.text(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from("aAeE\u0301\u0307\u0323\u0130\u212a\ufb01\uff21\u00e9\u202e\u200b\u1e9e\u01c5"),
    ),
    max_size=20,
)


@given(TYPED)
@example("\u0130\u0323")  # lower-casing adds a combining dot that NFKC then reorders
def test_folding_is_idempotent_and_a_valid_name_is_its_own_fold(typed):
    folded = fold_user_name(typed)
    if user_name_problem(typed) is None:
        assert fold_user_name(folded) == folded
        assert normalize_user_name(typed, "user") == folded == normalize_user_name(folded, "user")
        assert unicodedata.is_normalized("NFKC", folded) and folded == folded.lower()
        assert hidden_character(folded) is None and 1 <= len(folded) <= USER_NAME_MAX
    else:
        with pytest.raises(InvalidRequest):
            normalize_user_name(typed, "user")


@given(TYPED)
def test_every_normal_form_of_a_name_is_the_same_name(typed):
    forms = {unicodedata.normalize(form, typed) for form in ("NFC", "NFD", "NFKC", "NFKD")}
    assert len({fold_user_name(form) for form in forms}) == 1
    assert len({user_name_problem(form) is None for form in forms}) == 1


@given(TYPED)
def test_no_accepted_name_holds_a_format_character(typed):
    if user_name_problem(typed) is None:
        assert not any(unicodedata.category(c) in {"Cf", "Cc", "Co", "Cn"} for c in typed + fold_user_name(typed))
