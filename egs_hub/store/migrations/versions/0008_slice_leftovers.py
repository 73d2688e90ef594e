"""slice_leftovers: what a slice had on a cluster that was not registered when it went

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22 18:00:00

Starts empty: before this revision such setups were forgotten (left on the cluster).
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slice_leftovers",
        sa.Column("slice", sa.String(length=63), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.PrimaryKeyConstraint("slice", "cluster", name=op.f("pk_slice_leftovers")),
    )


def downgrade() -> None:
    op.drop_table("slice_leftovers")
