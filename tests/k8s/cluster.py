"""A cluster the tests drive through the real kubernetes_asyncio client: the emulator, or a real one.

Everything goes through the API (a node's status too, with the status
subresource), so the same calls work against a real cluster; what a test
creates is deleted when it ends. Namespace names get a per-test suffix because
a real cluster takes a while to delete a namespace.
"""

from __future__ import annotations

import secrets

from kubernetes_asyncio import client, config

from .emulator import ClusterEmulator

HARNESS_USER_AGENT = "egs-hub-tests"
# kubernetes_asyncio's method names per kind: read_namespaced_<name>, list_namespaced_<name>
SNAKE = {
    "ServiceAccount": "service_account",
    "Role": "role",
    "RoleBinding": "role_binding",
    "ResourceQuota": "resource_quota",
    "Service": "service",
    "Deployment": "deployment",
}


class KubeCluster:
    def __init__(self, kubeconfig: str, context: str, emulator: ClusterEmulator | None = None):
        self.kubeconfig = kubeconfig
        self.context = context
        self.emulator = emulator
        self.suffix = secrets.token_hex(3)
        self._nodes: list[str] = []
        self._namespaces: list[str] = []

    async def __aenter__(self) -> KubeCluster:
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=self.kubeconfig, context=self.context, client_configuration=configuration
        )
        self.api = client.ApiClient(configuration)
        self.api.user_agent = HARNESS_USER_AGENT  # not the code under test (tests/chart/api_requests.py)
        self.core = client.CoreV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        return self

    async def __aexit__(self, *exc) -> None:
        for name in self._nodes:
            await self._ignore_missing(self.core.delete_node(name))
        for name in self._namespaces:
            await self._ignore_missing(self.core.delete_namespace(name))
        await self.api.close()

    @staticmethod
    async def _ignore_missing(call) -> None:
        try:
            await call
        except client.ApiException as e:
            if e.status != 404:
                raise

    def _dict(self, model) -> dict:
        return self.api.sanitize_for_serialization(model)

    async def add_node(self, obj: dict) -> dict:
        """Create a node, then set its status (the API ignores status on create for nodes)."""
        body = {k: v for k, v in obj.items() if k != "status"}
        await self.core.create_node(body)
        self._nodes.append(obj["metadata"]["name"])
        return self._dict(await self.core.patch_node_status(obj["metadata"]["name"], {"status": obj["status"]}))

    def name(self, base: str) -> str:
        """A namespace name for this test; the namespace is deleted when the test ends if it exists then."""
        name = f"{base}-{self.suffix}"
        self._namespaces.append(name)
        return name

    async def add_namespace(self, base: str, slice: str | None = None, labels: dict | None = None) -> str:
        name = f"{base}-{self.suffix}"
        labels = {**(labels or {}), **({"egs.io/slice": slice} if slice else {})}
        await self.core.create_namespace({"metadata": {"name": name, "labels": labels}})
        self._namespaces.append(name)
        return name

    async def add_pod(self, namespace: str, obj: dict) -> None:
        await self.core.create_namespaced_pod(namespace, obj)

    async def add_budget(self, namespace: str, obj: dict) -> None:
        await self.policy.create_namespaced_pod_disruption_budget(namespace, obj)

    async def node(self, name: str) -> dict:
        return self._dict(await self.core.read_node(name))

    async def patch_node(self, name: str, body: dict) -> None:
        await self.core.patch_node(name, body)

    async def patch_node_status(self, name: str, status: dict) -> None:
        await self.core.patch_node_status(name, {"status": status})

    async def delete_node(self, name: str) -> None:
        await self.core.delete_node(name)

    async def pod_names(self, namespace: str) -> list[str]:
        return sorted(p.metadata.name for p in (await self.core.list_namespaced_pod(namespace)).items)

    async def namespace(self, name: str) -> dict | None:
        """The namespace, or None when it is gone (or going: a real cluster takes a while)."""
        try:
            found = self._dict(await self.core.read_namespace(name))
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise
        return None if found["metadata"].get("deletionTimestamp") else found

    def _api_of(self, kind: str):
        return self.rbac if kind.startswith("Role") else self.apps if kind == "Deployment" else self.core

    async def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """A ServiceAccount, Role, RoleBinding, ResourceQuota, Service or Deployment; None when there is none."""
        try:
            return self._dict(await getattr(self._api_of(kind), f"read_namespaced_{SNAKE[kind]}")(name, namespace))
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    async def names(self, kind: str, namespace: str) -> list[str]:
        """Names of the egs-hub objects of a kind in the namespace (those labelled managed-by egs-hub)."""
        call = getattr(self._api_of(kind), f"list_namespaced_{SNAKE[kind]}")
        listed = await call(namespace, label_selector="app.kubernetes.io/managed-by=egs-hub")
        return sorted(o.metadata.name for o in listed.items)


async def status_of(call) -> int:
    """The HTTP status a client call ends with (200 when it succeeds)."""
    try:
        await call
    except client.ApiException as e:
        return e.status
    return 200
