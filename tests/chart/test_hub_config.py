"""hub_config/ as the hub runs it: the rendered ConfigMap's files executed over the config Zero to JupyterHub's
jupyterhub_config.py has built from the rendered values by then (hub.config, hub.services with their tokens from
the hub's Secret, hub.loadRoles), and the settings it shares with the embedded default.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from traitlets.config import Config

from egs_hub.embedded import configure_hub
from egs_hub.kube_hub import HubConfigError, configure_kube_hub, in_namespace
from egs_hub.roles import ADMIN_SCOPE, ENDPOINT_SCOPE

from ..test_cli import hub_env
from .conftest import NAMESPACE, of_kind

MOUNT_PATH = "/usr/local/etc/jupyterhub/egs"


def hub_values(docs: list[dict]) -> dict:
    secret = of_kind(docs, "Secret", "hub")["data"]
    return yaml.safe_load(base64.b64decode(secret["values.yaml"]))["hub"]


def z2jh_config(docs: list[dict]) -> tuple[Config, dict[str, str]]:
    """What Zero to JupyterHub's jupyterhub_config.py has put in ``c`` before it runs hub.extraConfig,
    and the hub Secret's data (decoded)."""
    secret = {k: base64.b64decode(v).decode() for k, v in of_kind(docs, "Secret", "hub")["data"].items()}
    values = yaml.safe_load(secret["values.yaml"])["hub"]
    c = Config()
    c.JupyterHub.services = [
        {**service, "name": key, "api_token": secret[f"hub.services.{key}.apiToken"]}
        for key, service in values["services"].items()
    ]
    c.JupyterHub.load_roles = [{**role, "name": key} for key, role in values["loadRoles"].items()]
    for section, settings in values["config"].items():
        c[section].update(settings)
    return c, secret


@pytest.fixture(scope="module")
def hub(render, tmp_path_factory) -> tuple[Config, dict[str, str]]:
    """The hub's config after hub.extraConfig ran the rendered hub_config/, as the hub pod's files have it."""
    docs = render()
    c, secret = z2jh_config(docs)
    mounted = tmp_path_factory.mktemp("egs")
    for name, text in of_kind(docs, "ConfigMap", "egs-hub-config")["data"].items():
        (mounted / name).write_text(text)
    extra_config = hub_values(docs)["extraConfig"]["egs-hub"]
    assert MOUNT_PATH in extra_config
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EGS_HUB_SETTINGS", str(mounted / "egs_hub_settings.json"))
        # As Zero to JupyterHub runs hub.extraConfig: in its config file's namespace, with c.
        exec(compile(extra_config.replace(MOUNT_PATH, str(mounted)), "egs-hub", "exec"), {"c": c})
    return c, secret


def test_the_hub_spawns_with_slice_kube_spawner_on_this_cluster(hub):
    c, secret = hub
    assert c.JupyterHub.spawner_class == "egs_hub.spawners.SliceKubeSpawner"
    assert c.SliceKubeSpawner.egs_cluster == "home"
    assert c.SliceKubeSpawner.egs_api_url == "http://egs:8080/services/egs/api/v1/"
    assert c.SliceKubeSpawner.egs_pod_api_url == f"http://egs.{NAMESPACE}.svc:8080/services/egs/api/v1/"
    assert c.SliceKubeSpawner.egs_api_token == secret["hub.services.egs.apiToken"]


def test_the_egs_service_its_scopes_and_roles(hub):
    c, secret = hub
    services = {s["name"]: s for s in c.JupyterHub.services}
    egs = services["egs"]
    assert (egs["url"], egs["api_token"]) == ("http://egs:8080", secret["hub.services.egs.apiToken"])
    assert egs["oauth_no_confirm"] is True and egs["oauth_client_allowed_scopes"] == [ADMIN_SCOPE]
    assert ADMIN_SCOPE in c.JupyterHub.custom_scopes
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert set(roles) == {"user", "egs-admin", "egs-service", "egs-prometheus"}
    assert roles["egs-admin"]["users"] == ["admin"] and roles["egs-admin"]["scopes"] == [ADMIN_SCOPE]
    assert roles["egs-service"]["services"] == ["egs"]
    # every user reaches the service and may make a token that only calls endpoints (narrowed by a
    # filter), through the role user, which JupyterHub 5.4 (Zero to JupyterHub 4.3's) honours too
    assert roles["user"]["scopes"] == sorted(["self", "access:services!service=egs", ENDPOINT_SCOPE])
    assert ENDPOINT_SCOPE in c.JupyterHub.custom_scopes and "extra_user_scopes" not in c.JupyterHub
    assert ADMIN_SCOPE in c.Spawner.server_token_scopes


def test_the_kubernetes_hub_and_the_embedded_default_share_their_roles_and_service_options(hub, tmp_path):
    kube, _ = hub
    embedded = Config()
    configure_hub(embedded, hub_env(tmp_path))

    def shared(c: Config) -> tuple:
        roles = sorted((r for r in c.JupyterHub.load_roles if r["name"] != "egs-prometheus"), key=lambda r: r["name"])
        (egs,) = [s for s in c.JupyterHub.services if s["name"] == "egs"]
        options = {k: egs[k] for k in ("display", "info", "oauth_no_confirm", "oauth_client_allowed_scopes")}
        return roles, options, c.JupyterHub.custom_scopes, c.Spawner.server_token_scopes

    assert shared(kube) == shared(embedded)


def test_admin_groups_from_the_values_hold_the_admin_role(render, tmp_path):
    docs = render(set_values=["egs.adminGroups={gpu-admins}"])
    c, _ = z2jh_config(docs)
    data = of_kind(docs, "ConfigMap", "egs-hub-config")["data"]
    configure_kube_hub(c, json.loads(data["egs_hub_settings.json"]))
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "egs-admin"]
    assert role["groups"] == ["egs-admins", "gpu-admins"]


HUB_CONFIG_ERRORS = {
    # (services, settings): want in the error
    "no egs service": ([], {"cluster": "home", "namespace": "egs"}, "hub.services.egs is not set"),
    "no token": ([{"name": "egs", "url": "http://egs:8080"}], {"cluster": "home", "namespace": "egs"}, "api_token"),
    "no settings": ([{"name": "egs", "url": "http://egs:8080", "api_token": "t"}], {}, "cluster, namespace"),
}


@pytest.mark.parametrize("services, settings, want", HUB_CONFIG_ERRORS.values(), ids=HUB_CONFIG_ERRORS.keys())
def test_an_incomplete_hub_config_says_what_is_missing(services, settings, want):
    c = Config()
    c.JupyterHub.services = services
    with pytest.raises(HubConfigError, match=want):
        configure_kube_hub(c, settings)


def test_in_namespace():
    assert in_namespace("http://egs:8080", "ml") == "http://egs.ml.svc:8080"
    assert in_namespace("http://egs", "ml") == "http://egs.ml.svc"
    assert in_namespace("http://egs.other.svc:8080", "ml") == "http://egs.other.svc:8080"
