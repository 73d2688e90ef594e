"""User names as JupyterHub keeps them.

Vocabulary: a *user name* is a hub user's name: what the hub's default
``Authenticator.normalize_username`` makes of what was typed (lower case;
jupyterhub/auth.py), and what its ``validate_username`` and NativeAuthenticator's
(the embedded login) accept. The service normalises every user name it is given
the same way before it uses it, so that ``PUT /slices/team-a/members/Bob`` adds the
hub user ``bob`` that Bob logs in as, and never creates a hub user ``Bob`` that
nobody can log in as (issue 25).
"""

from __future__ import annotations

import re
from typing import Any

from .decoding import check_unicode
from .errors import InvalidRequest

USER_NAME_MAX = 255  # JupyterHub's users.name column
# JupyterHub refuses '/', names of dots only and spaces at either end; NativeAuthenticator ',' and any
# space; '?', '#' and '%' would not survive a URL path, control characters not a log line.
USER_NAME_RE = re.compile(rf"(?!\.+$)[^/\s?#%,\x00-\x1f\x7f]{{1,{USER_NAME_MAX}}}")
USER_NAME_RULES = (
    f"1 to {USER_NAME_MAX} characters, not only dots, without spaces, control characters or any of / , ? # %"
)


def normalize_user_name(value: Any, field: str) -> str:
    """``value`` lower-cased as the hub normalises user names; InvalidRequest naming ``field`` when
    it is not a name the hub would accept."""
    if not isinstance(value, str):
        raise InvalidRequest(field, f"{field} must be a JupyterHub user name (a string)")
    name = check_unicode(value, field).lower()
    if not USER_NAME_RE.fullmatch(name):
        raise InvalidRequest(field, f"{field} must be a JupyterHub user name: {USER_NAME_RULES}; not {value[:80]!r}")
    return name
