"""maintenance_windows: a node out of service from start to end, which the planner plans around

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 10:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "maintenance_windows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("start", sa.DateTime(), nullable=False),
        sa.Column("end", sa.DateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_maintenance_windows")),
    )
    op.create_index("ix_maintenance_windows_cluster_node", "maintenance_windows", ["cluster", "node"])
    op.create_index(op.f("ix_maintenance_windows_end"), "maintenance_windows", ["end"])


def downgrade() -> None:
    op.drop_index(op.f("ix_maintenance_windows_end"), table_name="maintenance_windows")
    op.drop_index("ix_maintenance_windows_cluster_node", table_name="maintenance_windows")
    op.drop_table("maintenance_windows")
