"""Members' home volumes: the slice's PVCs as SliceKubeSpawner labels them, read through the real client."""

from __future__ import annotations

import pytest

from egs_hub.backends.kubernetes import ClusterUnavailable
from egs_hub.backends.kubernetes.volumes import HomeVolume


def claim(name: str, namespace: str, slice_name: str | None, user: str, *, bound: str | None = None, server="") -> dict:
    labels = {"component": "singleuser-storage"}
    if slice_name:
        labels["egs.io/slice"] = slice_name
    annotations = {"hub.jupyter.org/username": user}
    if server:
        annotations["hub.jupyter.org/servername"] = server
    body = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "standard",
        },
    }
    if bound:
        body["status"] = {"phase": "Bound", "capacity": {"storage": bound}}
    return body


async def test_the_slice_home_volumes_are_listed_by_namespace_and_user(cluster, make_backend):
    home = await cluster.add_namespace("team-a", slice="team-a")
    tools = await cluster.add_namespace("team-a-tools", slice="team-a")
    for body in (
        claim("claim-bob", home, "team-a", "bob"),
        claim("claim-alice", home, "team-a", "alice", bound="16Gi"),
        claim("claim-alice--gpu", tools, "team-a", "alice", server="gpu"),
        claim("claim-carol", home, "team-b", "carol"),  # another slice's
        claim("data", home, None, "alice"),  # no slice label: not a home volume egs-hub made
    ):
        await cluster.core.create_namespaced_persistent_volume_claim(body["metadata"]["namespace"], body)

    found = await make_backend().home_volumes("team-a", [home, tools])

    assert found == sorted(
        [
            HomeVolume("alice", "", home, "claim-alice", "16Gi", "standard", "Bound"),
            HomeVolume("bob", "", home, "claim-bob", "10Gi", "standard", None),
            HomeVolume("alice", "gpu", tools, "claim-alice--gpu", "10Gi", "standard", None),
        ],
        key=lambda v: (v.namespace, v.user, v.name),
    )


async def test_an_unreachable_cluster_is_named(emulator, cluster, make_backend):
    home = await cluster.add_namespace("team-a", slice="team-a")
    await emulator.set_outage(True)
    with pytest.raises(ClusterUnavailable, match=r"cluster emu: cannot list the home volumes of slice team-a"):
        await make_backend().home_volumes("team-a", [home])
    await emulator.set_outage(False)
