"""slice policy: auto_gpr (the template a GPR is filed from when a server asks for GPUs the slice
lacks), home_volume_size and home_volume_class (each member's home volume on Kubernetes)

Slices made before this revision file nothing automatically and get 10Gi home volumes of the
cluster's default storage class, as new slices do.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 09:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

COLUMNS = ("auto_gpr", "home_volume_size", "home_volume_class")


def upgrade() -> None:
    # Plain ADD COLUMN: a batch copy of slices would drop the rows that refer to it (SQLite, foreign keys on).
    op.add_column("slices", sa.Column("auto_gpr", sa.String(length=63), nullable=True))
    op.add_column("slices", sa.Column("home_volume_size", sa.String(length=32), nullable=True, server_default="10Gi"))
    op.add_column("slices", sa.Column("home_volume_class", sa.String(length=253), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.execute(f"ALTER TABLE slices DROP COLUMN {column}")
