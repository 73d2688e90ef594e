"""LocalBackend: inventory from NVML (a pynvml double) or declared, and binding by server restarts.

Servers are played by ``RecordingServers``, a ServerControl that records every
restart and answers per server: running, not running, or failing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from egs_hub.backends import BindError, LayoutChangeError, ServerRef, UnbindError
from egs_hub.backends.local import LocalBackend
from egs_hub.backends.local.declared import InventoryError
from egs_hub.core.model import GPR, Shape, SlicePolicy, Status

from ..core.builders import NOW, gpr
from ..nvml_double import FakeNVML, a100, h100, h100_mig

HOST = "gpu-host"
NO_DRIVER = FakeNVML(init_error="NVML Shared Library Not Found")


@dataclass
class RecordingServers:
    """A ServerControl double: ``running`` servers restart (True), others are not running
    (False), ``failing`` ones raise; every call is recorded as (user, name)."""

    running: set[tuple[str, str]] = field(default_factory=set)
    failing: dict[tuple[str, str], str] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def restart_server(self, user: str, name: str) -> bool:
        self.calls.append((user, name))
        if (user, name) in self.failing:
            raise RuntimeError(self.failing[user, name])
        return (user, name) in self.running


def backend(nvml: FakeNVML = NO_DRIVER, servers: RecordingServers | None = None, **kwargs) -> LocalBackend:
    return LocalBackend(servers or RecordingServers(), host=HOST, nvml=nvml, **kwargs)


def provisioning(*gpus: str) -> GPR:
    """GPR 7 of slice "team", being provisioned with ``gpus``."""
    return dataclasses.replace(gpr(Status.PROVISIONING), bound_gpus=gpus)


def server(user: str, name: str = "", *gpus: str) -> ServerRef:
    return ServerRef(user=user, name=name, gpus=gpus)


# --- discover ------------------------------------------------------------------------------


async def test_without_nvml_discover_uses_the_built_in_declared_inventory():
    local = backend()

    found = await local.discover()

    assert [(n.name, n.shape, n.declared) for n in found.nodes] == [("declared-node", Shape("H100", 80, 4), True)]
    assert len(found.gpus) == 4 and all(g.declared for g in found.gpus)
    assert found.source.startswith("declared in the built-in declared inventory")
    assert "NVML unavailable (NVML Shared Library Not Found)" in found.source
    assert local.uses_nvml is False


async def test_without_nvml_discover_uses_the_inventory_file(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("nodes:\n  - {name: lab-1, model: A100, memory_gb: 40, gpus: 2}\n")

    found = await backend(inventory_file=str(path)).discover()

    assert [(n.name, n.shape, n.declared) for n in found.nodes] == [("lab-1", Shape("A100", 40, 2), True)]
    assert found.source.startswith(f"declared in {path};")


async def test_a_bad_inventory_file_fails_discover_naming_the_field(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text("nodes:\n  - {name: lab-1, model: A100, memory_gb: 40, gpus: 0}\n")

    with pytest.raises(InventoryError, match=rf"{path}: nodes\[0\]\.gpus"):
        await backend(inventory_file=str(path)).discover()


async def test_nvml_finding_no_gpu_falls_back_to_declared():
    local = backend(FakeNVML([]))

    found = await local.discover()

    assert found.source.endswith("NVML found 0 GPU(s)")
    assert all(n.declared for n in found.nodes)
    assert local.uses_nvml is False


@dataclass(frozen=True)
class NVMLCase:
    nvml: FakeNVML
    want_nodes: list[tuple[str, Shape, tuple[int, ...]]]  # (name, shape, GPU indexes) per node


NVML_CASES = {
    "one kind of GPU: the node is the host": NVMLCase(
        FakeNVML([h100(i) for i in range(4)]), want_nodes=[(HOST, Shape("H100", 80, 4), (0, 1, 2, 3))]
    ),
    "bytes answers": NVMLCase(
        FakeNVML([h100(0), h100(1)], as_bytes=True), want_nodes=[(HOST, Shape("H100", 80, 2), (0, 1))]
    ),
    "two kinds: one node per kind": NVMLCase(
        FakeNVML([h100(0), a100(0), h100(1), a100(1), a100(2)]),
        want_nodes=[
            (f"{HOST}-a100-40gb", Shape("A100", 40, 3), (1, 3, 4)),
            (f"{HOST}-h100-80gb", Shape("H100", 80, 2), (0, 2)),
        ],
    ),
    "MIG instances: one node per profile, beside the whole GPUs": NVMLCase(
        FakeNVML([h100(0), h100_mig(1, ("3g.40gb", "1g.10gb", "1g.10gb")), h100_mig(2, ("1g.10gb",))]),
        want_nodes=[
            (HOST, Shape("H100", 80, 1), (0,)),
            (f"{HOST}:3g.40gb", Shape("H100", 80, 1, "3g.40gb"), (1,)),
            (f"{HOST}:1g.10gb", Shape("H100", 80, 3, "1g.10gb"), (2, 3, 4)),
        ],
    ),
}


@pytest.mark.parametrize("case", NVML_CASES.values(), ids=NVML_CASES.keys())
async def test_discover_from_nvml(tmp_path, case: NVMLCase):
    ignored = tmp_path / "inventory.yaml"
    ignored.write_text("nodes:\n  - {name: lab-1, model: A100, memory_gb: 40, gpus: 2}\n")
    local = backend(case.nvml, inventory_file=str(ignored))

    found = await local.discover()

    assert found.source == "nvml"
    assert local.uses_nvml is True
    by_uuid = {g.uuid: g for g in found.gpus}
    got = [(n.name, n.shape, tuple(by_uuid[u].index for u in n.gpus)) for n in found.nodes]
    assert sorted(got) == sorted(case.want_nodes)
    for node in found.nodes:
        assert not node.declared and node.cluster == "local"
        assert all(by_uuid[u].node == node.name for u in node.gpus)
    assert not any(g.declared for g in found.gpus)
    devices = case.nvml.devices  # a GPU in MIG mode is found as its instances
    units = [d.uuid for d in devices if not d.mig_enabled] + [m.uuid for d in devices for m in d.mig_devices if m]
    assert sorted(by_uuid) == sorted(units)
    assert case.nvml.inits == case.nvml.shutdowns
    # each instance by its GPU and GPU instance id, as the DCGM exporter names it (metrics/prometheus.py)
    assert local.mig_instances == {
        (d.uuid, m.gpu_instance_id): m.uuid for d in devices if d.mig_enabled for m in d.mig_devices if m
    }


# --- bind ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BindCase:
    restart_servers: bool
    servers: list[ServerRef]
    running: set[tuple[str, str]]
    want_calls: list[tuple[str, str]]  # restarts asked of the hub, in order
    want_events: list[tuple[str, str, str]]  # (kind, user, server) per event
    failing: dict[tuple[str, str], str] = field(default_factory=dict)  # restarts that raise


ALICE, BOB = server("alice"), server("bob", "gpu")
BIND_CASES = {
    "no servers: nothing to do": BindCase(True, [], set(), want_calls=[], want_events=[]),
    "policy restarts running servers": BindCase(
        True,
        [ALICE, BOB],
        {("alice", ""), ("bob", "gpu")},
        want_calls=[("alice", ""), ("bob", "gpu")],
        want_events=[("server-restarted", "alice", ""), ("server-restarted", "bob", "gpu")],
    ),
    "a server that stopped meanwhile gets no event": BindCase(
        True,
        [ALICE, BOB],
        {("bob", "gpu")},
        want_calls=[("alice", ""), ("bob", "gpu")],
        want_events=[("server-restarted", "bob", "gpu")],
    ),
    "a failed restart is reported and binding goes on": BindCase(
        True,
        [ALICE, BOB],
        {("alice", ""), ("bob", "gpu")},
        failing={("alice", ""): "hub unreachable"},
        want_calls=[("alice", ""), ("bob", "gpu")],
        want_events=[("restart-failed", "alice", ""), ("server-restarted", "bob", "gpu")],
    ),
    "policy off: owners are told to restart": BindCase(
        False,
        [ALICE, BOB],
        {("alice", ""), ("bob", "gpu")},
        want_calls=[],
        want_events=[("restart-to-use-gpus", "alice", ""), ("restart-to-use-gpus", "bob", "gpu")],
    ),
}


@pytest.mark.parametrize("case", BIND_CASES.values(), ids=BIND_CASES.keys())
async def test_bind(case: BindCase):
    servers = RecordingServers(running=case.running, failing=case.failing)
    local = backend(servers=servers)
    await local.discover()
    policy = SlicePolicy(restart_servers=case.restart_servers)

    events = await local.bind(provisioning("declared-gpu"), policy, case.servers, NOW)

    assert servers.calls == case.want_calls
    assert [(e.kind, e.data["user"], e.data["server"]) for e in events] == case.want_events
    for event in events:
        assert (event.gpr_id, event.slice, event.actor, event.time) == (7, "team", "local-backend", NOW)
        assert event.reason


async def test_bind_checks_nvml_still_sees_the_gpus():
    nvml = FakeNVML([h100(i) for i in range(4)])
    local = backend(nvml)
    await local.discover()
    bound = provisioning(h100(1).uuid, h100(3).uuid)

    assert await local.bind(bound, SlicePolicy(), [], NOW) == []

    nvml.devices = [h100(0), h100(1), h100(2)]  # GPU 3 fell off the bus
    with pytest.raises(BindError, match=f"NVML no longer sees GPU\\(s\\) {h100(3).uuid}$") as failed:
        await local.bind(bound, SlicePolicy(), [ALICE], NOW)
    assert failed.value.nodes == bound.bound_nodes
    assert nvml.inits == nvml.shutdowns == 3


async def test_bind_on_declared_gpus_does_not_ask_nvml():
    nvml = FakeNVML([])
    local = backend(nvml)
    await local.discover()

    await local.bind(provisioning("GPU-declared"), SlicePolicy(), [], NOW)

    assert nvml.inits == 1  # discover only


# --- unbind --------------------------------------------------------------------------------


async def test_unbind_restarts_holders_and_records_those_running():
    servers = RecordingServers(running={("bob", "gpu")})
    holders = [server("alice", "", "g0"), server("bob", "gpu", "g1")]

    events = await backend(servers=servers).unbind(provisioning("g0", "g1"), holders, NOW)

    assert servers.calls == [("alice", ""), ("bob", "gpu")]
    assert [(e.kind, e.data, e.gpr_id, e.actor) for e in events] == [
        ("server-restarted", {"user": "bob", "server": "gpu"}, 7, "local-backend")
    ]


async def test_unbind_without_holders_does_nothing():
    servers = RecordingServers()

    assert await backend(servers=servers).unbind(provisioning("g0"), [], NOW) == []
    assert servers.calls == []


@pytest.mark.parametrize(
    ("failing", "want"),
    [
        (("alice", ""), "could not restart alice's server '' without GPR 7's GPUs: hub said 503"),
        (("bob", "gpu"), "could not restart bob's server 'gpu' without GPR 7's GPUs: hub said 503"),
    ],
    ids=["default server", "named server"],
)
async def test_unbind_failure_raises_unbind_error_naming_the_server(failing, want):
    servers = RecordingServers(running={("alice", ""), ("bob", "gpu")}, failing={failing: "hub said 503"})
    holders = [server("alice", "", "g0"), server("bob", "gpu", "g1")]

    with pytest.raises(UnbindError) as raised:
        await backend(servers=servers).unbind(provisioning("g0", "g1"), holders, NOW)

    assert str(raised.value) == want
    assert servers.calls[-1] == failing  # stops at the failure; the reconcile loop retries all


# --- MIG layouts ---------------------------------------------------------------------------


async def test_a_declared_node_is_split_at_once_and_keeps_its_layout_when_made_again(tmp_path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("nodes:\n  - {name: lab-1, model: H100, memory_gb: 80, gpus: 2}\n")
    local = backend(inventory_file=str(inventory))
    assert [n.name for n in (await local.discover()).nodes] == ["lab-1"]

    config, said = await local.change_layout("lab-1", {"3g.40gb": 2}, "all-3g.40gb")
    assert config is None and "2 x 3g.40gb per GPU" in said
    found = await local.discover()
    assert [(n.name, n.shape) for n in found.nodes] == [("lab-1:3g.40gb", Shape("H100", 80, 4, "3g.40gb"))]
    assert await local.layout_state("lab-1", None) == ("done", "the declared node lab-1 is in its new layout")

    again = backend(inventory_file=str(inventory), layouts=local.layouts)  # the service, restarted
    assert [n.name for n in (await again.discover()).nodes] == ["lab-1:3g.40gb"]
    await again.change_layout("lab-1", None, "all-disabled")
    assert [(n.name, n.shape) for n in (await again.discover()).nodes] == [("lab-1", Shape("H100", 80, 2))]


async def test_gpus_found_by_nvml_are_re_partitioned_and_the_next_discovery_finds_the_instances():
    nvml = FakeNVML([h100(0), h100(1)])
    local = backend(nvml)
    assert [n.name for n in (await local.discover()).nodes] == [HOST]

    config, said = await local.change_layout(HOST, {"3g.40gb": 2}, "all-3g.40gb")
    assert config is None
    assert said.startswith(f"the GPUs of node {HOST} were re-partitioned into 2 x 3g.40gb per GPU through NVML")
    found = await local.discover()
    assert [(n.name, n.shape) for n in found.nodes] == [(f"{HOST}:3g.40gb", Shape("H100", 80, 4, "3g.40gb"))]
    instances = [(d.uuid, m.gpu_instance_id) for d in nvml.devices for m in d.mig_devices]
    assert len(instances) == 4 and sorted(local.mig_instances) == sorted(instances)
    assert (await local.layout_state(HOST, None))[0] == "done"

    await local.change_layout(HOST, None, "all-disabled")
    assert [(n.name, n.shape) for n in (await local.discover()).nodes] == [(HOST, Shape("H100", 80, 2))]
    assert local.layouts == {}  # nothing declared


async def test_nvml_refusing_a_change_is_a_layout_change_error_and_changes_nothing():
    nvml = FakeNVML([h100(0)], permitted=False)
    local = backend(nvml)
    await local.discover()

    with pytest.raises(LayoutChangeError, match=r"needs root \(or CAP_SYS_ADMIN\).*; nothing was changed$"):
        await local.change_layout(HOST, {"1g.10gb": 7}, "all-1g.10gb")
    assert [n.name for n in (await local.discover()).nodes] == [HOST]


async def test_a_machine_of_one_kind_on_a_host_of_two_changes_only_its_gpus():
    nvml = FakeNVML([h100(0), a100(0)])
    local = backend(nvml)
    assert sorted(n.name for n in (await local.discover()).nodes) == [f"{HOST}-a100-40gb", f"{HOST}-h100-80gb"]

    await local.change_layout(f"{HOST}-h100-80gb", {"1g.10gb": 7}, "all-1g.10gb")

    assert [(d.mig_enabled, len(d.mig_devices)) for d in nvml.devices] == [(True, 7), (False, 0)]
