"""Names egs-hub shares with JupyterHub's RBAC.

ADMIN_SCOPE: the custom scope that makes a hub user an egs-hub admin.
ADMIN_GROUP: the hub group whose members the embedded config grants ADMIN_SCOPE;
no slice may name it as its members' group.
SERVICE_NAME: the control plane's name as a JupyterHub service.
ENDPOINT_SCOPE: the custom scope of a token that calls inference endpoints and nothing else of the
service; every user holds it, a token narrows it with a filter (``!server=<slice>/<endpoint>``: that
endpoint; ``!group=<the slice's hub group>``: the slice's endpoints), and a caller must still be a member.
"""

ADMIN_SCOPE = "custom:egs:admin"
ADMIN_GROUP = "egs-admins"
SERVICE_NAME = "egs"
ENDPOINT_SCOPE = "custom:egs:endpoints"
