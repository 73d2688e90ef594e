# Loaded last by `egs-hub up --config` in the isolation tests (hub and EGS service alike): the test
# config, with every member's code run as their own system account, and their JupyterLab servers
# started with an interpreter those accounts can run ($EGS_TEST_MEMBER_PYTHON, accounts.member_python).
import os

load_subconfig(os.path.join(os.path.dirname(__file__), "..", "service", "hub_test_config.py"))  # noqa: F821
c.EGSService.isolation = "system-users"  # noqa: F821
c.EGSService.allow_unisolated_commands = False  # noqa: F821
if os.environ.get("EGS_TEST_MEMBER_PYTHON"):  # the hub's environment only
    c.Spawner.cmd = [os.environ["EGS_TEST_MEMBER_PYTHON"], "-m", "jupyterhub.singleuser"]  # noqa: F821
