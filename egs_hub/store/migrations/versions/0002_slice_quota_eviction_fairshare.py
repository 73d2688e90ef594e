"""slices: weekly GPU-hours, reject over limits, eviction, requeue of evicted GPRs, fair share

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 07:00:00

Existing slices get the defaults of core.model.SlicePolicy: no weekly limit, over-limit
GPRs wait for approval, evictions are confirmed by an admin, evicted GPRs are re-queued,
and the fair-share weight follows max_gpus.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_gpu_hours", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("reject_over_limits", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("eviction", sa.String(length=16), server_default="confirm", nullable=False))
        batch_op.add_column(sa.Column("requeue_evicted", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column("share", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("slices", schema=None) as batch_op:
        batch_op.drop_column("share")
        batch_op.drop_column("requeue_evicted")
        batch_op.drop_column("eviction")
        batch_op.drop_column("reject_over_limits")
        batch_op.drop_column("max_gpu_hours")
