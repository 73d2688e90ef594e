# Loaded last by `egs-hub up --config` in the layout-target test: the test config, re-partitions that take
# seconds, and a target keeping two H100 machines in whole GPUs (inventory_sharing.yaml has one whole, one
# split into 1g.10gb instances and one time-sliced).
import os

load_subconfig(os.path.join(os.path.dirname(__file__), "hub_test_config.py"))  # noqa: F821
c.EGSService.repartition_seconds = 2  # noqa: F821
c.EGSService.layout_targets = [{"gpu_type": "H100-80GB", "mig": None, "nodes": 2}]  # noqa: F821
