"""The release as ``helm template`` renders it, run: hub, proxy and egs service against the API emulator.

Run only by test_rendered_config_runs.py, inside user, network, mount and PID
namespaces of its own (``unshare``), which is why this file's name does not
start with ``test_``. In there, as in the release's namespace of a cluster:

- every Service name (``hub``, ``proxy-api``, ``egs``, ``egs.<ns>.svc``...)
  resolves to 127.0.0.1 through a private ``/etc/hosts``, each container listens
  on its own ports (JupyterHub on 8081 as Zero to JupyterHub binds it), and a
  Service whose port differs from its container's (``proxy-public`` 80 -> 8000)
  gets a forwarder;
- the Kubernetes API is the emulator of tests/k8s over HTTPS, found by the pods
  as in a cluster (``KUBERNETES_SERVICE_HOST``/``PORT``, the ServiceAccount's
  token and CA): KubeSpawner's and the egs service's in-cluster configuration
  runs unchanged. The token is the emulator's own (it emulates no ClusterRoles);
- the proxy, hub and egs containers run as pods.py starts them: Zero to
  JupyterHub's own jupyterhub_config.py and z2jh.py from the hub ConfigMap read
  the values from the hub Secret at their absolute paths, the chart's
  hub_config/ from jupyterhub_config.d, the egs service its env and config file;
  init containers run first. What the images would hold comes from this
  checkout (the virtualenv, configurable-http-proxy);
- the test plays the kubelet for the user's server pod that SliceKubeSpawner
  creates: it runs the pod's container the same way and sets the pod Running.
  Security contexts, resource limits and NetworkPolicies are not applied, and
  nothing schedules: the node selector and tolerations are checked, not obeyed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import tomllib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import yaml
from kmock import Server
from kubernetes_asyncio import client

from ..k8s.builders import gpu_node
from ..k8s.emulator import ClusterEmulator
from ..k8s.tls import self_signed, tls_server
from .conftest import NAMESPACE
from .pods import ROOT, ApiServer, LocalPod, Manifests, RenderedError

CHP_BIN = ROOT / ".cache" / "node" / "node_modules" / ".bin"
DEADLINE = 60.0  # seconds any one condition may take
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# Where the images are pulled from: the registry of the chart's default egs image (make images tags the same).
REGISTRY = yaml.safe_load((ROOT / "charts/egs-hub/values.yaml").read_text())["egs"]["image"]["name"].rsplit("/", 1)[0]


@pytest.fixture(autouse=True)
def own_network() -> None:
    """The network namespace's loopback up (a new one starts down), as `ip link set lo up` does."""
    if os.environ.get("EGS_RENDERED_NETNS") != "1":
        pytest.fail("run this file through tests/chart/test_rendered_config_runs.py (it needs its own namespaces)")
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1  # linux/sockios.h, linux/if.h
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh22x", b"lo", 0)  # struct ifreq: name, flags, the rest of the union
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, siocgifflags, request))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sh22x", b"lo", flags | iff_up))


# --- rendering ---------------------------------------------------------------------------------


def egs_workload(manifests: Manifests) -> str:
    """The rendered workload that runs the egs service image."""
    names = [
        o["metadata"]["name"]
        for o in manifests.of_kind("Deployment")
        if any(c["image"].startswith(f"{REGISTRY}/egs-hub-egs:") for c in o["spec"]["template"]["spec"]["containers"])
    ]
    if len(names) != 1:
        raise RenderedError(f"one Deployment of the {REGISTRY}/egs-hub-egs image expected, found {names}")
    return names[0]


# --- the cluster's network and API -------------------------------------------------------------


def private_hosts(manifests: Manifests, tmp: Path) -> None:
    hosts = tmp / "hosts"
    names = " ".join(["localhost", *manifests.host_names()])
    hosts.write_text(f"127.0.0.1 {names}\n::1 localhost\n")
    subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)


@contextlib.asynccontextmanager
async def api_server(tmp: Path) -> AsyncIterator[tuple[ApiServer, client.ApiClient]]:
    cert, key = self_signed(tmp, "kubernetes")
    pem = cert.read_bytes()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with ClusterEmulator() as emulator, Server(emulator, server_cls=tls_server(context)) as server:
        configuration = client.Configuration(host=f"https://127.0.0.1:{server.port}")
        configuration.ssl_ca_cert = str(cert)
        configuration.api_key = {"BearerToken": f"Bearer {emulator.token}"}
        async with client.ApiClient(configuration) as api:
            yield ApiServer("127.0.0.1", server.port, emulator.token, pem), api
        # The watches of the processes, which are gone, would keep the server's shutdown waiting (60 s).
        await emulator.set_outage(True)


@contextlib.asynccontextmanager
async def forwarders(manifests: Manifests) -> AsyncIterator[None]:
    """A listener per Service port that differs from its container port, as kube-proxy would route it."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    def forward_to(port: int) -> Callable:
        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

        return connected

    servers = []
    for service in manifests.of_kind("Service"):
        for port in service["spec"].get("ports") or []:
            target = manifests.container_port(service, port)
            if target != port["port"]:
                servers.append(await asyncio.start_server(forward_to(target), "127.0.0.1", port["port"]))
    try:
        yield
    finally:
        for server in servers:
            server.close()


# --- the pods ----------------------------------------------------------------------------------


class Pods:
    """The release's containers as processes; their output in logs/ and in the failure report."""

    def __init__(self, manifests: Manifests, tmp: Path, api: ApiServer):
        self.manifests = manifests
        self.tmp = tmp
        self.api = api
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.processes: dict[str, subprocess.Popen] = {}
        self.base_env = {
            # The images' executables: this virtualenv's, the proxy `make` installs, else what is on PATH.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(CHP_BIN), os.environ["PATH"]]),
            "PYTHONPATH": str(ROOT),  # egs-hub as the images install it: this checkout's
            "HOME": str(tmp / "home"),
            "LANG": "C.UTF-8",
        }
        (tmp / "home").mkdir()
        # The processes run as root of the user namespace, not as the pod's runAsUser (Z2JH's singleuser.uid
        # 1000, what Docker Stacks' start.sh switches to): Jupyter Server refuses root unless told.
        (tmp / "home" / ".jupyter").mkdir()
        (tmp / "home" / ".jupyter" / "jupyter_server_config.json").write_text('{"ServerApp": {"allow_root": true}}')

    def report(self) -> str:
        return "\n".join(f"--- {log.name} ---\n{log.read_text()[-6000:]}" for log in sorted(self.logs.iterdir()))

    async def start(self, workload: str) -> None:
        spec = self.manifests.pod_template(workload)["spec"]
        for init in spec.get("initContainers") or []:
            pod = LocalPod.of_workload(self.manifests, workload, init["name"], self.tmp / "pods", self.api)
            process = pod.start(self.base_env, self.logs / f"{workload}-{init['name']}.log")
            code = await asyncio.wait_for(asyncio.to_thread(process.wait), DEADLINE)
            assert code == 0, f"init container {workload}/{init['name']} exited {code}\n{self.report()}"
        for container in spec["containers"]:
            pod = LocalPod.of_workload(self.manifests, workload, container["name"], self.tmp / "pods", self.api)
            self.processes[f"{workload}/{container['name']}"] = pod.start(
                self.base_env, self.logs / f"{workload}-{container['name']}.log"
            )
            await self.ready(workload, container)

    async def ready(self, workload: str, container: dict) -> None:
        """Until the container's readinessProbe (else its ports) answers; fails when it exits first."""
        process = self.processes[f"{workload}/{container['name']}"]
        probe = (container.get("readinessProbe") or {}).get("httpGet")
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports") or []}
        deadline = time.monotonic() + DEADLINE
        async with httpx.AsyncClient(timeout=5) as http:
            while time.monotonic() < deadline:
                assert process.poll() is None, f"{workload}/{container['name']} exited\n{self.report()}"
                with contextlib.suppress(httpx.TransportError, OSError):
                    if probe:
                        port = probe["port"] if isinstance(probe["port"], int) else ports[probe["port"]]
                        if (await http.get(f"http://127.0.0.1:{port}{probe.get('path', '/')}")).status_code < 400:
                            return
                    else:
                        for port in ports.values():
                            socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        return
                await asyncio.sleep(0.2)
        raise AssertionError(f"{workload}/{container['name']} not ready in {DEADLINE}s\n{self.report()}")

    async def start_pod(self, pod: dict, container: str) -> None:
        """A container of a pod from the API (a user's server), started as the release's are."""
        local = LocalPod(self.manifests, pod["metadata"]["name"], pod, container, self.tmp / "pods", self.api)
        key = f"{pod['metadata']['name']}/{container}"
        self.processes[key] = local.start(self.base_env, self.logs / f"{key.replace('/', '-')}.log")
        await self.ready(pod["metadata"]["name"], local.container)

    def stop_pod(self, key: str) -> None:
        """What the kubelet does when a pod is deleted: its container ends."""
        process = self.processes.pop(key)
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def admin_user(manifests: Manifests) -> str:
    """The first hub admin of the rendered values (the hub Secret's values.yaml, which z2jh.py reads)."""
    values = yaml.safe_load(manifests.data("Secret", "hub")["values.yaml"])
    admins = (((values.get("hub") or {}).get("config") or {}).get("Authenticator") or {}).get("admin_users") or []
    assert admins, "the rendered values name no hub.config.Authenticator.admin_users"
    return admins[0]


# --- through the proxy -------------------------------------------------------------------------


async def eventually(check: Callable, what: str, report: Callable[[], str]):
    """check()'s first truthy answer (awaited), polled until DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.25)
    raise AssertionError(f"{what}: not within {DEADLINE}s (last: {last!r})\n{report()}")


async def log_in(base: str, user: str) -> str:
    """Log in at the hub's login form through the proxy; a hub API token of the user."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        form = await http.get("/hub/login")
        assert form.status_code == 200, form.text[:500]
        xsrf = http.cookies["_xsrf"]
        login = await http.post("/hub/login", data={"username": user, "password": "any", "_xsrf": xsrf})
        assert login.status_code == 302, login.text[:500]
        # The hub binds the XSRF token to the login session: a page after login sets the one API calls send.
        home = await http.get("/hub/home")
        assert home.status_code == 200, home.text[:500]
        xsrf = [c.value for c in http.cookies.jar if c.name == "_xsrf"][-1]
        made = await http.post(
            f"/hub/api/users/{user}/tokens", json={"note": "rendered-config test"}, headers={"X-XSRFToken": xsrf}
        )
        assert made.status_code == 201, made.text[:500]
        return made.json()["token"]


def api(base: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, headers={"Authorization": f"token {token}"}, timeout=30)


async def answer(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (
        f"{response.request.method} {response.url} answered {response.status_code}: {response.text[:500]}"
    )
    return response.json() if response.content else {}


# --- the scenario ------------------------------------------------------------------------------


async def test_the_rendered_release_spawns_a_server_in_its_slice_with_the_gpus(render, tmp_path: Path) -> None:
    # The chart's defaults, with Zero to JupyterHub in place (conftest.py's render).
    manifests = Manifests(render(), NAMESPACE)
    private_hosts(manifests, tmp_path)
    async with api_server(tmp_path) as (api_server_info, k8s), forwarders(manifests):
        core = client.CoreV1Api(k8s)
        await core.create_namespace({"metadata": {"name": NAMESPACE}})
        node = gpu_node("gpu-a", gpus=8)
        await core.create_node({k: v for k, v in node.items() if k != "status"})
        await core.patch_node_status("gpu-a", {"status": node["status"]})

        pods = Pods(manifests, tmp_path, api_server_info)
        try:
            for workload in ("proxy", "hub", egs_workload(manifests)):
                await pods.start(workload)
            await scenario(manifests, k8s, pods)
        finally:
            pods.stop()


async def scenario(manifests: Manifests, k8s: client.ApiClient, pods: Pods) -> None:
    core = client.CoreV1Api(k8s)
    # The users' way in: the proxy-public Service.
    public = manifests.find("Service", "proxy-public")["spec"]["ports"][0]["port"]
    base = f"http://proxy-public:{public}"
    admin = admin_user(manifests)
    egs = "/services/egs/api/v1"

    # 0. The hub adds the egs service's route to the proxy once its start has seen the service up.
    async def routed() -> bool:
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            health = await http.get(f"{egs}/health")
        return health.status_code == 200 and health.headers["content-type"].startswith("application/json")

    await eventually(routed, "the egs service through the proxy", pods.report)

    # 1. The admin logs in through the proxy; the chart's cluster is registered and sees the GPU node.
    async with api(base, await log_in(base, admin)) as as_admin:

        async def cluster_of_node() -> str | None:
            clusters = (await answer(await as_admin.get(f"{egs}/inventory"), 200))["clusters"]
            found = [c for c in clusters if any(n["name"] == "gpu-a" for n in c["nodes"])]
            return found[0]["name"] if found and found[0]["kind"] == "kubernetes" else None

        cluster = await eventually(cluster_of_node, "the GPU node in egs-hub's inventory", pods.report)

        # 2. A workspace with a namespace on the chart's cluster, and alice in it.
        body = {"name": "team-a", "namespaces": {cluster: ["team-a"]}}
        await answer(await as_admin.post(f"{egs}/slices", json=body), 201)
        await answer(await as_admin.put(f"{egs}/slices/team-a/members/alice"), 200)

    # 3. alice asks for GPUs; they are provisioned (the node enters the slice).
    async with api(base, await log_in(base, "alice")) as as_alice:
        gpr = await answer(
            await as_alice.post(
                f"{egs}/gprs", json={"slice": "team-a", "gpus": 8, "duration": "1h", "cluster": cluster}
            ),
            201,
        )

        async def provisioned() -> dict | None:
            found = await answer(await as_alice.get(f"{egs}/gprs/{gpr['id']}"), 200)
            assert found["status"] not in ("failed", "rejected", "cancelled"), found
            return found if found["status"] == "provisioned" else None

        await eventually(provisioned, "alice's GPR provisioned", pods.report)

        # 4. Her server: SliceKubeSpawner puts the pod in the slice's namespace, on its nodes, with the GPUs.
        start = await as_alice.post("/hub/api/users/alice/server", json={"slice": "team-a", "gpus": 2})
        assert start.status_code in (201, 202), start.text[:500]

        async def pod() -> dict | None:
            listed = await core.list_namespaced_pod("team-a", label_selector="component=singleuser-server")
            return listed.items[0] if listed.items else None

        found = await eventually(pod, "alice's server pod in namespace team-a", pods.report)
        check_placement(found)

        # 5. Playing the kubelet, the pod's container runs (as pods.py runs the release's) and is Running:
        # the hub finishes the spawn, and the server reaches the egs service at the URL the pod was given.
        name = found.metadata.name
        await pods.start_pod(k8s.sanitize_for_serialization(found), "notebook")
        await core.patch_namespaced_pod_status(name, "team-a", {"status": running_status()})

        async def ready() -> bool:
            user = await answer(await as_alice.get("/hub/api/users/alice"), 200)
            return (user["servers"].get("") or {}).get("ready", False)

        await eventually(ready, "alice's server ready in the hub", pods.report)
        status = await as_alice.get("/user/alice/api/status")
        assert status.status_code == 200, status.text[:500]
        slices = await answer(await as_alice.get("/user/alice/egs/api/slices"), 200)
        assert [s["name"] for s in slices["slices"]] == ["team-a"]

        # 6. Stopping the server deletes the pod.
        stop = await as_alice.delete("/hub/api/users/alice/server")
        assert stop.status_code in (202, 204), stop.text[:500]

        async def deleted() -> bool:
            return not (await core.list_namespaced_pod("team-a", field_selector=f"metadata.name={name}")).items

        await eventually(deleted, "alice's pod deleted", pods.report)
        pods.stop_pod(f"{name}/notebook")


def check_placement(found: client.V1Pod) -> None:
    """SliceKubeSpawner's pod: in the slice's namespace, labelled, on its nodes, with the GPUs asked."""
    spec = found.spec
    (notebook,) = spec.containers
    assert found.metadata.namespace == "team-a"
    assert found.metadata.labels["egs.io/slice"] == "team-a"
    assert found.metadata.labels["hub.jupyter.org/username"] == "alice"
    assert spec.node_selector == {"egs.io/slice": "team-a"}
    tolerations = [(t.key, t.operator, t.value, t.effect) for t in spec.tolerations]
    assert ("egs.io/slice", "Equal", "team-a", "NoSchedule") in tolerations
    assert notebook.resources.limits["nvidia.com/gpu"] == "2"
    assert notebook.image == f"{REGISTRY}/egs-hub-singleuser:{VERSION}"  # what make images tags
    env = {e.name: e.value for e in notebook.env}
    assert env["EGS_SLICE"] == "team-a"
    assert env["EGS_API_URL"] == f"http://egs.{NAMESPACE}.svc:8080/services/egs/api/v1/"


def running_status() -> dict:
    """What the kubelet writes once the notebook container is up (the pod's IP: this namespace's loopback)."""
    return {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "notebook", "ready": True, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {}}}
        ],
    }
