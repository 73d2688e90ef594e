# Loaded last by `egs-hub up --config` in the re-partitioning test: the test config, and a re-partition
# that takes seconds, so that the test sees a node out of service and back in its new layout.
import os

load_subconfig(os.path.join(os.path.dirname(__file__), "hub_test_config.py"))  # noqa: F821
c.EGSService.repartition_seconds = 4  # noqa: F821
