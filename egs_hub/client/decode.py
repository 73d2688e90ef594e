"""JSON answers of the API turned into the client's models.

Vocabulary: *decoding* builds a model (a frozen dataclass of models.py) from a
JSON object by the model's type hints: ``datetime`` fields from ISO-8601 text,
``timedelta`` fields from seconds, nested models, tuples of either. A field's
``key`` metadata names its JSON key where the two differ. Every model keeps the
object it was decoded from in ``raw``, so fields newer than this client are
still there.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

Model = TypeVar("Model")


def decode(cls: type[Model], data: Mapping[str, Any]) -> Model:
    """The ``cls`` that the JSON object ``data`` describes; missing keys are None."""
    hints = _hints(cls)
    values = {
        f.name: _convert(hints[f.name], data.get(f.metadata.get("key", f.name))) for f in fields(cls) if f.name != "raw"
    }
    return cls(**values, raw=dict(data))


def decode_list(cls: type[Model], items: list[Mapping[str, Any]]) -> list[Model]:
    return [decode(cls, item) for item in items]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_convert(item, v) for v in value)
    if hint is datetime:
        return datetime.fromisoformat(value)
    if hint is timedelta:
        return timedelta(seconds=value)
    if is_dataclass(hint):
        return decode(hint, value)
    return value
