# Loaded last by `egs-hub up --config` in the end-to-end tests (hub and EGS service alike).
import os

# A hub service whose token the tests use as a hub and egs-hub admin. The EGS service reads this
# file too; only the hub's environment has the token.
token = os.environ.get("EGS_TEST_ADMIN_TOKEN")
if token:
    c.JupyterHub.services.append({"name": "test-admin", "api_token": token})  # noqa: F821
c.JupyterHub.load_roles.append(  # noqa: F821
    {
        "name": "test-admin",
        "scopes": [
            "admin:users",
            "admin:groups",
            "admin:servers",
            "admin:server_state",
            "tokens",
            "custom:egs:admin",
            "access:services",
            "list:users",
            "read:users",
            "read:services",
        ],
        "services": ["test-admin"],
    }
)
# Windows in the tests last seconds: reconcile often, and sample GPU metrics often (where a source is set).
c.EGSService.reconcile_interval = 0.2  # noqa: F821
c.EGSService.metrics_interval = 0.5  # noqa: F821
c.Spawner.start_timeout = 120  # noqa: F821
c.Spawner.http_timeout = 120  # noqa: F821
# The service tests run as root in CI, where egs-hub would give every member a system account: they run
# every member's code as the service's user instead, and their command endpoints with it (the isolation
# tests in tests/security make accounts, and remove them).
c.EGSService.isolation = "none"  # noqa: F821
c.EGSService.allow_unisolated_commands = True  # noqa: F821
# A hub group that holds a role (and so its scope): no slice may take it as its members' group, not even
# when an egs-hub admin names it (tests/security/test_slice_groups.py). JupyterHub creates the group.
c.JupyterHub.load_roles.append(  # noqa: F821
    {"name": "test-group-role", "scopes": ["read:users:name"], "groups": ["test-role-holders"]}
)
