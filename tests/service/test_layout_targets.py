"""Layout targets end to end (issue 23): a real egs-hub keeps two H100 machines in whole GPUs
(hub_layout_targets_config.py) on a declared inventory with one whole machine, one split into 1g.10gb
instances and one time-sliced; and a target its machines' GPUs cannot hold is refused at start."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from egs_hub.service.app import EGSService

from .hub import sqlite_hub, wait_for


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with sqlite_hub(
        tmp_path_factory.mktemp("hub-layout-targets"),
        inventory="inventory_sharing.yaml",
        config="hub_layout_targets_config.py",
    ) as running:
        yield running


def test_a_free_machine_is_re_partitioned_toward_the_target(hub):
    admin = hub.admin()
    done = wait_for(
        lambda: (c := admin.get("nodes/local/mig-a/layout", expect=200)["changes"]) and c[0]["state"] == "done" and c,
        60,
        "mig-a's change to whole GPUs to be done",
    )
    (change,) = done
    assert change["layout"] == "whole GPUs" and change["created_by"] == "layouts"
    assert change["reason"] == "layout target: keep 2 H100-80GB machine(s) in whole GPUs"
    assert admin.get("nodes/local/mig-a/layout", expect=200)["mig"] is None
    for untouched in ("h100-a", "shared-a"):  # counts toward the target already; time-sliced
        assert admin.get(f"nodes/local/{untouched}/layout", expect=200)["changes"] == []
    events = admin.get("events", params={"limit": 500}, expect=200)["events"]
    started = [(e["actor"], e["data"]["node"]) for e in events if e["kind"] == "layout-change-started"]
    assert started == [("layouts", "mig-a")]


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"gpu_type": "H100-80GB", "mig": {"3g.40gb": 3}, "nodes": 1}, "mig"),
        ({"gpu_type": "H100", "nodes": 1}, "gpu_type"),
        ({"gpu_type": "H100-80GB", "nodes": -1}, "nodes"),
        ({"gpu_type": "H100-80GB", "nodes": 1, "layout": {}}, "layout"),
    ],
)
def test_a_target_that_cannot_be_kept_is_refused_naming_its_field(target, field):
    with pytest.raises(TraitError, match=rf"layout_targets\[0\]\.{field}"):
        EGSService(layout_targets=[target])
