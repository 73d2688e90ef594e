"""User names as JupyterHub keeps them.

Vocabulary: a *user name* is a hub user's name. What was typed is *folded* into it: NFKC-normalised
and lower-cased, as the hub's ``Authenticator.normalize_username`` lower-cases (jupyterhub/auth.py),
so that "café" typed in NFC or NFD, or "Kelvin" typed with U+212A KELVIN SIGN, is one user. A folded
name is *valid* when the hub and NativeAuthenticator (the embedded login) accept it and it holds no
*hidden* character: a format character (Unicode category Cf: text-direction controls such as U+202E,
zero-width ones such as U+200B), another control, a private-use, surrogate or unassigned code point,
or one of the other characters that show as nothing or as blank space; any of these lets one name pass
for another (issue 45).

The service (members, project admins) and the hub's authenticator (signup, login, invites:
egs_hub/authenticator.py) both fold and check names here, so they always agree: ``PUT
/slices/team-a/members/Bob`` adds the hub user ``bob`` that Bob logs in as, and never a hub user
``Bob`` that nobody can log in as (issue 25).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .decoding import check_unicode
from .errors import InvalidRequest

USER_NAME_MAX = 255  # JupyterHub's users.name column
TYPED_MAX = 4 * USER_NAME_MAX  # longer typed text is refused before folding (NFKC may lengthen it 18-fold)
# JupyterHub refuses '/', names of dots only and spaces at either end; NativeAuthenticator ',' and any
# space; '?', '#' and '%' would not survive a URL path, control characters not a log line.
USER_NAME_RE = re.compile(rf"(?!\.+$)[^/\s?#%,\x00-\x1f\x7f-\x9f]{{1,{USER_NAME_MAX}}}")
USER_NAME_RULES = (
    f"1 to {USER_NAME_MAX} characters, not only dots, without spaces, control characters or any of / , ? # %"
)
# Categories of hidden characters: format, control, private use, surrogate, unassigned.
HIDDEN_CATEGORIES = {"Cf", "Cc", "Co", "Cs", "Cn"}
# Characters of other categories that show as nothing or as a blank: the Default_Ignorable_Code_Point
# ones (Unicode's DerivedCoreProperties.txt) that are not Cf or Cn, and the blank Braille pattern.
HIDDEN_CHARACTERS = frozenset(
    "\u034f"  # COMBINING GRAPHEME JOINER
    "\u115f\u1160\u3164\uffa0"  # the Hangul fillers
    "\u17b4\u17b5"  # KHMER VOWEL INHERENT AQ, AA
    "\u180b\u180c\u180d\u180f"  # the Mongolian free variation selectors
    "\u2800"  # BRAILLE PATTERN BLANK
) | frozenset(chr(c) for c in (*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)))  # variation selectors
FOLD_ROUNDS = 3  # lower-casing after NFKC can leave text that NFKC changes again (a round more settles it)


def fold_user_name(text: str) -> str:
    """``text`` as the hub's user name: NFKC-normalised and lower-cased until it no longer changes
    (at most FOLD_ROUNDS rounds; what still changes after them is no valid name). Never raises: the
    hub calls it on anything typed."""
    name = unicodedata.normalize("NFKC", text)
    for _ in range(FOLD_ROUNDS):
        folded = unicodedata.normalize("NFKC", name.lower())
        if folded == name:
            break
        name = folded
    return name


def describe_character(character: str) -> str:
    """``character`` as people look it up: "U+202E RIGHT-TO-LEFT OVERRIDE"."""
    name = unicodedata.name(character, "") or f"({unicodedata.category(character)}, unnamed)"
    return f"U+{ord(character):04X} {name}"


def hidden_character(text: str) -> str | None:
    """The first hidden character of ``text`` (see the module's docstring), None when it has none."""
    for character in text:
        if character in HIDDEN_CHARACTERS or unicodedata.category(character) in HIDDEN_CATEGORIES:
            return character
    return None


def user_name_problem(typed: str) -> str | None:
    """Why ``typed``, folded, is no valid user name (a sentence part that follows "... is not a valid
    user name: "); None when it is one. The character named is the one typed where it was typed."""
    if len(typed) > TYPED_MAX:
        return f"it is longer than {USER_NAME_MAX} characters"
    name = fold_user_name(typed)
    hidden = hidden_character(typed) or hidden_character(name)
    if hidden is not None:
        return (
            f"it holds {describe_character(hidden)}, an invisible or text-direction character that lets one "
            "name pass for another; type the name without it"
        )
    if fold_user_name(name) != name:
        return "it does not keep one form under Unicode normalisation (NFKC) and lower-casing"
    if not USER_NAME_RE.fullmatch(name):
        return f"give {USER_NAME_RULES}; not {typed[:80]!r}"
    return None


def normalize_user_name(value: Any, field: str) -> str:
    """``value`` folded into the hub's user name; InvalidRequest naming ``field`` when it is not a valid one."""
    if not isinstance(value, str):
        raise InvalidRequest(field, f"{field} must be a JupyterHub user name (a string)")
    problem = user_name_problem(check_unicode(value, field))
    if problem is not None:
        raise InvalidRequest(field, f"{field} must be a JupyterHub user name: {problem}")
    return fold_user_name(value)
