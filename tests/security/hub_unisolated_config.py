# Loaded last by `egs-hub up --config` in the tests of isolation none without allowed commands: the
# test config (isolation none, commands allowed for the service tests), with commands refused again.
import os

load_subconfig(os.path.join(os.path.dirname(__file__), "..", "service", "hub_test_config.py"))  # noqa: F821
c.EGSService.isolation = "none"  # noqa: F821
c.EGSService.allow_unisolated_commands = False  # noqa: F821
