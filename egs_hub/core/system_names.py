"""The system account names of hub users on one host (isolation ``system-users``; egs_hub/system_users.py
makes the accounts).

Vocabulary: a hub user's *system username* is ``egs-`` and then either the hub name itself, when it is
*plain* (lowercase ASCII letters, digits and underscores, in runs joined by single hyphens) and short
enough, or its *hashed* form ``<readable>--<hash>``: a readable part (the name in ASCII, lowercase,
other characters as single hyphens, cut to fit) and 16 hex digits of the SHA-256 of the name's UTF-8.
Every system username is ASCII, at most MAX_LENGTH characters (Linux's limit on a user name), starts
with a letter and is the same for the same hub name on every host and every start.

The prefix keeps members off the host's own accounts (a hub user ``root`` gets ``egs-root``). The two
forms never meet: a plain name has no double hyphen and a hashed one always has, so no hub user can
pick a name whose account is another's (``Alice`` is hashed, so it is not ``alice``'s ``egs-alice``);
two hashed names meet only when 64 bits of their hashes do (as The Littlest JupyterHub's
``generate_system_username``, but its 5-digit hash and unmarked plain names let a chosen name meet
another's).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

PREFIX = "egs-"
MAX_LENGTH = 32  # useradd refuses longer names (Linux's utmp limit)
HASH_DIGITS = 16
_PLAIN = re.compile(r"[a-z0-9_]+(?:-[a-z0-9_]+)*")
_NOT_KEPT = re.compile(r"[^a-z0-9_]+")
_READABLE = MAX_LENGTH - len(PREFIX) - len("--") - HASH_DIGITS


def system_username(hub_name: str) -> str:
    """The system account of hub user ``hub_name``: ``egs-<hub_name>`` when that is plain and fits, else
    ``egs-<readable>--<hash>`` (module docstring)."""
    if _PLAIN.fullmatch(hub_name) and len(PREFIX) + len(hub_name) <= MAX_LENGTH:
        return PREFIX + hub_name
    digest = hashlib.sha256(hub_name.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]
    ascii_name = unicodedata.normalize("NFKD", hub_name).encode("ascii", "ignore").decode().lower()
    readable = _NOT_KEPT.sub("-", ascii_name).strip("-")[:_READABLE].rstrip("-")
    return f"{PREFIX}{readable}--{digest}"
