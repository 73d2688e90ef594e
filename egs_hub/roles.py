"""Names egs-hub shares with JupyterHub's RBAC.

ADMIN_SCOPE: the custom scope that makes a hub user an egs-hub admin.
ADMIN_GROUP: the hub group whose members the embedded config grants ADMIN_SCOPE;
no slice may name it as its members' group.
SERVICE_NAME: the control plane's name as a JupyterHub service.
"""

ADMIN_SCOPE = "custom:egs:admin"
ADMIN_GROUP = "egs-admins"
SERVICE_NAME = "egs"
