"""GPU sharing (core/sharing.py): nodes.mig_profile and nodes.replicas: the MIG profile of a node's
units, or the shares its time-sliced GPUs are split into; gpus.parent_uuid and gpus.mig_profile: the GPU
a MIG instance or share is part of, and the instance's profile; gprs.gpu_share: a share of a GPU asked
for; slices.gpu_sharing: the slice's members may ask for shares

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
    op.add_column("nodes", sa.Column("replicas", sa.Integer(), server_default="1", nullable=False))
    op.add_column("gprs", sa.Column("gpu_share", sa.Float(), nullable=True))
    op.add_column("slices", sa.Column("gpu_sharing", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    op.execute("ALTER TABLE slices DROP COLUMN gpu_sharing")
    op.execute("ALTER TABLE gprs DROP COLUMN gpu_share")
    op.execute("ALTER TABLE nodes DROP COLUMN replicas")
    op.execute("ALTER TABLE gpus DROP COLUMN mig_profile")
    op.execute("ALTER TABLE gpus DROP COLUMN parent_uuid")
    op.execute("ALTER TABLE nodes DROP COLUMN mig_profile")
