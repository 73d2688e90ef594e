"""A kubeconfig for a slice's ServiceAccount on one cluster, with a short-lived token.

Vocabulary: the *endpoint* is the API server URL, its CA (PEM) and TLS options
as the backend's own client configuration sees them (so in-cluster it is the
in-cluster address: pass ``server`` to name the one people reach); the *token*
comes from the TokenRequest API (``serviceaccounts/<name>/token``), bound to the
ServiceAccount (deleting the slice revokes it) and valid ``expiration``
seconds. The kubeconfig has one context per namespace of the slice, the first
(home) namespace's current; what the token may do is the slice's RBAC
(slice_objects.py, roles.py).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .api import json_of
from .slice_objects import home_namespace, service_account_name

# The TokenRequest API refuses less than 10 minutes; clusters may cap the longest
# (--service-account-max-token-expiration) and answer with an earlier expiry.
MIN_EXPIRATION = 600
MAX_EXPIRATION = 7 * 24 * 3600
DEFAULT_EXPIRATION = 24 * 3600  # a slice kubeconfig's token, unless asked otherwise


class SliceNotSetUp(LookupError):
    """The slice has no ServiceAccount on the cluster (ensure_slice has not run there)."""


@dataclass(frozen=True)
class Endpoint:
    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None


@dataclass(frozen=True)
class SliceKubeconfig:
    text: str  # YAML
    expires_at: datetime


def endpoint_of(configuration: client.Configuration, server: str | None = None) -> Endpoint:
    """The endpoint of a loaded client configuration (the CA file it points at is read here)."""
    ca_pem = None
    if configuration.ssl_ca_cert:
        with open(configuration.ssl_ca_cert, "rb") as f:
            ca_pem = f.read()
    return Endpoint(
        server=server or configuration.host,
        ca_pem=ca_pem,
        insecure=not configuration.verify_ssl,
        tls_server_name=getattr(configuration, "tls_server_name", None),
    )


def check_expiration(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not MIN_EXPIRATION <= seconds <= MAX_EXPIRATION:
        raise ValueError(
            f"expiration must be a whole number of seconds from {MIN_EXPIRATION} (10 minutes) "
            f"to {MAX_EXPIRATION} (7 days), not {seconds!r}"
        )
    return seconds


def token_request(expiration: int) -> dict:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": check_expiration(expiration)},
    }


def kubeconfig_document(
    cluster: str, slice_name: str, namespaces: Sequence[str], endpoint: Endpoint, token: str
) -> dict:
    """The kubeconfig: one cluster, one user (the ServiceAccount's token), a context per namespace."""
    home = home_namespace(namespaces)
    entry: dict = {"server": endpoint.server}
    if endpoint.ca_pem is not None:
        entry["certificate-authority-data"] = base64.b64encode(endpoint.ca_pem).decode()
    if endpoint.insecure:
        entry["insecure-skip-tls-verify"] = True
    if endpoint.tls_server_name:
        entry["tls-server-name"] = endpoint.tls_server_name
    user = f"{service_account_name(slice_name)}@{cluster}"

    def context(namespace: str) -> str:
        return f"{slice_name}@{cluster}" if namespace == home else f"{slice_name}@{cluster}/{namespace}"

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": context(ns), "context": {"cluster": cluster, "user": user, "namespace": ns}} for ns in namespaces
        ],
        "current-context": context(home),
        "preferences": {},
    }


async def make_kubeconfig(
    api: client.ApiClient,
    cluster: str,
    slice_name: str,
    namespaces: Sequence[str],
    *,
    expiration: int = 3600,
    server: str | None = None,
    request_timeout: float = 10.0,
) -> SliceKubeconfig:
    """Ask the cluster for a token of the slice's ServiceAccount (set up by ensure_slice) and write the kubeconfig.

    ``server`` replaces the API server URL the backend uses (an in-cluster address, say) in the kubeconfig.
    """
    body = token_request(expiration)
    home = home_namespace(namespaces)
    account = service_account_name(slice_name)
    try:
        answer = await json_of(
            await client.CoreV1Api(api).create_namespaced_service_account_token(
                account, home, body, _preload_content=False, _request_timeout=request_timeout
            )
        )
    except ApiException as e:
        if e.status == 404:
            raise SliceNotSetUp(
                f"slice {slice_name} is not set up on cluster {cluster}: no ServiceAccount {account} in namespace "
                f"{home}; set the slice up there (ensure_slice) first"
            ) from None
        raise
    status = answer.get("status") or {}
    if not status.get("token") or not status.get("expirationTimestamp"):
        raise ValueError(f"cluster {cluster}: the TokenRequest answer has no token or expirationTimestamp")
    expires_at = datetime.fromisoformat(status["expirationTimestamp"].replace("Z", "+00:00"))
    document = kubeconfig_document(
        cluster, slice_name, namespaces, endpoint_of(api.configuration, server), status["token"]
    )
    return SliceKubeconfig(yaml.safe_dump(document, sort_keys=False), expires_at)
