"""What the chart generates once is kept across upgrades: helm's ``lookup`` reads it back from the cluster.

``helm template --dry-run=server`` renders as ``helm install``/``upgrade`` would, with
``lookup`` answered by the Kubernetes API emulator (over HTTPS: client-go sends its
token only over TLS). The first render is an install; its Secrets are then written to
the emulator as the install would have, and the second render is the upgrade: the
webhook's CA and serving certificate (ours) and the egs service's hub token
(Zero to JupyterHub's) must come back unchanged, and the webhook must still trust
the CA that signed the certificate in use.
"""

from __future__ import annotations

import asyncio
import pathlib

import yaml
from kubernetes_asyncio import client, config

from ..k8s.emulator import ClusterEmulator
from ..k8s.tls import serve_https
from .conftest import NAMESPACE, RELEASE, of_kind


async def render_against(helm: str, chart: pathlib.Path, kubeconfig: pathlib.Path) -> list[dict]:
    process = await asyncio.create_subprocess_exec(
        helm,
        "template",
        RELEASE,
        str(chart),
        "--namespace",
        NAMESPACE,
        "--dry-run=server",
        "--disable-openapi-validation",  # the emulator serves no OpenAPI document; test_chart.py validates
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()[-3000:]
    return [doc for doc in yaml.safe_load_all(out) if doc]


async def install_secrets(kubeconfig: pathlib.Path, docs: list[dict]) -> None:
    """What `helm install` would have created of the rendered Secrets: with the release's ownership marks."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        await core.create_namespace({"metadata": {"name": NAMESPACE}})
        owned = {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE}
        for doc in docs:
            if doc["kind"] == "Secret":
                meta = doc["metadata"]
                body = {**doc, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), **owned}}}
                await core.create_namespaced_secret(NAMESPACE, body)


def kept(docs: list[dict]) -> dict:
    webhook = of_kind(docs, "Secret", "egs-webhook-tls")["data"]
    hook = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]
    return {
        "webhook certificate": webhook,
        "caBundle": hook["caBundle"],
        "egs token": of_kind(docs, "Secret", "hub")["data"]["hub.services.egs.apiToken"],
    }


async def test_an_upgrade_keeps_the_webhook_certificate_and_the_service_token(helm, chart_with_dependency, tmp_path):
    async with ClusterEmulator() as emulator, serve_https(emulator, tmp_path) as kubeconfig:
        installed = await render_against(helm, chart_with_dependency, kubeconfig)
        again_before_install = await render_against(helm, chart_with_dependency, kubeconfig)
        await install_secrets(kubeconfig, installed)
        upgraded = await render_against(helm, chart_with_dependency, kubeconfig)

    assert kept(upgraded) == kept(installed)
    assert kept(upgraded)["caBundle"] == kept(upgraded)["webhook certificate"]["ca.crt"]
    # Without the installed Secrets there is nothing to keep: every render makes new ones.
    fresh = kept(again_before_install)
    assert all(fresh[key] != value for key, value in kept(installed).items())
