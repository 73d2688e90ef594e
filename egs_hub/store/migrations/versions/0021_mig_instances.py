"""nodes.mig_profile: the MIG profile of a node's units (core/sharing.py); gpus.parent_uuid and
gpus.mig_profile: the GPU a MIG instance is part of, and its profile

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26 23:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("mig_profile", sa.String(length=32), nullable=True))
    op.add_column("gpus", sa.Column("parent_uuid", sa.String(length=96), nullable=True))
    op.add_column("gpus", sa.Column("mig_profile", sa.String(length=32), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE gpus DROP COLUMN mig_profile")
    op.execute("ALTER TABLE gpus DROP COLUMN parent_uuid")
    op.execute("ALTER TABLE nodes DROP COLUMN mig_profile")
