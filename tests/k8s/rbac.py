"""RBAC for ServiceAccount tokens in the emulator: Roles and RoleBindings only, as the API server reads them.

Vocabulary: a request's *attributes* are its verb (get, list, watch, create,
update, patch, delete), API group, resource (``pods``, ``serviceaccounts/token``
with a subresource), namespace and name. A ServiceAccount is allowed when a
RoleBinding in the request's namespace names it (kind ServiceAccount, or the
groups ``system:serviceaccounts`` and ``system:serviceaccounts:<namespace>``)
and binds a Role whose rule matches every attribute ('*' matches any).
ClusterRoles and ClusterRoleBindings are not emulated: cluster-scoped requests
and requests across all namespaces are denied, as they would be without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None


def verb_of(method: str, name: str | None, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    return _VERBS[method]


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values)


def rule_allows(rule: Mapping, attrs: Attributes) -> bool:
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("verbs") or [], attrs.verb)
        and _matches(rule.get("apiGroups") or [], attrs.group)
        and _matches(rule.get("resources") or [], attrs.resource)
        and (not names or attrs.name in names)
    )


def binds(binding: Mapping, namespace: str, account: str) -> bool:
    """Whether the RoleBinding names the ServiceAccount ``namespace/account``."""
    for subject in binding.get("subjects") or []:
        if subject.get("kind") == "ServiceAccount":
            if (subject.get("namespace"), subject.get("name")) == (namespace, account):
                return True
        elif subject.get("kind") == "Group" and subject.get("name") in (
            "system:serviceaccounts",
            f"system:serviceaccounts:{namespace}",
        ):
            return True
    return False


def allowed(account: tuple[str, str], attrs: Attributes, roles: Iterable[Mapping], bindings: Iterable[Mapping]) -> bool:
    """Whether the ServiceAccount (namespace, name) may make the request, given the request namespace's
    Roles and RoleBindings."""
    if attrs.namespace is None:
        return False
    rules_of = {r["metadata"]["name"]: r.get("rules") or [] for r in roles}
    for binding in bindings:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") != "Role" or not binds(binding, *account):
            continue
        if any(rule_allows(rule, attrs) for rule in rules_of.get(ref.get("name"), [])):
            return True
    return False
