"""The hub's configuration on Kubernetes, inside Zero to JupyterHub's hub pod (charts/egs-hub).

Vocabulary: *settings* are what the chart renders from its values into
``egs_hub_settings.json`` beside ``hub_config/egs_hub.py``: ``cluster`` (this
cluster's name in egs-hub), ``namespace`` (the release's), ``admin_groups``
(hub groups whose members are egs-hub admins besides ``egs-admins``, e.g. groups
an OAuth authenticator brings from the identity provider); the *egs entry* is the service that
Zero to JupyterHub put into ``c.JupyterHub.services`` from ``hub.services.egs``
(its ``url`` and the ``api_token`` from the hub's Secret).

``configure_kube_hub`` runs after Zero to JupyterHub's own configuration (from
``hub.extraConfig``), so ``c.Authenticator.admin_users`` and the egs entry
are already there; it adds what egs-hub needs: SliceKubeSpawner, the service's
options, scopes and roles (``hub_settings``, shared with the embedded default).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from .hub_settings import SERVICE_API_PATH, SERVICE_OPTIONS, configure_roles
from .roles import SERVICE_NAME

SETTINGS = ("cluster", "namespace")


class HubConfigError(Exception):
    """The hub's egs-hub configuration is incomplete; the message names what is missing."""


def egs_entry(services: list) -> dict:
    """The egs entry of ``c.JupyterHub.services``, which must have its url and token."""
    found = [s for s in services if s.get("name") == SERVICE_NAME]
    if not found:
        raise HubConfigError(
            f"hub.services.{SERVICE_NAME} is not set: the chart's values define the egs service "
            "(jupyterhub.hub.services.egs.url)"
        )
    (entry,) = found
    for key in ("url", "api_token"):
        if not entry.get(key):
            raise HubConfigError(f"hub.services.{SERVICE_NAME}.{key} is empty: the hub cannot reach the egs service")
    return entry


def in_namespace(url: str, namespace: str) -> str:
    """The Service URL ``http://egs:8080`` as pods in other namespaces reach it: ``http://egs.<ns>.svc:8080``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if "." in host:  # already qualified
        return url
    netloc = f"{host}.{namespace}.svc" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def configure_kube_hub(c, settings: Mapping) -> None:
    """Add egs-hub to Zero to JupyterHub's hub config ``c``, given the chart's ``settings``."""
    missing = [key for key in SETTINGS if not settings.get(key)]
    if missing:
        raise HubConfigError(f"settings.json lacks {', '.join(missing)}: render it with the egs-hub chart")
    entry = egs_entry(c.JupyterHub.services)
    entry.update(SERVICE_OPTIONS)
    url = entry["url"].rstrip("/")

    c.JupyterHub.spawner_class = "egs_hub.spawners.SliceKubeSpawner"
    c.SliceKubeSpawner.egs_cluster = settings["cluster"]
    c.SliceKubeSpawner.egs_api_url = url + SERVICE_API_PATH
    c.SliceKubeSpawner.egs_api_token = entry["api_token"]
    # Servers run in their slices' namespaces, not the hub's: they reach the service by its full name.
    c.SliceKubeSpawner.egs_pod_api_url = in_namespace(url, settings["namespace"]) + SERVICE_API_PATH
    # Land on the hub home after login instead of starting a server before any GPUs are bound.
    c.JupyterHub.redirect_to_server = False
    configure_roles(c, c.Authenticator.get("admin_users") or (), settings.get("admin_groups") or ())
