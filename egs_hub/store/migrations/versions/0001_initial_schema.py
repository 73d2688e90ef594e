"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 05:05:12.559554
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gprs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("slice", sa.String(length=63), nullable=False),
        sa.Column("requested_by", sa.String(length=255), nullable=False),
        sa.Column("cluster", sa.String(length=100), nullable=True),
        sa.Column("shape", sa.String(length=100), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Integer(), nullable=False),
        sa.Column("start_after", sa.DateTime(), nullable=True),
        sa.Column("idle_timeout_s", sa.Integer(), nullable=True),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("window_start", sa.DateTime(), nullable=True),
        sa.Column("window_end", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("end_reason", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gprs")),
    )
    with op.batch_alter_table("gprs", schema=None) as batch_op:
        batch_op.create_index("ix_gprs_status_slice", ["status", "slice"], unique=False)

    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
    )
    op.create_table(
        "servers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("server_name", sa.String(length=255), nullable=False),
        sa.Column("slice", sa.String(length=63), nullable=False),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_servers")),
        sa.UniqueConstraint("user", "server_name", name=op.f("uq_servers_user")),
    )
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_servers_slice"), ["slice"], unique=False)

    op.create_table(
        "clusters",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name=op.f("fk_clusters_project_id_projects")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clusters")),
        sa.UniqueConstraint("name", name=op.f("uq_clusters_name")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("time", sa.DateTime(), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("gpr_id", sa.Integer(), nullable=True),
        sa.Column("slice", sa.String(length=63), nullable=True),
        sa.Column("from_status", sa.String(length=32), nullable=True),
        sa.Column("to_status", sa.String(length=32), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_events_gpr_id_gprs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_gpr_id"), ["gpr_id"], unique=False)
        batch_op.create_index("ix_events_slice_time", ["slice", "time"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_time"), ["time"], unique=False)

    op.create_table(
        "slices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("display_name", sa.String(length=100), nullable=False),
        sa.Column("group_name", sa.String(length=255), nullable=False),
        sa.Column("owns_group", sa.Boolean(), nullable=False),
        sa.Column("max_gpus", sa.Integer(), nullable=True),
        sa.Column("max_duration_s", sa.Integer(), nullable=True),
        sa.Column("max_priority", sa.Integer(), nullable=False),
        sa.Column("auto_approve_max_gpus", sa.Integer(), nullable=True),
        sa.Column("max_active_gprs", sa.Integer(), nullable=False),
        sa.Column("restart_servers", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name=op.f("fk_slices_project_id_projects")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slices")),
        sa.UniqueConstraint("name", name=op.f("uq_slices_name")),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("gpu_model", sa.String(length=64), nullable=False),
        sa.Column("gpu_memory_gb", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("schedulable", sa.Boolean(), nullable=False),
        sa.Column("declared", sa.Boolean(), nullable=False),
        sa.Column("present", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_nodes_cluster_id_clusters"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("cluster_id", "name", name=op.f("uq_nodes_cluster_id")),
    )
    op.create_table(
        "slice_namespaces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slice_id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.ForeignKeyConstraint(
            ["slice_id"], ["slices.id"], name=op.f("fk_slice_namespaces_slice_id_slices"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slice_namespaces")),
        sa.UniqueConstraint("cluster", "namespace", name=op.f("uq_slice_namespaces_cluster")),
    )
    with op.batch_alter_table("slice_namespaces", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_slice_namespaces_slice_id"), ["slice_id"], unique=False)

    op.create_table(
        "gpus",
        sa.Column("uuid", sa.String(length=96), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("product", sa.String(length=128), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("declared", sa.Boolean(), nullable=False),
        sa.Column("healthy", sa.Boolean(), nullable=False),
        sa.Column("present", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name=op.f("fk_gpus_node_id_nodes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("uuid", name=op.f("pk_gpus")),
    )
    with op.batch_alter_table("gpus", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gpus_node_id"), ["node_id"], unique=False)

    op.create_table(
        "allocations",
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_allocations_gpr_id_gprs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["gpu_uuid"], ["gpus.uuid"], name=op.f("fk_allocations_gpu_uuid_gpus")),
        sa.PrimaryKeyConstraint("gpr_id", "gpu_uuid", name=op.f("pk_allocations")),
    )
    op.create_table(
        "bindings",
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("slice", sa.String(length=63), nullable=False),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_bindings_gpr_id_gprs")),
        sa.ForeignKeyConstraint(["gpu_uuid"], ["gpus.uuid"], name=op.f("fk_bindings_gpu_uuid_gpus")),
        sa.PrimaryKeyConstraint("gpu_uuid", name=op.f("pk_bindings")),
    )
    with op.batch_alter_table("bindings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bindings_gpr_id"), ["gpr_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_bindings_slice"), ["slice"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("bindings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bindings_slice"))
        batch_op.drop_index(batch_op.f("ix_bindings_gpr_id"))

    op.drop_table("bindings")
    op.drop_table("allocations")
    with op.batch_alter_table("gpus", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gpus_node_id"))

    op.drop_table("gpus")
    with op.batch_alter_table("slice_namespaces", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_slice_namespaces_slice_id"))

    op.drop_table("slice_namespaces")
    op.drop_table("nodes")
    op.drop_table("slices")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_time"))
        batch_op.drop_index("ix_events_slice_time")
        batch_op.drop_index(batch_op.f("ix_events_gpr_id"))

    op.drop_table("events")
    op.drop_table("clusters")
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_servers_slice"))

    op.drop_table("servers")
    op.drop_table("projects")
    with op.batch_alter_table("gprs", schema=None) as batch_op:
        batch_op.drop_index("ix_gprs_status_slice")

    op.drop_table("gprs")
