"""A slice's kubeconfig: loaded by kubernetes_asyncio's own loader, it works only within the slice's namespaces."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

import certifi
import pytest
import yaml
from kubernetes_asyncio import client, config

from egs_hub.backends.kubernetes.kubeconfig import (
    Endpoint,
    SliceNotSetUp,
    endpoint_of,
    kubeconfig_document,
    token_request,
)

from .builders import held_gpus, pod
from .cluster import status_of


async def api_of(text: str) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config_from_dict(yaml.safe_load(text), client_configuration=configuration)
    return client.ApiClient(configuration)


async def test_kubeconfig_reaches_the_slice_namespaces_only(cluster, make_backend):
    home, other = cluster.name("team-a"), cluster.name("team-a-dev")
    elsewhere = await cluster.add_namespace("elsewhere")
    backend = make_backend()
    await backend.ensure_slice("team-a", [home, other], gpus=held_gpus(1))
    made = await backend.slice_kubeconfig("team-a", [home, other], expiration=3600)
    document = yaml.safe_load(made.text)
    assert document["current-context"] == "team-a@emu"
    assert [c["context"]["namespace"] for c in document["contexts"]] == [home, other]
    assert document["clusters"][0]["cluster"]["server"] == cluster.api.configuration.host
    assert timedelta(minutes=59) < made.expires_at - datetime.now(UTC) <= timedelta(hours=1)

    api = await api_of(made.text)
    try:
        core = client.CoreV1Api(api)
        # the current context's namespace is the home one; the slice's ServiceAccount may deploy there and in others
        assert api.configuration.host == document["clusters"][0]["cluster"]["server"]
        await core.create_namespaced_pod(home, pod("trainer"))
        await core.create_namespaced_pod(other, pod("trainer"))
        assert [p.metadata.name for p in (await core.list_namespaced_pod(other)).items] == ["trainer"]
        # but not outside them, nor cluster-wide, nor raise its own quota
        assert await status_of(core.list_namespaced_pod(elsewhere)) == 403
        assert await status_of(core.list_node()) == 403
        assert await status_of(core.list_pod_for_all_namespaces()) == 403
        raise_quota = {"spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
        assert await status_of(core.patch_namespaced_resource_quota("egs-gpus", home, raise_quota)) == 403
    finally:
        await api.close()


async def test_removing_the_slice_revokes_its_kubeconfig(emulator, cluster, make_backend):
    home = cluster.name("team-a")
    backend = make_backend()
    await backend.ensure_slice("team-a", [home], gpus=held_gpus(1))
    api = await api_of((await backend.slice_kubeconfig("team-a", [home], expiration=600)).text)
    try:
        core = client.CoreV1Api(api)
        assert await status_of(core.list_namespaced_pod(home)) == 200
        await backend.remove_slice("team-a")  # the ServiceAccount goes with the namespace egs-hub created
        assert await status_of(core.list_namespaced_pod(home)) == 401
    finally:
        await api.close()


async def test_an_expired_token_is_refused(emulator, cluster, make_backend):
    home = cluster.name("team-a")
    backend = make_backend()
    await backend.ensure_slice("team-a", [home], gpus=held_gpus(1))
    api = await api_of((await backend.slice_kubeconfig("team-a", [home], expiration=600)).text)
    try:
        emulator.expire_tokens()
        assert await status_of(client.CoreV1Api(api).list_namespaced_pod(home)) == 401
    finally:
        await api.close()


async def test_kubeconfig_needs_the_slice_set_up(cluster, make_backend):
    home = await cluster.add_namespace("team-a", slice="team-a")
    want = f"slice team-a is not set up on cluster emu: no ServiceAccount egs-team-a in namespace {home}"
    with pytest.raises(SliceNotSetUp, match=want):
        await make_backend().slice_kubeconfig("team-a", [home], expiration=600)


@pytest.mark.parametrize("expiration", [599, 7 * 24 * 3600 + 1, 3600.0, True, "3600"])
async def test_expiration_is_checked_before_any_request(expiration):
    with pytest.raises(ValueError, match=re.escape(f"from 600 (10 minutes) to 604800 (7 days), not {expiration!r}")):
        token_request(expiration)


def test_the_document_carries_the_endpoint():
    ca = certifi.contents().encode()
    endpoint = Endpoint("https://k8s.example:6443", ca_pem=ca, tls_server_name="kubernetes")
    document = kubeconfig_document("prod", "team-a", ["a", "b"], endpoint, "tok")
    assert document["clusters"] == [
        {
            "name": "prod",
            "cluster": {
                "server": "https://k8s.example:6443",
                "certificate-authority-data": base64.b64encode(ca).decode(),
                "tls-server-name": "kubernetes",
            },
        }
    ]
    assert document["users"] == [{"name": "egs-team-a@prod", "user": {"token": "tok"}}]
    assert [c["name"] for c in document["contexts"]] == ["team-a@prod", "team-a@prod/b"]
    insecure = kubeconfig_document("dev", "team-a", ["a"], Endpoint("https://10.0.0.1", insecure=True), "tok")
    assert insecure["clusters"][0]["cluster"] == {"server": "https://10.0.0.1", "insecure-skip-tls-verify": True}


async def test_the_endpoint_round_trips_through_the_loader():
    """What endpoint_of reads from a loaded configuration is what the kubeconfig it writes loads back to."""
    ca = certifi.contents().encode()
    written = kubeconfig_document("prod", "team-a", ["a"], Endpoint("https://k8s.example:6443", ca_pem=ca), "tok")
    configuration = client.Configuration()
    await config.load_kube_config_from_dict(written, client_configuration=configuration)
    assert endpoint_of(configuration) == Endpoint("https://k8s.example:6443", ca_pem=ca)
    assert endpoint_of(configuration, "https://public.example").server == "https://public.example"
    assert configuration.api_key == {"BearerToken": "Bearer tok"}
