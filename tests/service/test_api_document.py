"""The API document only grows (issue 47): what the recorded document of REST API v1 says is still
said, the same, by the one the service serves; what is new may be added.

``recorded/api_v1.json`` is the document as it was when recorded. Operations, parameters, bodies,
answers, statuses, schemas and their fields may be added; nothing there may go or change, because
clients generated from it (the Python client, the labextension's types, users' scripts) rely on it.
After adding to the API, record the document again so that the additions are kept too:
``python -m tests.service.test_api_document``.
"""

from __future__ import annotations

import json
import pathlib

from egs_hub.service.app import api_document

RECORDED = pathlib.Path(__file__).with_name("recorded") / "api_v1.json"
PREFIX = "/services/egs/api/v1/"
VERSION = "recorded"  # info.version is the package's, which releases change


def served() -> dict:
    return api_document(PREFIX, VERSION)


def changes(was: object, now: object, where: str = "") -> list[str]:
    """What of ``was`` is not in ``now`` as it was, by JSON pointer: an object may gain members (in a
    list too, which keeps its length: an answer's ``anyOf`` member may gain an ``enum``), anything else
    must be equal."""
    if isinstance(was, dict) and isinstance(now, dict):
        found = []
        for key, value in was.items():
            at = f"{where}/{key.replace('~', '~0').replace('/', '~1')}"
            found += [f"{at}: gone"] if key not in now else changes(value, now[key], at)
        return found
    if isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
        return [
            change for i, (a, b) in enumerate(zip(was, now, strict=True)) for change in changes(a, b, f"{where}/{i}")
        ]
    return [] if was == now else [f"{where or '/'}: was {json.dumps(was)[:200]}, is {json.dumps(now)[:200]}"]


def test_the_served_document_keeps_all_the_recorded_one_says():
    recorded = json.loads(RECORDED.read_text())
    changed = changes(recorded, served())
    assert not changed, "the API document lost or changed what clients rely on:\n" + "\n".join(changed)


def test_a_change_is_found_and_an_addition_is_not():
    recorded = {"paths": {"/gprs": {"get": {"responses": {"200": {}}}}}, "required": ["a"], "anyOf": [{}, 1]}
    grown = {
        "paths": {"/gprs": {"get": {"responses": {"200": {}, "404": {}}}, "post": {}}},
        "required": ["a"],
        "anyOf": [{"enum": ["x"]}, 1],
    }
    assert changes(recorded, grown) == []
    assert changes(recorded, {"paths": {}, "required": ["a", "b"], "anyOf": [{}, 2]}) == [
        "/paths/~1gprs: gone",
        '/required: was ["a"], is ["a", "b"]',
        "/anyOf/1: was 1, is 2",
    ]


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(served(), indent=1, sort_keys=True) + "\n")
    print(f"recorded {RECORDED}")
