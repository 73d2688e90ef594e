"""Two replicas under the chart's own NetworkPolicies (issue 46, items 2 and 8).

Found: a standby forwards every request, webhook reviews included, to the leader's pod IP on the HTTP
port, and the egs policy admitted only the hub, the proxy and users' servers there: on a CNI that
enforces policies about half the requests failed, and webhook calls that timed out were admitted
unchanged (``failurePolicy: Ignore``). Here the chart is rendered with two replicas on PostgreSQL and
every connection to an egs pod that the code makes is checked against the rendered policies (the
source's egress and the egs pod's ingress, netpol.py), as is a sample of those it must refuse.
"""

from __future__ import annotations

import pytest

from .conftest import NAMESPACE, of_kind
from .netpol import Pod, connects

RELEASE_NAMESPACE = {"kubernetes.io/metadata.name": NAMESPACE}
SLICE_NAMESPACE = {"kubernetes.io/metadata.name": "ml-home", "egs.io/slice": "ml"}
# A server's pod as KubeSpawner labels it under Zero to JupyterHub (singleuser.extraLabels: hub access).
SERVER = {
    "component": "singleuser-server",
    "app": "jupyterhub",
    "release": "egs",
    "hub.jupyter.org/network-access-hub": "true",
}
SERVER_PORTS = {"notebook-port": 8888}  # KubeSpawner's container port, which Zero to JupyterHub keeps


@pytest.fixture(scope="module")
def two_replicas(render) -> list[dict]:
    return render("postgres-secret.yaml", set_values={"egs.replicas": "2"})


def template_pod(docs: list[dict], name: str) -> Pod:
    template = of_kind(docs, "Deployment", name)["spec"]["template"]
    ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    return Pod(NAMESPACE, template["metadata"]["labels"], RELEASE_NAMESPACE, ports)


def ports_of(docs: list[dict]) -> tuple[int, int]:
    egs = template_pod(docs, "egs")
    return egs.ports["http"], egs.ports["webhook"]


def sources(docs: list[dict]) -> dict[str, Pod]:
    return {
        "hub": template_pod(docs, "hub"),
        "proxy": template_pod(docs, "proxy"),
        "egs replica": template_pod(docs, "egs"),
        "server in the release's namespace": Pod(NAMESPACE, SERVER, RELEASE_NAMESPACE, SERVER_PORTS),
        "server in a slice's namespace": Pod("ml-home", SERVER, SLICE_NAMESPACE, SERVER_PORTS),
        "endpoint replica in a slice's namespace": Pod("ml-home", {"egs.io/endpoint": "chat"}, SLICE_NAMESPACE),
        "other pod in the release's namespace": Pod(NAMESPACE, {"app": "other"}, RELEASE_NAMESPACE),
        "server of another namespace": Pod(
            "elsewhere", SERVER, {"kubernetes.io/metadata.name": "elsewhere"}, SERVER_PORTS
        ),
        "API server (no pod a selector names)": Pod("", {}, {}),
    }


HTTP_ADMITTED = {
    "hub",
    "proxy",
    "egs replica",
    "server in the release's namespace",
    "server in a slice's namespace",
}


def test_every_connection_to_an_egs_pod_is_admitted_and_nothing_else(two_replicas):
    assert of_kind(two_replicas, "Deployment", "egs")["spec"]["replicas"] == 2
    http, webhook = ports_of(two_replicas)
    egs = template_pod(two_replicas, "egs")
    admitted_http = {
        name for name, pod in sources(two_replicas).items() if connects(two_replicas, NAMESPACE, pod, egs, http)
    }
    assert admitted_http == HTTP_ADMITTED
    # The webhook port: the API server calls it, and it is not a pod a selector could name.
    api_server = sources(two_replicas)["API server (no pod a selector names)"]
    assert connects(two_replicas, NAMESPACE, api_server, egs, webhook)


def test_a_standby_reaches_the_leader_on_the_port_it_forwards_to(two_replicas):
    egs = template_pod(two_replicas, "egs")
    http, _ = ports_of(two_replicas)
    env = {
        e["name"]: e.get("value")
        for e in of_kind(two_replicas, "Deployment", "egs")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert any(value and value.endswith(f"$(POD_IP):{http}") for value in env.values()), env
    assert connects(two_replicas, NAMESPACE, egs, egs, http)


def test_the_hub_and_the_proxy_reach_servers_in_slice_namespaces_by_selectors(two_replicas):
    """Issue 46, item 8: the servers live in slices' namespaces, where Zero to JupyterHub's own egress rules
    reach them only as private IPs (an ipBlock), which some CNIs (Cilium) do not match for pods. The chart's
    rules name them by namespace and pod selectors; a server of a namespace of no slice is not named."""
    found = sources(two_replicas)
    for name in ("hub", "proxy"):
        source = found[name]
        assert connects(
            two_replicas, NAMESPACE, source, found["server in a slice's namespace"], SERVER_PORTS["notebook-port"]
        ), name
        assert connects(
            two_replicas, NAMESPACE, source, found["server in the release's namespace"], SERVER_PORTS["notebook-port"]
        )
        assert not connects(
            two_replicas, NAMESPACE, source, found["server of another namespace"], SERVER_PORTS["notebook-port"]
        )
    # and the servers there reach the hub's API (interNamespaceAccessLabels: accept)
    hub = found["hub"]
    assert connects(two_replicas, NAMESPACE, found["server in a slice's namespace"], hub, hub.ports["http"])
