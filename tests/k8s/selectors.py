"""Label and field selectors as the Kubernetes API server reads them.

Vocabulary: a *label selector* is the query string of ``?labelSelector=``
(``app=web,tier!=db,env in (a,b),!legacy,gpu``) or the structured
``LabelSelector`` of an object (``matchLabels`` / ``matchExpressions``, as in a
PodDisruptionBudget); a *field selector* (``?fieldSelector=``) compares dotted
object paths (``spec.nodeName=n1,metadata.name!=x``) with ``=``, ``==``, ``!=``.

Emulates the grammar of k8s.io/apimachinery/pkg/labels and /fields, and any
field path (a real server accepts only a few per resource; this accepts all).
Does not emulate: the numeric ``gt`` / ``lt`` operators, or escaping in field values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Predicate = Callable[[Mapping], bool]

_SET_TERM = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")


class SelectorError(ValueError):
    """A selector that does not parse; the message quotes the bad term."""


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses: ``a in (x,y),b`` has two terms."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Predicate:
    equality = _EQUALITY_TERM.match(term)
    if equality:
        key, op, value = equality.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    found = _SET_TERM.match(term)
    if not found:
        raise SelectorError(f"unable to parse label selector term {term!r}")
    negated, key, op, values = found.groups()
    if op is None:
        return (lambda labels: key not in labels) if negated else (lambda labels: key in labels)
    if negated:
        raise SelectorError(f"label selector term {term!r} mixes '!' with {op!r}")
    allowed = {v.strip() for v in values.split(",") if v.strip()}
    if op == "in":
        return lambda labels: labels.get(key) in allowed
    return lambda labels: labels.get(key) not in allowed


def label_selector(selector: str | None) -> Predicate:
    """A predicate on a labels mapping; an empty or absent selector matches everything."""
    terms = [_label_term(t) for t in _split_terms(selector or "")]
    return lambda labels: all(term(labels) for term in terms)


def structured_label_selector(selector: Mapping | None) -> Predicate:
    """A predicate from a ``LabelSelector`` object; an empty one matches everything (as in a PDB)."""
    selector = selector or {}
    terms: list[Predicate] = [
        (lambda labels, k=k, v=v: labels.get(k) == v) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression["key"], expression["operator"], set(expression.get("values") or [])
        checks: dict[str, Predicate] = {
            "In": lambda labels, key=key, values=values: labels.get(key) in values,
            "NotIn": lambda labels, key=key, values=values: labels.get(key) not in values,
            "Exists": lambda labels, key=key: key in labels,
            "DoesNotExist": lambda labels, key=key: key not in labels,
        }
        if op not in checks:
            raise SelectorError(f"unknown matchExpressions operator {op!r}")
        terms.append(checks[op])
    return lambda labels: all(term(labels) for term in terms)


def _field_value(obj: Mapping, path: str) -> str:
    """The value at a dotted path as the server compares it: missing is '', booleans lower-case."""
    value: object = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_selector(selector: str | None) -> Predicate:
    """A predicate on a whole object; an empty or absent selector matches everything."""
    terms: list[Predicate] = []
    for term in _split_terms(selector or ""):
        found = _EQUALITY_TERM.match(term)
        if not found:
            raise SelectorError(f"unable to parse field selector term {term!r}")
        path, op, value = found.groups()
        if op == "!=":
            terms.append(lambda obj, path=path, value=value: _field_value(obj, path) != value)
        else:
            terms.append(lambda obj, path=path, value=value: _field_value(obj, path) == value)
    return lambda obj: all(term(obj) for term in terms)
