"""Every answer the tests receive, checked against the service's own OpenAPI document.

The document is read once per service from its ``/openapi.json``; an answer whose
status the operation does not list, or whose body does not match the listed schema,
fails the test that received it, naming the operation, the status and the mismatch.
"""

from __future__ import annotations

import re
from functools import cache
from urllib.parse import urlsplit

import jsonschema
import requests


class ContractError(AssertionError):
    pass


def _pattern(template: str) -> re.Pattern:
    segments = template.strip("/").split("/")
    return re.compile("/".join("[^/]+" if s.startswith("{") else re.escape(s) for s in segments))


class Contract:
    def __init__(self, document: dict):
        self.document = document
        self.patterns = {template: _pattern(template) for template in document["paths"]}
        self.validators: dict[tuple[str, str, str], jsonschema.Draft202012Validator | None] = {}

    def template(self, path: str) -> str:
        relative = urlsplit(path).path.strip("/")
        for template, pattern in self.patterns.items():
            if pattern.fullmatch(relative):
                return template
        raise ContractError(f"{path}: no path of the OpenAPI document matches")

    def validator(self, method: str, template: str, status: int) -> jsonschema.Draft202012Validator | None:
        key = (method, template, str(status))
        if key not in self.validators:
            operation = self.document["paths"][template][method.lower()]
            response = operation["responses"].get(str(status))
            if response is None:
                raise ContractError(
                    f"{method} {template} answered {status}, which the OpenAPI document does not list "
                    f"(it lists {', '.join(sorted(operation['responses']))})"
                )
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            self.validators[key] = (
                None
                if schema is None
                else jsonschema.Draft202012Validator(
                    {**schema, "components": self.document["components"]},
                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
                )
            )
        return self.validators[key]

    def check(self, method: str, path: str, status: int, body: object) -> None:
        """Raise ContractError when the answer is not one the document describes. A path or method
        the document does not have must be answered 404 or 405 (the error shape is Client.call's)."""
        try:
            template = self.template(path)
            if method.lower() not in self.document["paths"][template]:
                raise ContractError(f"{method} {template} is not in the OpenAPI document")
        except ContractError:
            if status in (404, 405):
                return
            raise
        validator = self.validator(method, template, status)
        if validator is None:
            if body is not None:
                raise ContractError(f"{method} {template} {status}: the document lists no body, but one came")
            return
        error = jsonschema.exceptions.best_match(validator.iter_errors(body))
        if error is not None:
            where = "/".join(map(str, error.absolute_path)) or "the body"
            raise ContractError(f"{method} {template} {status}: {where}: {error.message}")


@cache
def contract(api: str) -> Contract:
    """The contract of the service whose API is at ``api`` (its document, read once)."""
    response = requests.get(api + "openapi.json", timeout=30)
    response.raise_for_status()
    return Contract(response.json())
