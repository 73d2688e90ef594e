"""The egs service and the hub work with the chart's RBAC and nothing more (issue 46, item 4).

The emulator enforces RBAC for tokens it issues (tests/k8s/rbac.py: ClusterRoles,
RoleBindings to them, and the escalation prevention on writing Roles and RoleBindings).
Here it holds the chart's rendered RBAC, and the Kubernetes backend runs with a token of the
chart's egs ServiceAccount: it sets a slice up in namespaces it creates and in one it adopts,
gives the GPU quota and a kubeconfig, and removes the slice, every step with only what the
chart grants (the grants made first in each namespace, deleted last). The hub's token starts
pods in a slice namespace and nowhere else. What RBAC alone still lets the service do
(a RoleBinding in any namespace, of the chart's two ClusterRoles) the service-scope policy
refuses (test_service_scope_policy.py).
"""

from __future__ import annotations

import json
import pathlib

import pytest
from kmock import Server
from kubernetes_asyncio import client

from egs_hub.backends.kubernetes import KubernetesBackend
from egs_hub.backends.kubernetes.roles import parse_namespace_grants

from ..k8s.builders import held_gpus, pod
from ..k8s.cluster import KubeCluster, status_of
from ..k8s.emulator import ClusterEmulator
from ..k8s.kubeconfig import write_kubeconfig
from .conftest import NAMESPACE, of_kind

SNAKE = {
    "Namespace": "namespace",
    "ServiceAccount": "service_account",
    "ClusterRole": "cluster_role",
    "ClusterRoleBinding": "cluster_role_binding",
    "Role": "role",
    "RoleBinding": "role_binding",
}
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.fixture(scope="module")
def chart(render) -> list[dict]:
    return render()


async def create(cluster: KubeCluster, doc: dict) -> None:
    kind, namespace = doc["kind"], doc["metadata"].get("namespace") or NAMESPACE  # Z2JH's name none
    if kind in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
        api = cluster.core if kind == "Namespace" else cluster.rbac
        await getattr(api, f"create_{SNAKE[kind]}")(doc)
    else:
        api = cluster.core if kind == "ServiceAccount" else cluster.rbac
        await getattr(api, f"create_namespaced_{SNAKE[kind]}")(namespace, doc)


@pytest.fixture
async def admin(tmp_path: pathlib.Path, chart):
    """The emulator holding the chart's RBAC objects, and a cluster client with its all-powerful token."""
    async with ClusterEmulator() as emulator, Server(emulator):
        server = str(emulator.url).rstrip("/")
        path = write_kubeconfig(tmp_path / "admin", server, emulator.token, "admin")
        async with KubeCluster(str(path), "admin", emulator=emulator) as cluster:
            await cluster.core.create_namespace({"metadata": {"name": NAMESPACE}})
            for doc in sorted((d for d in chart if d["kind"] in RBAC_KINDS), key=lambda d: RBAC_KINDS.index(d["kind"])):
                await create(cluster, doc)
            yield cluster, server, tmp_path


async def token_of(cluster: KubeCluster, account: str) -> str:
    answer = await cluster.core.create_namespaced_service_account_token(
        account, NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    )
    return answer.status.token


def grants(chart: list[dict]):
    config = json.loads(of_kind(chart, "ConfigMap", "egs")["data"]["egs_config.json"])["EGSService"]
    return parse_namespace_grants(config["namespace_grants"])


@pytest.fixture
async def service(admin, chart):
    """The Kubernetes backend as the chart's egs pod runs it: its ServiceAccount's token, the chart's grants."""
    cluster, server, tmp_path = admin
    account = of_kind(chart, "Deployment", "egs")["spec"]["template"]["spec"]["serviceAccountName"]
    path = write_kubeconfig(tmp_path / "egs", server, await token_of(cluster, account), "egs")
    backend = KubernetesBackend(
        "emu", kubeconfig=str(path), context="egs", request_timeout=3.0, namespace_grants=grants(chart)
    )
    yield backend
    await backend.close()


async def test_the_service_sets_up_and_removes_a_slice_with_the_charts_rights_alone(admin, service):
    cluster, _, _ = admin
    await cluster.core.create_namespace({"metadata": {"name": "team-x"}})  # an admin's, to adopt
    plan = await service.ensure_slice("ml", ["ml-home", "ml-dev", "team-x"], gpus=held_gpus(2))
    assert (plan.create, plan.adopt) == (("ml-home", "ml-dev"), ("team-x",))
    for namespace in ("ml-home", "ml-dev", "team-x"):
        assert await cluster.get("RoleBinding", namespace, "egs:egs-egs-hub-workspace")
        assert await cluster.get("RoleBinding", namespace, "egs:egs-egs-hub-spawner")
        assert await cluster.get("RoleBinding", namespace, "egs-deployment")
        quota = await cluster.get("ResourceQuota", namespace, "egs-gpus")
        assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}
    await service.set_slice_gpus("ml", ["ml-home", "ml-dev", "team-x"], held_gpus(1))
    assert (await cluster.get("ResourceQuota", "team-x", "egs-gpus"))["spec"]["hard"]["requests.nvidia.com/gpu"] == "1"
    made = await service.slice_kubeconfig("ml", ["ml-home"], expiration=600)
    assert "token:" in made.text
    # The slice drops team-x: it is emptied of what egs-hub put there, its own grant last, and unlabelled.
    plan = await service.ensure_slice("ml", ["ml-home", "ml-dev"], gpus=held_gpus(1))
    assert plan.release == ("team-x",)
    assert await cluster.names("RoleBinding", "team-x") == []
    assert "egs.io/slice" not in (await cluster.namespace("team-x"))["metadata"].get("labels", {})
    plan = await service.remove_slice("ml")
    assert set(plan.delete) == {"ml-home", "ml-dev"}


async def test_without_its_grant_the_service_may_not_touch_a_namespace(admin, service):
    cluster, _, _ = admin
    await cluster.core.create_namespace({"metadata": {"name": "team-y"}})
    api = await service._client()
    core = client.CoreV1Api(api)
    assert await status_of(core.create_namespaced_service_account_token("default", "kube-system", {"spec": {}})) == 403
    assert await status_of(core.delete_namespaced_pod("coredns", "kube-system")) == 403
    assert await status_of(core.create_namespaced_service_account("team-y", {"metadata": {"name": "x"}})) == 403
    escalating = {"metadata": {"name": "x"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    rbac = client.RbacAuthorizationV1Api(api)
    assert await status_of(rbac.create_namespaced_role("team-y", escalating)) == 403
    admin_binding = {
        "metadata": {"name": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "egs", "namespace": NAMESPACE}],
    }
    assert await status_of(rbac.create_namespaced_role_binding("team-y", admin_binding)) == 403


async def test_the_hub_starts_servers_in_slice_namespaces_only(admin, service, chart):
    cluster, server, tmp_path = admin
    await service.ensure_slice("ml", ["ml-home"], gpus=[])
    await cluster.core.create_namespace({"metadata": {"name": "team-y"}})
    account = of_kind(chart, "Deployment", "hub")["spec"]["template"]["spec"]["serviceAccountName"]
    path = write_kubeconfig(tmp_path / "hub", server, await token_of(cluster, account), "hub")
    async with KubeCluster(str(path), "hub") as hub:
        assert await status_of(hub.core.create_namespaced_pod("ml-home", pod("jupyter-alice"))) == 200
        assert await status_of(hub.core.list_namespaced_pod("ml-home")) == 200
        for elsewhere in ("team-y", "kube-system"):
            assert await status_of(hub.core.create_namespaced_pod(elsewhere, pod("jupyter-alice"))) == 403
        assert await status_of(hub.core.list_pod_for_all_namespaces()) == 403
