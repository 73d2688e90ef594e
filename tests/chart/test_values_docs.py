"""values.schema.json describes every value of ours, and docs/values.md is the table made from it."""

from __future__ import annotations

import importlib.util
import json

import yaml

from .conftest import CHART, ROOT


def load_values_table():
    spec = importlib.util.spec_from_file_location("values_table", ROOT / "charts" / "values_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leaves(schema: dict, path: str = ""):
    for name, sub in (schema.get("properties") or {}).items():
        key = f"{path}.{name}" if path else name
        if sub.get("properties") and key != "jupyterhub":
            yield from leaves(sub, key)
        else:
            yield key, sub


def test_every_value_of_ours_is_described():
    schema = json.loads((CHART / "values.schema.json").read_text())
    undescribed = [key for key, sub in leaves(schema) if not sub.get("description")]
    assert not undescribed


def test_the_values_reference_is_up_to_date():
    table = load_values_table()
    assert (ROOT / "docs" / "values.md").read_text() == table.render(), "run: python charts/values_table.py"
    assert table.main(["--check"]) == 0


def test_the_table_has_a_row_per_value_with_its_default():
    table = load_values_table()
    schema = {
        "properties": {
            "egs": {
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "description": "HTTP | port."},
                    "enabled": {"type": "boolean", "description": "Switch."},
                    "kind": {"type": "string", "enum": ["a", "b"], "description": "Which."},
                },
            },
            "jupyterhub": {"type": "object", "description": "Z2JH.", "properties": {"hub": {"type": "object"}}},
        }
    }
    values = yaml.safe_load("egs: {port: 8080, enabled: false, kind: a}\njupyterhub: {hub: {}}\n")
    rows = table.values_table(schema, values).splitlines()[-4:]
    assert rows == [
        "| `egs.port` | integer | `8080` | HTTP \\| port. |",
        "| `egs.enabled` | boolean | `false` | Switch. |",
        "| `egs.kind` | string (`a`, `b`) | `a` | Which. |",
        '| `jupyterhub` | object | `{"hub": {}}` | Z2JH. |',
    ]
