"""Role templates: what a slice's ServiceAccount and people may do in the slice's namespaces; plain data.

Vocabulary: a *role template* has a name, RBAC ``rules`` and ``subjects``; on a
cluster it becomes, in each of the slice's namespaces, a Role ``egs-<name>``
with those rules and a RoleBinding ``egs-<name>`` to those subjects. Subject
names may use the *placeholders* ``{slice}``, ``{service_account}`` and
``{service_account_namespace}`` (where the slice's ServiceAccount lives).

The defaults follow Kubernetes' aggregated ``edit`` and ``view`` ClusterRoles,
limited to what a namespace holds:

| template   | like | bound to                      | may                                           |
|------------|------|-------------------------------|-----------------------------------------------|
| deployment | edit | the slice's ServiceAccount    | run workloads; read quotas, never change them |
| reader     | view | the Kubernetes group          | read workloads (not Secrets), quotas, events  |
|            |      | ``egs:<slice>`` (as the       |                                               |
|            |      | cluster's OIDC login maps it) |                                               |

Neither may change Roles, RoleBindings or ResourceQuotas, so a slice cannot
raise its own GPU quota. Admins add templates (or replace these) as data of the
same form; ``parse_role_templates`` checks it and names what is wrong.

A *namespace grant* is what egs-hub itself (or the hub) may do in a slice's
namespaces and nowhere else: a ClusterRole bound to one ServiceAccount by a
RoleBinding ``egs:<cluster role>`` that egs-hub makes in each of them before
anything else, and deletes after everything else. The Helm chart grants the
service its namespaced rights this way (charts/egs-hub/templates/rbac.yaml);
the first grant is the service's own, under which the others are written.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

PLACEHOLDERS = ("slice", "service_account", "service_account_namespace")
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")
RBAC_GROUP = "rbac.authorization.k8s.io"
_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?")

READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")


@dataclass(frozen=True)
class RoleTemplate:
    name: str
    rules: tuple[Mapping, ...]
    subjects: tuple[Mapping, ...]


def _rule(groups: tuple[str, ...], resources: tuple[str, ...], verbs: tuple[str, ...]) -> Mapping:
    return MappingProxyType({"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)})


_WORKLOADS = (
    (("",), ("pods", "services", "endpoints", "persistentvolumeclaims", "configmaps", "replicationcontrollers")),
    (("apps",), ("deployments", "statefulsets", "daemonsets", "replicasets")),
    (("batch",), ("jobs", "cronjobs")),
    (("autoscaling",), ("horizontalpodautoscalers",)),
    (("networking.k8s.io",), ("ingresses", "networkpolicies")),
    (("policy",), ("poddisruptionbudgets",)),
    (("egs.io",), ("gpuprovisionrequests",)),
)
_SCALES = (
    (("",), ("replicationcontrollers/scale",)),
    (("apps",), ("deployments/scale", "statefulsets/scale", "replicasets/scale")),
)
_READ_ONLY = (
    (("",), ("pods/log", "pods/status", "events", "resourcequotas", "limitranges")),
    (("egs.io",), ("gpuprovisionrequests/status",)),
)

DEPLOYMENT = RoleTemplate(
    name="deployment",
    rules=(
        *(_rule(groups, resources, READ + WRITE) for groups, resources in _WORKLOADS),
        _rule(("",), ("secrets", "serviceaccounts"), READ + WRITE),
        *(_rule(groups, resources, ("get", "patch", "update")) for groups, resources in _SCALES),
        _rule(("",), ("pods/attach", "pods/exec", "pods/portforward", "pods/proxy"), ("create", "get")),
        _rule(("",), ("pods/eviction",), ("create",)),
        *(_rule(groups, resources, READ) for groups, resources in _READ_ONLY),
    ),
    subjects=(
        MappingProxyType(
            {"kind": "ServiceAccount", "name": "{service_account}", "namespace": "{service_account_namespace}"}
        ),
    ),
)
READER = RoleTemplate(
    name="reader",
    rules=(
        *(_rule(groups, resources, READ) for groups, resources in _WORKLOADS),
        _rule(("",), ("serviceaccounts",), READ),
        *(_rule(groups, resources, READ) for groups, resources in _READ_ONLY),
    ),
    subjects=(MappingProxyType({"kind": "Group", "name": "egs:{slice}", "apiGroup": RBAC_GROUP}),),
)
DEFAULT_ROLE_TEMPLATES: Mapping[str, RoleTemplate] = MappingProxyType({t.name: t for t in (DEPLOYMENT, READER)})


@dataclass(frozen=True)
class NamespaceGrant:
    cluster_role: str
    service_account: str
    namespace: str


class RoleTemplateError(ValueError):
    """A role template that cannot be used; the message names the template and the field."""


def _strings(value: object, where: str, *, allow_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or (not value and not allow_empty):
        what = "a list of strings" if allow_empty else "a non-empty list of strings"
        raise RoleTemplateError(f"{where} must be {what}")
    return list(value)


def _parse_rule(rule: object, where: str) -> Mapping:
    if not isinstance(rule, Mapping):
        raise RoleTemplateError(f"{where} must be an object with apiGroups, resources and verbs")
    known = {"apiGroups", "resources", "verbs", "resourceNames"}
    unknown = sorted(set(rule) - known)
    if unknown:
        raise RoleTemplateError(f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    parsed = {
        "apiGroups": _strings(rule.get("apiGroups"), f"{where}.apiGroups"),
        "resources": _strings(rule.get("resources"), f"{where}.resources"),
        "verbs": _strings(rule.get("verbs"), f"{where}.verbs"),
    }
    if rule.get("resourceNames"):
        parsed["resourceNames"] = _strings(rule["resourceNames"], f"{where}.resourceNames")
    return MappingProxyType(parsed)


def _check_placeholders(text: str, where: str) -> None:
    for _, field, _, _ in string.Formatter().parse(text):
        if field is not None and field not in PLACEHOLDERS:
            raise RoleTemplateError(
                f"{where} uses the unknown placeholder {{{field}}}; known: "
                + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            )


def _parse_subject(subject: object, where: str) -> Mapping:
    if not isinstance(subject, Mapping) or subject.get("kind") not in SUBJECT_KINDS:
        raise RoleTemplateError(f"{where} must be an object whose kind is one of {', '.join(SUBJECT_KINDS)}")
    name = subject.get("name")
    if not isinstance(name, str) or not name:
        raise RoleTemplateError(f"{where}.name must be a non-empty string")
    _check_placeholders(name, f"{where}.name")
    parsed = {"kind": subject["kind"], "name": name}
    if subject["kind"] == "ServiceAccount":
        namespace = subject.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise RoleTemplateError(f"{where}.namespace is required for a ServiceAccount subject")
        _check_placeholders(namespace, f"{where}.namespace")
        parsed["namespace"] = namespace
    else:
        parsed["apiGroup"] = RBAC_GROUP
    return MappingProxyType(parsed)


def parse_role_templates(data: object) -> dict[str, RoleTemplate]:
    """``{name: {"rules": [...], "subjects": [...]}}`` as admins write it (config, YAML) -> role templates."""
    if not isinstance(data, Mapping) or not data:
        raise RoleTemplateError("role templates must be a non-empty object of template name to {rules, subjects}")
    templates = {}
    for name, body in data.items():
        where = f"role template {name!r}"
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise RoleTemplateError(
                f"{where}: the name must be 1 to 42 lower-case letters, digits and '-', "
                "starting and ending with a letter or digit"
            )
        if not isinstance(body, Mapping) or set(body) - {"rules", "subjects"}:
            raise RoleTemplateError(f"{where} must be an object with only rules and subjects")
        rules = body.get("rules")
        if not isinstance(rules, list) or not rules:
            raise RoleTemplateError(f"{where}: rules must be a non-empty list")
        subjects = body.get("subjects", [])
        if not isinstance(subjects, list):
            raise RoleTemplateError(f"{where}: subjects must be a list")
        templates[name] = RoleTemplate(
            name=name,
            rules=tuple(_parse_rule(r, f"{where}: rules[{i}]") for i, r in enumerate(rules)),
            subjects=tuple(_parse_subject(s, f"{where}: subjects[{i}]") for i, s in enumerate(subjects)),
        )
    return templates


def render_subject(subject: Mapping, values: Mapping[str, str]) -> dict:
    """The subject with its placeholders filled in (``values`` has every name in PLACEHOLDERS)."""
    return {key: value.format_map(values) if key in ("name", "namespace") else value for key, value in subject.items()}


_GRANT_FIELDS = ("cluster_role", "service_account", "namespace")
# A DNS subdomain (ClusterRole names) and a DNS label (ServiceAccount names and namespaces) in practice.
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def parse_namespace_grants(data: object) -> tuple[NamespaceGrant, ...]:
    """``[{"cluster_role": ..., "service_account": ..., "namespace": ...}]`` as admins write it -> grants."""
    if not isinstance(data, list):
        raise RoleTemplateError("namespace grants must be a list of {cluster_role, service_account, namespace}")
    grants = []
    for i, item in enumerate(data):
        where = f"namespace grant [{i}]"
        if not isinstance(item, Mapping) or set(item) != set(_GRANT_FIELDS):
            raise RoleTemplateError(f"{where} must be an object with exactly {', '.join(_GRANT_FIELDS)}")
        for field in _GRANT_FIELDS:
            value = item[field]
            if not isinstance(value, str) or not _SUBDOMAIN_RE.fullmatch(value):
                raise RoleTemplateError(
                    f"{where}.{field} must be a Kubernetes name (lower-case letters, digits, '-' and '.'), "
                    f"not {value!r}"
                )
        grants.append(NamespaceGrant(**{field: item[field] for field in _GRANT_FIELDS}))
    roles = [g.cluster_role for g in grants]
    if len(set(roles)) != len(roles):
        raise RoleTemplateError("namespace grants name a ClusterRole twice; give each one grant")
    return tuple(grants)
