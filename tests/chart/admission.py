"""A ValidatingAdmissionPolicy's rendered CEL run as the API server runs it (cel-python).

``bound_policy(docs, name)`` is the rendered policy, checked to deny through its binding and to fail
closed.

``verdict(policy, request)`` evaluates the policy's matchConditions (a request none
of them match is not the policy's: admitted), then its variables in order, then each
validation; ``request`` has what the API server gives the expressions: ``request``
(operation, userInfo, resource), ``object``, ``oldObject`` and ``namespaceObject``
(None where the API server gives null).
"""

from __future__ import annotations

from collections.abc import Mapping

import celpy

from .conftest import of_kind


def bound_policy(docs: list[dict], name: str) -> dict:
    binding = of_kind(docs, "ValidatingAdmissionPolicyBinding", name)
    assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}
    found = of_kind(docs, "ValidatingAdmissionPolicy", name)
    assert found["spec"]["failurePolicy"] == "Fail"
    return found


def _run(env: celpy.Environment, expression: str, activation: Mapping):
    return env.program(env.compile(expression)).evaluate(dict(activation))


def verdict(policy: Mapping, request: Mapping) -> str | None:
    """None when the policy admits the request, else the message of the first validation that refuses it."""
    env = celpy.Environment()
    activation = {key: celpy.json_to_cel(value) for key, value in request.items()}
    for condition in policy["spec"].get("matchConditions") or []:
        if not _run(env, condition["expression"], activation):
            return None
    variables: dict = {}
    for variable in policy["spec"].get("variables") or []:
        variables[variable["name"]] = _run(env, variable["expression"], {**activation, "variables": variables})
    activation["variables"] = celpy.celtypes.MapType(variables)
    for validation in policy["spec"]["validations"]:
        if not _run(env, validation["expression"], activation):
            if "messageExpression" in validation:
                return str(_run(env, validation["messageExpression"], activation))
            return validation["message"]
    return None
