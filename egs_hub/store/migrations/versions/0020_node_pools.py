"""node_pools: dynamic node pools of a cluster and what egs-hub asked of them; nodes.pool: the pool a
node joined from; nodes.idle_since: since when no GPR holds it

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26 16:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_pools",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("gpu_model", sa.String(length=64), nullable=False),
        sa.Column("gpu_memory_gb", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("min_nodes", sa.Integer(), nullable=False),
        sa.Column("max_nodes", sa.Integer(), nullable=False),
        sa.Column("scale_up_delay_s", sa.Integer(), nullable=False),
        sa.Column("scale_down_idle_s", sa.Integer(), nullable=False),
        sa.Column("provisioning_class", sa.String(length=100), nullable=False),
        sa.Column("target", sa.Integer(), nullable=False),
        sa.Column("asked_at", sa.DateTime(), nullable=True),
        sa.Column("retry_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_pools")),
        sa.UniqueConstraint("cluster", "name", name=op.f("uq_node_pools_cluster")),
    )
    op.add_column("nodes", sa.Column("pool", sa.String(length=63), nullable=True))
    op.add_column("nodes", sa.Column("idle_since", sa.DateTime(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE nodes DROP COLUMN idle_since")
    op.execute("ALTER TABLE nodes DROP COLUMN pool")
    op.drop_table("node_pools")
