"""Clusters held by a project (core.model.serves): the planner places a slice's GPRs only on clusters of
its project and on shared ones (the default project's), in plans, wait times and servability."""

from __future__ import annotations

import dataclasses

import pytest

from egs_hub.core import planner
from egs_hub.core.model import serves

from .builders import NOW, booking, gpus_of, node, req, snap, spec

SHARED_NODE = node("shared-1", 8, cluster="shared")
VISION_NODE = node("vision-1", 8, cluster="vision-gpus")
OWNERS = {"vision-gpus": "vision"}
PROJECTS = {"cv": "vision", "nlp": "default"}


def owned(snapshot, **more):
    return dataclasses.replace(snapshot, cluster_projects=OWNERS, projects=PROJECTS, **more)


@pytest.mark.parametrize(
    ("cluster", "project", "want"),
    [
        ("shared", "vision", True),
        ("shared", "default", True),
        ("vision-gpus", "vision", True),
        ("vision-gpus", "default", False),
        ("vision-gpus", "speech", False),
    ],
)
def test_serves(cluster, project, want):
    assert serves(OWNERS, cluster, project) is want


def test_a_project_cluster_serves_only_its_project_and_shared_clusters_serve_all():
    shared_busy = booking(1, gpus_of(SHARED_NODE), until=2, slice="nlp")
    snapshot = owned(
        snap(SHARED_NODE, VISION_NODE, bookings=[shared_busy]),
        queue=(req(10, slice="nlp", gpus=4), req(11, slice="cv", gpus=4)),
    )
    plan = planner.plan(snapshot, NOW)
    # nlp (default project) waits for the shared node though the vision cluster is free; cv starts there now.
    assert plan.estimates[10].placement.cluster == "shared" and plan.estimates[10].start > NOW
    assert plan.estimates[11].placement.cluster == "vision-gpus" and plan.estimates[11].start == NOW


def test_wait_times_list_only_the_clusters_that_serve_the_slice():
    snapshot = owned(snap(SHARED_NODE, VISION_NODE))
    clusters = lambda name: {o.cluster for o in planner.wait_times(snapshot, spec(slice=name, gpus=2), NOW)}  # noqa: E731
    assert clusters("nlp") == {"shared"}
    assert clusters("cv") == {"shared", "vision-gpus"}


def test_a_project_cluster_named_by_another_project_cannot_serve_it():
    nodes = (SHARED_NODE, VISION_NODE)
    asked = spec(slice="nlp", gpus=2, cluster="vision-gpus")
    reason = planner.unservable_reason(asked, nodes, frozenset(), OWNERS, "default")
    assert (
        reason == "no schedulable node offers any shape in cluster 'vision-gpus' on the clusters of project "
        "'default' or shared ones"
    )
    assert planner.unservable_reason(asked, nodes, frozenset(), OWNERS, "vision") is None
    assert planner.unservable_reason(asked, nodes, frozenset()) is None  # with every cluster shared
