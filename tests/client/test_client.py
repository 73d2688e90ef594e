"""EGSClient against a real egs-hub: every operation, typed answers, and the service's errors."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest

from egs_hub.client import (
    GPR,
    CapacityPlan,
    ClusterPrices,
    EGSClient,
    EGSError,
    Project,
    QueuedGPR,
    Slice,
    Template,
    UsageReport,
    WorkspaceRequest,
)

from ..service.hub import wait_for
from .helpers import until_status


def is_aware(value: datetime) -> bool:
    return isinstance(value, datetime) and value.utcoffset() == timedelta(0)


def test_health_and_openapi_need_no_token(hub):
    with EGSClient(hub.api) as anonymous:
        health = anonymous.health()
        assert (health.status, health.database) == ("ok", "ok")
        assert health.version and health.role == "leader" and health.leader is None
        document = anonymous.openapi()
    assert document["openapi"] == "3.1.0" and "/gprs" in document["paths"]


def test_slices_are_created_changed_and_deleted_with_their_members(admin, member):
    alice, as_alice = member("alice")
    bob, _ = member("bob")
    name = "c-crud"
    created = admin.create_slice(
        name,
        display_name="Team CRUD",
        quota={"max_gpus": 8, "max_gpu_hours": 100},
        policy={"max_duration": timedelta(hours=4), "max_priority": 200, "idle_timeout": "30m"},
        members=[alice],
    )
    assert isinstance(created, Slice) and created.display_name == "Team CRUD" and created.group == name
    assert created.members == (alice,) and created.quota.max_gpus == 8 and created.quota.max_gpu_hours == 100
    assert created.policy.max_duration == timedelta(hours=4) and created.policy.idle_timeout == timedelta(minutes=30)
    assert created.policy.max_priority == 200 and created.policy.max_idle_timeout is None
    assert is_aware(created.created_at) and created.usage.fair_share_factor == 1.0
    assert created.name == name and created.model_dump(mode="json")["policy"]["max_duration"] == 4 * 3600

    assert [s.name for s in as_alice.slices()] == [name]
    assert as_alice.slice(name).policy == created.policy

    changed = admin.update_slice(name, display_name="Renamed", policy={"max_duration": timedelta(hours=1)})
    assert changed.display_name == "Renamed" and changed.policy.max_duration == timedelta(hours=1)
    assert changed.policy.max_priority == 200  # a policy key left out keeps its value

    assert admin.add_member(name, bob).members == tuple(sorted((alice, bob)))
    assert admin.remove_member(name, alice).members == (bob,)
    with pytest.raises(EGSError) as refused:
        as_alice.slice(name)
    assert refused.value.status == 404 and "no slice named 'c-crud'" in str(refused.value)  # as if it did not exist

    assert admin.delete_slice(name) is None
    with pytest.raises(EGSError) as gone:
        admin.slice(name)
    assert (gone.value.status, str(gone.value)) == (404, "no slice named 'c-crud'")


def test_inventory_and_schedule(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    inventory = as_alice.inventory()
    assert (inventory.gpus, inventory.free) == (20, 20)
    assert {(s.name, s.gpus) for s in inventory.shapes} == {("H100-80GB x8", 16), ("A100-40GB x4", 4)}
    (cluster,) = inventory.clusters
    assert sorted(n.name for n in cluster.nodes) == ["a100-a", "h100-a", "h100-b"]
    assert all(g.slice is None and g.healthy for n in cluster.nodes for g in n.gpus)

    gpr = until_status(as_alice, as_alice.create_gpr(team, "10m", gpus=2, shape="A100").id, "provisioned")
    now = datetime.now(UTC)
    schedule = as_alice.schedule(start=now - timedelta(hours=1), end=now + timedelta(hours=1))
    assert is_aware(schedule.start) and schedule.end - schedule.start == timedelta(hours=2)
    (window,) = [w for n in schedule.nodes for w in n.windows if w.gpr == gpr.id]
    assert (window.slice, window.state, window.gpu_count) == (team, "current", 2)
    assert set(window.gpus) == set(gpr.bound_gpus) and window.end == gpr.window_end
    assert admin.inventory().free == 18


def test_a_gpr_from_wait_times_to_release(member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    answer = as_alice.wait_times(team, timedelta(hours=1), gpus=2)
    assert answer.needs_approval == ()
    assert {(o.cluster, o.shape.name) for o in answer.options} == {("local", "H100-80GB x8"), ("local", "A100-40GB x4")}
    assert all(o.wait == timedelta(0) and is_aware(o.estimated_start) and o.gpus == 2 for o in answer.options)

    start_after = datetime.now(UTC) - timedelta(seconds=5)
    gpr = as_alice.create_gpr(
        team, timedelta(minutes=30), gpus=2, shape="H100", name="train", idle_timeout="20m", start_after=start_after
    )
    assert isinstance(gpr, GPR) and gpr.slice == team and gpr.requested_by == alice and gpr.name == "train"
    assert gpr.duration == timedelta(minutes=30) and gpr.idle_timeout == timedelta(minutes=20)
    assert gpr.priority == 101 and gpr.preemptible and gpr.status in ("queued", "provisioning", "provisioned")
    assert abs(gpr.start_after - start_after) < timedelta(seconds=1)

    running = until_status(as_alice, gpr.id, "provisioned")
    assert len(running.bound_gpus) == 2 and running.gpu_count == 2 and len(running.bound_nodes) == 1
    assert running.window_end - running.window_start == timedelta(minutes=30)
    assert [g.id for g in as_alice.gprs(slice=team)] == [gpr.id]
    assert [g.id for g in as_alice.gprs(status="provisioned")] == [gpr.id]
    assert as_alice.gprs(slice=team, status="queued") == []

    released = as_alice.release_gpr(gpr.id, "done early")
    assert released.status in ("releasing", "complete") and released.end_reason == "released-early"
    done = until_status(as_alice, gpr.id, "complete")
    assert is_aware(done.ended_at)
    kinds = [(e.kind, e.actor) for e in as_alice.events(gpr=gpr.id)]
    assert kinds[0] == ("submitted", alice) and ("released-early", alice) in kinds and kinds[-1][0] == "complete"
    (latest,) = as_alice.events(slice=team, limit=1)
    assert latest.kind == "complete" and latest.gpr == gpr.id and is_aware(latest.time)
    assert as_alice.events(gpr=gpr.id, since=datetime.now(UTC) + timedelta(hours=1)) == []


def test_templates_are_listed_used_changed_and_deleted(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    name = f"tpl-{team}"
    made = admin.create_template(
        name, "2h", gpus=2, shape="H100", idle_timeout=timedelta(minutes=20), slice=team, description="two H100s"
    )
    assert isinstance(made, Template) and made.scope == f"slice {team}" and made.duration == timedelta(hours=2)
    assert made.idle_timeout == timedelta(minutes=20) and made.priority is None and is_aware(made.created_at)
    assert [t.name for t in as_alice.templates(slice=team)] == [name]
    assert as_alice.template(name) == made

    options = as_alice.wait_times(team, template=name).options
    assert {(o.shape.name, o.gpus) for o in options} == {("H100-80GB x8", 2)}
    later = datetime.now(UTC) + timedelta(days=1)
    gpr = as_alice.create_gpr(team, template=name, duration="1h", start_after=later)
    assert (gpr.template, gpr.gpus, gpr.shape, gpr.duration) == (name, 2, "H100", timedelta(hours=1))
    as_alice.cancel_gpr(gpr.id)

    changed = admin.update_template(name, nodes=1, description="")
    assert (changed.gpus, changed.nodes) == (None, 1)
    with pytest.raises(EGSError) as refused:
        as_alice.update_template(name, gpus=1)
    assert refused.value.status == 403
    assert admin.delete_template(name) is None
    with pytest.raises(EGSError) as refused:
        as_alice.create_gpr(team, template=name)
    assert (refused.value.status, refused.value.field) == (422, "template")


def test_prices_cost_and_usage(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    set_ = admin.set_prices("local", {"H100-80GB x8": 2.0})
    assert isinstance(set_, ClusterPrices) and as_alice.prices("local").prices == {"H100-80GB x8": 2.0}
    try:
        (option,) = as_alice.wait_times(team, "30m", gpus=2, shape="H100").options
        assert (option.cost_per_hour, option.estimated_cost) == (4.0, 2.0)
        gpr = as_alice.create_gpr(team, "30m", gpus=2, shape="H100")
        running = until_status(as_alice, gpr.id, "provisioned")
        assert (running.price_per_gpu_hour, running.reserved_cost) == (2.0, 2.0)
        as_alice.release_gpr(gpr.id)
        until_status(as_alice, gpr.id, "complete")
        report = as_alice.usage(group_by="user", period="week")
        assert isinstance(report, UsageReport) and is_aware(report.since)
        (row,) = [r for r in report.rows if r.key == alice]
        assert row.gpu_hours_reserved == 1.0 and row.cost is not None and row.cost < 1.0
        with pytest.raises(EGSError) as refused:
            as_alice.set_prices("local", {})
        assert refused.value.status == 403
    finally:
        admin.set_prices("local", {})


def test_queue_edit_and_cancel(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)  # max_active_gprs 1: a second GPR waits for the first
    first = until_status(as_alice, as_alice.create_gpr(team, "10m", gpus=1, shape="A100").id, "provisioned")
    second = as_alice.create_gpr(team, "10m", gpus=1, shape="A100", priority=50)
    assert second.status == "queued" and second.queue_position == 1 and second.estimated_start == first.window_end

    (queued,) = [q for q in as_alice.queue() if q.id == second.id]
    assert isinstance(queued, QueuedGPR) and queued.band == "low" and 0 < queued.fair_share_factor < 1
    assert queued.estimated_start == first.window_end

    edited = as_alice.update_gpr(second.id, duration=timedelta(minutes=5), gpus=2)
    assert (edited.duration, edited.gpus, edited.status) == (timedelta(minutes=5), 2, "queued")
    assert admin.update_gpr(second.id, priority=250).priority == 250
    with pytest.raises(EGSError) as refused:
        as_alice.update_gpr(second.id, gpus=1, nodes=1)
    assert (refused.value.status, refused.value.field) == (400, "gpus")
    assert str(refused.value) == "give either gpus or nodes, not both"

    cancelled = as_alice.cancel_gpr(second.id, "not needed")
    assert cancelled.status == "cancelled" and cancelled.status_reason == "not needed"
    with pytest.raises(EGSError) as holds:
        as_alice.cancel_gpr(first.id)
    assert holds.value.status == 409 and "release it with POST" in str(holds.value)


def test_admins_approve_and_deny(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice, policy={"auto_approve_max_gpus": 1})
    waiting = as_alice.create_gpr(team, "5m", gpus=2, shape="H100")
    denied = as_alice.create_gpr(team, "5m", gpus=2, shape="H100")
    assert waiting.status == denied.status == "pending-approval"
    assert "over the auto-approval limit of 1" in waiting.status_reason

    with pytest.raises(EGSError) as refused:
        as_alice.approve_gpr(waiting.id)
    assert refused.value.status == 403 and "custom:egs:admin" in str(refused.value)
    assert admin.deny_gpr(denied.id, "too many").status == "rejected"
    assert admin.approve_gpr(waiting.id, "fine").status in ("queued", "provisioning", "provisioned")
    until_status(as_alice, waiting.id, "provisioned")


def test_an_admin_confirms_a_proposed_eviction(admin, member, make_slice):
    alice, as_alice = member("alice")
    low = make_slice(alice)
    high = make_slice(alice, policy={"eviction": "confirm"})
    asked = as_alice.create_gpr(low, "10m", gpus=4, shape="A100", priority=50)
    victim = until_status(as_alice, asked.id, "provisioned")
    urgent = as_alice.create_gpr(high, "30s", gpus=4, shape="A100", priority=250)

    (proposal,) = [e for e in admin.evictions() if e.gpr_id == urgent.id]
    assert [(v.id, v.slice, v.gpus, v.status) for v in proposal.victims] == [(victim.id, low, 4, "provisioned")]
    assert proposal.victims[0].window_end == victim.window_end and not proposal.automatic
    with pytest.raises(EGSError) as stale:
        admin.confirm_eviction(urgent.id, [victim.id, urgent.id])
    assert stale.value.status == 409 and f"is now GPRs {victim.id}," in str(stale.value)

    done = admin.confirm_eviction(urgent.id, [victim.id])
    assert done.gpr_id == urgent.id and [v.status for v in done.victims] == ["releasing"]
    until_status(as_alice, urgent.id, "provisioned")


def test_gpus_metrics_workloads_alerts_without_a_metric_source(hub, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    assert as_alice.gpus().gpus == ()  # a member sees the GPUs bound to their slices only
    gpr = until_status(as_alice, as_alice.create_gpr(team, "10m", gpus=2, shape="A100").id, "provisioned")

    answer = as_alice.gpus(sort="temperature")
    assert answer.source.name is None and answer.source.error and answer.source.interval == timedelta(seconds=0.5)
    assert sorted(g.uuid for g in answer.gpus) == sorted(gpr.bound_gpus)
    assert all(g.slice == team and g.gpr == gpr.id and g.sample is None and g.model for g in answer.gpus)

    series = as_alice.gpu_metrics(gpr.bound_gpus[0], step=timedelta(minutes=1))
    assert series.uuid == gpr.bound_gpus[0] and series.step == timedelta(minutes=1) and series.points == ()
    assert is_aware(series.since)

    assert as_alice.workloads(slice=team).workloads == ()  # no server and no source: nothing seen running
    assert as_alice.alerts(slice=team, active=True).alerts == ()

    with pytest.raises(EGSError) as unknown:
        as_alice.gpu_metrics("GPU-not-here")
    assert unknown.value.status == 404 and "GPU 'GPU-not-here'" in str(unknown.value)
    with pytest.raises(EGSError) as bad_sort:
        as_alice.gpus(sort="speed")
    assert (bad_sort.value.status, bad_sort.value.field) == (400, "sort")


def test_servers_register_and_forget(hub, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    gpr = until_status(as_alice, as_alice.create_gpr(team, "10m", gpus=1, shape="A100").id, "provisioned")
    registered = as_alice.register_server(alice, "gpu", slice=team)
    assert (registered.user, registered.server, registered.slice) == (alice, "gpu", team)
    assert registered.gpus == gpr.bound_gpus and registered.gprs == (gpr.id,)
    (server,) = as_alice.servers(slice=team)
    assert (server.user, server.server, server.gpus) == (alice, "gpu", gpr.bound_gpus) and is_aware(server.started_at)
    (workload,) = as_alice.workloads(slice=team).workloads
    assert (workload.kind, workload.name, workload.user) == ("server", f"{alice}/gpu", alice)
    assert workload.gpus == gpr.bound_gpus and workload.utilization is None and workload.hottest_gpu is None
    assert as_alice.forget_server(alice, "gpu") is None
    assert as_alice.servers(slice=team) == []
    with pytest.raises(EGSError) as not_running:  # a registration is not a running hub server
        as_alice.restart_server(alice, "gpu")
    assert (not_running.value.status, str(not_running.value)) == (404, f"no running server 'gpu' of {alice}")


def test_errors_carry_the_service_message_and_field(hub, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice, policy={"max_priority": 150})
    with pytest.raises(EGSError) as malformed:
        as_alice.create_gpr(team, "2 hours", gpus=2)
    error = malformed.value
    assert (error.status, error.field) == (400, "duration")
    assert str(error) == error.message and "'2 hours' is not a duration" in error.message
    with pytest.raises(EGSError) as policy:
        as_alice.create_gpr(team, "1h", gpus=1, priority=250)
    assert (policy.value.status, policy.value.field) == (422, "priority")
    assert "above this slice's max_priority 150" in str(policy.value)
    with pytest.raises(EGSError) as unknown:
        as_alice.gpr(999999)
    assert (unknown.value.status, str(unknown.value), unknown.value.field) == (404, "no GPR with id 999999", None)


def test_a_bad_token_is_refused_with_the_service_message(hub):
    with EGSClient(hub.api, "not-a-token") as stranger, pytest.raises(EGSError) as refused:
        stranger.slices()
    assert refused.value.status == 401 and str(refused.value).startswith("not logged in")


def test_an_address_that_is_not_the_api_says_so(hub):
    with EGSClient(hub.url + "/nothing/here/") as lost, pytest.raises(EGSError) as error:
        lost.slices()
    # The proxy sends unknown paths to the hub, which redirects; the client follows no redirects.
    assert error.value.status == 302
    assert str(error.value) == f"GET {hub.url}/nothing/here/slices answered 302 without JSON; is it the EGS API v1 URL?"


def test_projects_and_workspace_requests(admin, member):
    bob, as_bob = member("bob")
    _, as_alice = member("alice")
    name = f"cp-{secrets.token_hex(3)}"
    made = admin.create_project(name, display_name="Client project", quota={"max_gpus": 4})
    assert isinstance(made, Project) and made.quota.max_gpus == 4 and made.admin_group == f"{name}-admins"
    assert admin.add_project_admin(name, bob).admins == (bob,)
    assert [p.name for p in as_bob.projects()] == [name]
    assert admin.update_project(name, share=2).share == 2.0

    team = f"cw-{secrets.token_hex(3)}"
    asked = as_alice.request_workspace(team, project=name, purpose="a study", quota={"max_gpus": 2})
    assert isinstance(asked, WorkspaceRequest) and asked.status == "pending" and is_aware(asked.created_at)
    assert [r.id for r in as_bob.workspace_requests(status="pending")] == [asked.id]
    approved = as_bob.approve_workspace_request(asked.id, reason="go", quota={"max_gpus": 1})
    assert (approved.status, approved.slice) == ("approved", team)
    assert as_alice.slice(team).quota.max_gpus == 1 and as_alice.workspace_request(asked.id).decided_by == bob
    again = as_alice.request_workspace(f"{team}-2", project=name)
    assert as_bob.deny_workspace_request(again.id, "no").status == "denied"

    admin.delete_slice(team)
    assert admin.remove_project_admin(name, bob).admins == ()
    assert admin.delete_project(name) is None


def test_an_admin_plans_capacity_from_history(admin, member, make_slice):
    alice, as_alice = member("alice")
    team = make_slice(alice)
    as_alice.create_gpr(team, timedelta(hours=1), gpus=8)
    started = admin.plan_capacity(timedelta(days=1), add_nodes={"H100": 1})
    assert isinstance(started, CapacityPlan) and started.status == "running"
    assert started.since == timedelta(days=1) and started.add_nodes[0].count == 1

    def finished() -> CapacityPlan | None:
        plan = admin.capacity_plan(started.id)
        return plan if plan.status != "running" else None

    done = wait_for(finished, 120, "the capacity plan to finish")
    assert done.status == "done" and done.result is not None, done.error
    assert done.result.changed.capacity_gpus == done.result.current.capacity_gpus + 8
    assert admin.capacity_plans()[0].id == started.id
    with pytest.raises(EGSError) as refused:
        admin.plan_capacity(add_nodes={"B200": 1})
    assert refused.value.status == 400 and refused.value.field == "add_nodes"


def test_any_operation_is_called_by_its_operation_id(member, make_slice):
    """call() reaches every operation the service declares, with no method of its own: path parameters and
    query arguments by name, the body as JSON, the answer read into the declared model."""
    bob, as_bob = member("bob")
    team = make_slice(bob)
    later = datetime.now(UTC) + timedelta(hours=2)  # queued until then
    made = as_bob.call("post_gprs", {"slice": team, "gpus": 1, "duration": "10m", "start_after": later})
    assert isinstance(made, GPR) and made.slice == team and made.status == "queued"
    assert as_bob.call("get_gprs_id", id=made.id) == as_bob.gpr(made.id)
    page = as_bob.call("get_gprs", slice=team, limit=1)
    assert [g.id for g in page.gprs] == [made.id]
    assert as_bob.call("delete_gprs_id", {"reason": "by id"}, id=made.id).status == "cancelled"
    assert as_bob.call("get_openapi_json")["paths"]["/gprs"]["post"]["operationId"] == "post_gprs"
    with pytest.raises(ValueError, match="get_gprs_id needs its path parameters id"):
        as_bob.call("get_gprs_id")
    with pytest.raises(ValueError, match="no operation 'get_gpr'"):
        as_bob.call("get_gpr", id=1)
