"""RBAC for ServiceAccount tokens in the emulator, as the API server's RBAC authorizer reads it.

Vocabulary: a request's *attributes* are its verb (get, list, watch, create,
update, patch, delete, and RBAC's bind and escalate), API group, resource
(``pods``, ``serviceaccounts/token`` with a subresource), namespace and name. A
ServiceAccount is allowed when a binding names it (kind ServiceAccount, or the
groups ``system:serviceaccounts`` and ``system:serviceaccounts:<namespace>``)
and its role has a rule matching every attribute ('*' matches any): a
ClusterRoleBinding's ClusterRole anywhere (cluster-scoped requests and requests
across all namespaces included), a RoleBinding's Role or ClusterRole in the
RoleBinding's namespace only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

RBAC = "rbac.authorization.k8s.io"
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


@dataclass(frozen=True)
class Policy:
    """The RBAC objects that decide: ClusterRoles and ClusterRoleBindings, and the request namespace's Roles and
    RoleBindings."""

    cluster_roles: Iterable[Mapping] = ()
    cluster_bindings: Iterable[Mapping] = ()
    roles: Iterable[Mapping] = ()
    bindings: Iterable[Mapping] = ()

    def rules_of(self, ref: Mapping) -> list[Mapping]:
        pool = self.roles if ref.get("kind") == "Role" else self.cluster_roles
        return next((r.get("rules") or [] for r in pool if r["metadata"]["name"] == ref.get("name")), [])


def allowed(account: tuple[str, str], attrs: Attributes, policy: Policy) -> bool:
    """Whether the ServiceAccount (namespace, name) may make the request."""
    bindings = [*policy.cluster_bindings, *(policy.bindings if attrs.namespace is not None else ())]
    for binding in bindings:
        if not binds(binding, *account):
            continue
        if any(rule_allows(rule, attrs) for rule in policy.rules_of(binding.get("roleRef") or {})):
            return True
    return False


def of_objects(objects: Iterable[Mapping], namespace: str | None) -> Policy:
    """The Policy for a request in ``namespace`` (None: cluster-scoped) among these objects (manifests)."""
    by_kind: dict[str, list[Mapping]] = {}
    for obj in objects:
        by_kind.setdefault(obj.get("kind", ""), []).append(obj)

    def here(kind: str) -> list[Mapping]:
        return [
            o for o in by_kind.get(kind, []) if namespace is not None and o["metadata"].get("namespace") == namespace
        ]

    return Policy(
        by_kind.get("ClusterRole", []), by_kind.get("ClusterRoleBinding", []), here("Role"), here("RoleBinding")
    )


def _holds(account: tuple[str, str], rules: Iterable[Mapping], namespace: str | None, policy: Policy) -> bool:
    """Whether the account may do everything ``rules`` grant (RBAC's check that a writer escalates nothing)."""
    for rule in rules:
        for group in rule.get("apiGroups") or []:
            for res in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    for name in rule.get("resourceNames") or [None]:
                        if not allowed(account, Attributes(verb, group, res, namespace, name), policy):
                            return False
    return True


def escalation_refused(account: tuple[str, str], attrs: Attributes, body: Mapping, policy: Policy) -> str | None:
    """Why RBAC's privilege-escalation prevention refuses this write of a Role or RoleBinding, or None.

    A Role (or ClusterRole) may be written with ``escalate`` on it or by one who holds all its rules; a
    binding with ``bind`` on the role it names or by one who holds all that role's rules."""
    if attrs.verb not in ("create", "update") or attrs.group != RBAC:
        return None
    if attrs.resource in ("roles", "clusterroles"):
        name = (body.get("metadata") or {}).get("name")
        if allowed(account, Attributes("escalate", RBAC, attrs.resource, attrs.namespace, name), policy):
            return None
        if _holds(account, body.get("rules") or [], attrs.namespace, policy):
            return None
        return f"attempting to grant RBAC permissions not currently held (no escalate on {attrs.resource})"
    if attrs.resource in ("rolebindings", "clusterrolebindings"):
        ref = body.get("roleRef") or {}
        kind = "roles" if ref.get("kind") == "Role" else "clusterroles"
        if allowed(account, Attributes("bind", RBAC, kind, attrs.namespace, ref.get("name")), policy):
            return None
        if _holds(account, policy.rules_of(ref), attrs.namespace, policy) and policy.rules_of(ref):
            return None
        return f"cannot bind {ref.get('kind')} {ref.get('name')}: no bind on it, and not holding what it grants"
    return None
