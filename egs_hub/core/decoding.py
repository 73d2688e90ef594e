"""What callers send, turned into values or refused with InvalidRequest naming the part at fault.

Vocabulary: *text* is a str that UTF-8, SQLite and PostgreSQL can all hold: valid Unicode (no
lone surrogate, which JSON's ``"\\ud800"`` escape can smuggle in) and, in URL arguments, no NUL
character. A body's *depth* counts its nested arrays and objects: ``{"a": [1]}`` is 2 deep. An
*argument* is a path or query argument of a URL, as raw bytes once its percent-escapes are undone.

Every JSON body and every argument goes through here before anything reads it, so that no
handler meets a RecursionError or a UnicodeEncodeError (issue 25: one bad GPR must never stop
the service).
"""

from __future__ import annotations

import json
from urllib.parse import quote_from_bytes

from .errors import InvalidRequest

MAX_DEPTH = 32
NOT_UNICODE = "contains text that is not valid Unicode (a lone surrogate)"


def decode_json(body: bytes, *, max_depth: int = MAX_DEPTH) -> object:
    """The JSON value of a request body: UTF-8 (RFC 8259), at most ``max_depth`` deep, its text valid Unicode."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidRequest(
            "body", f"the request body is not valid UTF-8 (byte {e.start}); send JSON encoded as UTF-8"
        ) from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidRequest("body", too_deep("", max_depth)) from None
    except ValueError:
        raise InvalidRequest("body", "the request body is not valid JSON") from None
    check_json_value(value, max_depth=max_depth)
    return value


def check_json_value(value: object, *, max_depth: int = MAX_DEPTH, path: str = "", depth: int = 1) -> None:
    """Refuse a decoded JSON value deeper than ``max_depth`` or holding a lone surrogate.

    ``path`` names where ``value`` is, as fields are named elsewhere: object keys joined with
    dots, list items named by their list. Recursion stops at ``max_depth``, so it is bounded."""
    if isinstance(value, str):
        check_unicode(value, path or "body")
        return
    if not isinstance(value, dict | list):
        return
    if depth > max_depth:
        raise InvalidRequest(path or "body", too_deep(path, max_depth))
    if isinstance(value, list):
        for item in value:
            check_json_value(item, max_depth=max_depth, path=path, depth=depth + 1)
        return
    for key, item in value.items():
        if not is_unicode(key):
            where = f"an object in {path}" if path else "the body"
            raise InvalidRequest(path or "body", f"a field name in {where} {NOT_UNICODE}")
        check_json_value(item, max_depth=max_depth, path=f"{path}.{key}" if path else key, depth=depth + 1)


def too_deep(path: str, max_depth: int) -> str:
    where = f" (at {path})" if path else ""
    return f"the body nests deeper than {max_depth} levels{where}; send a flatter body"


def is_unicode(text: str) -> bool:
    """False when ``text`` holds a lone surrogate, which UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(text: str, field: str) -> str:
    if not is_unicode(text):
        raise InvalidRequest(field, f"{field} {NOT_UNICODE}")
    return text


def decode_argument(raw: bytes, field: str) -> str:
    """A URL argument as text: UTF-8, without NUL. ``field`` is the query argument's name, or "path"."""
    what = "the URL path" if field == "path" else field
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = quote_from_bytes(raw[:80], safe="/")
        raise InvalidRequest(
            field, f"{what} is not valid UTF-8 ({shown} is no text); percent-encode names as UTF-8"
        ) from None
    if "\x00" in text:
        raise InvalidRequest(field, f"{what} contains a NUL character (%00), which no name here may hold")
    return text
