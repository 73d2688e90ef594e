"""What JupyterHub needs to know of egs-hub, wherever the hub runs: scopes, roles, the service's options.

Vocabulary: the *admin scope* (``custom:egs:admin``) makes a hub user an egs-hub
admin; the *endpoint scope* (``custom:egs:endpoints``) lets a token call the
inference endpoints of its owner's slices and nothing else of the service, every
user holds it so that anyone may make such a token (narrowed with ``!server=`` or
``!group=``); the *egs-admin role* grants the admin scope to the hub's admin users and to the
``egs-admins`` group; the *egs-service role* is what the control plane itself
may do in the hub; the *service options* are the keys of the ``egs`` entry of
``c.JupyterHub.services`` that do not depend on where the service runs (its
URL and token do).

Both hub configurations use these, so they cannot drift apart: the embedded
default (``egs_hub/embedded.py::configure_hub``) and the Kubernetes hub
(``egs_hub/kube_hub.py``, loaded by ``hub_config/egs_hub.py`` in the chart).
"""

from __future__ import annotations

from collections.abc import Iterable

from .roles import ADMIN_GROUP, ADMIN_SCOPE, ENDPOINT_SCOPE, SERVICE_NAME

SERVICE_API_PATH = f"/services/{SERVICE_NAME}/api/v1/"

# A server's $JUPYTERHUB_API_TOKEN: JupyterHub's `server` role (activity, access to itself)
# plus access to the EGS service, where the server's extension (egs_hub.lab) acts as its
# owner; the service reads the owner's groups (slice membership) with the token, as every
# token may read its owner's name and groups. An admin's server also holds the admin scope
# (a token gets only the scopes its owner holds), as the portal does for an admin.
SERVER_TOKEN_SCOPES = (
    "users:activity!user",
    "access:servers!server",
    f"access:services!service={SERVICE_NAME}",
    ADMIN_SCOPE,
)

# What the control plane does in the hub: create groups (slices) and users (members), restart
# servers, list users, and pass its own OAuth check.
SERVICE_SCOPES = (
    "admin:groups",
    "admin:users",
    "admin:servers",
    "list:users",
    f"access:services!service={SERVICE_NAME}",
)

USER_SCOPES = (f"access:services!service={SERVICE_NAME}", ENDPOINT_SCOPE)  # every user's, in the role ``user``

SERVICE_OPTIONS = {
    "display": True,
    "info": {"description": "Ask for GPUs, see when you get them, manage workspaces"},
    # Logging in to the portal is not a grant to confirm: the service is part of the hub.
    "oauth_no_confirm": True,
    # An admin's OAuth token for the portal carries the admin scope (when its owner holds it).
    "oauth_client_allowed_scopes": [ADMIN_SCOPE],
}


def configure_roles(c, admin_users: Iterable[str], admin_groups: Iterable[str] = ()) -> None:
    """The admin and endpoint scopes, the egs-admin and egs-service roles, and every user's access to the
    service and the endpoint scope.

    egs-admin goes to ``admin_users`` and to the members of the hub groups ``egs-admins`` and
    ``admin_groups``. Roles of the same name already in ``c.JupyterHub.load_roles`` are replaced;
    others are kept (Zero to JupyterHub puts its idle culler's there)."""
    c.JupyterHub.custom_scopes = {
        **dict(c.JupyterHub.get("custom_scopes") or {}),
        ADMIN_SCOPE: {"description": "Administer egs-hub: slices, members, approvals, priorities."},
        ENDPOINT_SCOPE: {
            "description": "Call the inference endpoints of your workspaces, and nothing else of egs-hub. "
            "!server=<workspace>/<endpoint>: that endpoint; !group=<workspace's group>: its endpoints.",
        },
    }
    # Every user reaches the service, and holds the endpoint scope unfiltered so that a token may ask for
    # it with any filter (a token's scopes must be held by its owner); the service still calls endpoints
    # for members only. Through the default role ``user``, which JupyterHub 5 and 6 both let a config
    # redefine (``extra_user_scopes`` is JupyterHub 6's only: 5.4, in Zero to JupyterHub 4.3, ignores it).
    user_role = next((r for r in (c.JupyterHub.get("load_roles") or []) if r.get("name") == "user"), {})
    user_scopes = sorted({"self", *user_role.get("scopes", ()), *USER_SCOPES})
    ours = [
        {**user_role, "name": "user", "scopes": user_scopes},
        {
            "name": "egs-admin",
            "description": "egs-hub administrators",
            "scopes": [ADMIN_SCOPE],
            "users": sorted(admin_users),
            "groups": sorted({ADMIN_GROUP, *admin_groups}),
        },
        {
            "name": "egs-service",
            "description": "what the egs-hub control plane does in the hub",
            "scopes": list(SERVICE_SCOPES),
            "services": [SERVICE_NAME],
        },
    ]
    names = {role["name"] for role in ours}
    kept = [role for role in (c.JupyterHub.get("load_roles") or []) if role.get("name") not in names]
    c.JupyterHub.load_roles = [*kept, *ours]
    c.Spawner.server_token_scopes = list(SERVER_TOKEN_SCOPES)


def service_entry(url: str, api_token: str, **more) -> dict:
    """The ``egs`` entry of ``c.JupyterHub.services``: where it listens, its token, and the service options."""
    return {"name": SERVICE_NAME, **SERVICE_OPTIONS, "url": url, "api_token": api_token, **more}
