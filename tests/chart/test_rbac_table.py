"""docs/kubernetes.md's least-privilege table is the chart's RBAC, right for right (issue 46, item 4).

A *right* is (where, who, verb, resource, names): ``cluster-wide`` for a ClusterRole the chart binds
with a ClusterRoleBinding, ``slice namespaces`` for a ClusterRole the service binds there
(``EGSService.namespace_grants``), or a namespace for a Role the chart binds there; *who* is the
ServiceAccount (``egs``, ``hub``). The test fails on a rendered right the table does not list (a
cluster-wide verb added without a reason in the docs) and on a listed one the chart does not grant.
"""

from __future__ import annotations

import json
import re

from .conftest import RELEASE, ROOT, of_kind

DOC = ROOT / "docs" / "kubernetes.md"
Right = tuple[str, str, str, str, tuple[str, ...]]


def rights_of(role: dict, where: str, who: str) -> set[Right]:
    return {
        (where, who, verb, f"{group}/{resource}" if group else resource, tuple(rule.get("resourceNames") or ()))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def rendered_rights(docs: list[dict]) -> set[Right]:
    ours = [d for d in docs if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "egs-hub"]
    found: set[Right] = set()
    for binding in (d for d in ours if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        ref, (subject,) = binding["roleRef"], binding["subjects"]
        if binding["kind"] == "ClusterRoleBinding":
            role, where = of_kind(docs, "ClusterRole", ref["name"]), "cluster-wide"
        else:
            where = binding["metadata"]["namespace"]
            role = next(d for d in ours if d["kind"] == "Role" and d["metadata"]["namespace"] == where)
        found |= rights_of(role, where, subject["name"])
    config = json.loads(of_kind(docs, "ConfigMap", "egs")["data"]["egs_config.json"])["EGSService"]
    for grant in config["namespace_grants"]:
        role = of_kind(docs, "ClusterRole", grant["cluster_role"])
        found |= rights_of(role, "slice namespaces", grant["service_account"])
    return found


def table_rights() -> set[Right]:
    text = DOC.read_text()
    table = text.split("<!-- rbac-table -->", 1)[1].split("<!-- /rbac-table -->", 1)[0]
    rows = table.strip().splitlines()[2:]
    found: set[Right] = set()
    for row in rows:
        where, who, verbs, what, why = (cell.strip() for cell in row.strip("|").split("|"))
        assert why, f"a right without a reason: {row}"
        where = where.strip("`")
        for item in re.findall(r"`([^`]+)`(?: \(([^)]*)\))?", what):
            resource, names = item
            names = tuple(n.strip().strip("`").replace("<release>", RELEASE) for n in names.split(",") if n.strip())
            found |= {(where, who, verb.strip(), resource, names) for verb in verbs.split(",")}
    return found


def test_the_table_lists_every_right_the_chart_grants_and_no_other(render):
    have, said = rendered_rights(render()), table_rights()
    assert not have - said, f"granted, not in docs/kubernetes.md's table: {sorted(have - said)}"
    assert not said - have, f"in the table, not granted: {sorted(said - have)}"


def test_cluster_wide_the_service_writes_only_what_the_table_says(render):
    writes = {r for r in rendered_rights(render()) if r[0] == "cluster-wide" and r[2] not in ("get", "list", "watch")}
    assert {(verb, resource) for _, _, verb, resource, _ in writes} == {
        ("patch", "nodes"),
        ("create", "namespaces"),
        ("patch", "namespaces"),
        ("delete", "namespaces"),
        ("create", "events"),
        ("patch", "egs.io/gpuprovisionrequests"),
        ("patch", "egs.io/gpuprovisionrequests/status"),
        ("create", "rbac.authorization.k8s.io/rolebindings"),
        ("bind", "rbac.authorization.k8s.io/clusterroles"),
    }
    assert {who for _, who, *_ in writes} == {"egs"}
