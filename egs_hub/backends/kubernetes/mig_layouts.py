"""Changing a node's MIG layout through the GPU Operator's mig-manager (core/layouts.py).

The mig-manager re-partitions a node's GPUs into the mig-parted config named by its label
``nvidia.com/mig.config``, and says how it went in ``nvidia.com/mig.config.state``: pending or
rebooting while it works (the node is not schedulable then: nodes.py), success or failed. The
configs are named in the cluster's mig-parted ConfigMap: the GPU Operator's default ones
egs-hub names itself (core/layouts.default_mig_config), any other the admin names.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...core.layouts import describe
from .. import LayoutChangeError
from .nodes import MIG_CAPABLE_LABEL, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, REPARTITIONING


def _labels(obj: Mapping) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def mig_config(node: str, obj: Mapping, mig: Mapping[str, int] | None, config: str | None) -> str:
    """``config``, the mig-parted config to label ``node`` (its object ``obj``) with for ``mig``, when
    the mig-manager can apply it now. LayoutChangeError when the node has no mig-manager, is being
    re-partitioned, or no config was named (no default config gives ``mig``: core/layouts.py)."""
    labels = _labels(obj)
    if labels.get(MIG_CAPABLE_LABEL) != "true":
        raise LayoutChangeError(
            f"node {node} is not labelled {MIG_CAPABLE_LABEL}=true: the GPU Operator's mig-manager does not "
            "re-partition its GPUs"
        )
    state = labels.get(MIG_CONFIG_STATE_LABEL)
    if state in REPARTITIONING:
        raise LayoutChangeError(
            f"node {node} is being re-partitioned already ({MIG_CONFIG_STATE_LABEL}={state}); ask when it is done"
        )
    if config is None:
        raise LayoutChangeError(
            f"no default mig-parted config gives {describe(mig)}: name the config of the cluster's mig-parted "
            "ConfigMap that does (mig_config)"
        )
    return config


def layout_patch(config: str) -> dict:
    """The node patch that asks the mig-manager for ``config``; the state it said of the config before
    goes (until it says pending, the change has not started)."""
    return {"metadata": {"labels": {MIG_CONFIG_LABEL: config, MIG_CONFIG_STATE_LABEL: None}}}


def change_state(node: str, obj: Mapping | None, config: str | None) -> tuple[str, str]:
    """How the change of ``node`` to ``config`` goes, from its object (None: the node is gone)."""
    if obj is None:
        return "failed", f"node {node} no longer exists"
    labels = _labels(obj)
    now, state = labels.get(MIG_CONFIG_LABEL), labels.get(MIG_CONFIG_STATE_LABEL)
    if now != config:
        return "failed", f"node {node}'s {MIG_CONFIG_LABEL} is {now!r} now, not {config!r}: it was changed since"
    if state == "success":
        return "done", f"the mig-manager applied {config} ({MIG_CONFIG_STATE_LABEL}=success)"
    if state == "failed":
        return "failed", f"the mig-manager could not apply {config} ({MIG_CONFIG_STATE_LABEL}=failed); see its logs"
    return "pending", f"the mig-manager is applying {config} ({MIG_CONFIG_STATE_LABEL}={state or 'not set yet'})"
