"""layout_changes: changes of a node's MIG layout (core/layouts.py), pending until the backend has
made them, then done or failed

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27 05:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "layout_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("mig", sa.JSON(), nullable=True),
        sa.Column("mig_config", sa.String(length=63), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("ready_by", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_layout_changes")),
    )
    op.create_index("ix_layout_changes_cluster_node", "layout_changes", ["cluster", "node"])
    op.create_index(op.f("ix_layout_changes_state"), "layout_changes", ["state"])


def downgrade() -> None:
    op.drop_index(op.f("ix_layout_changes_state"), table_name="layout_changes")
    op.drop_index("ix_layout_changes_cluster_node", table_name="layout_changes")
    op.drop_table("layout_changes")
