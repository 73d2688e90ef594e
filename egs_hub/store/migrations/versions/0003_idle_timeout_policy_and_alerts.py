"""slices: default and maximum idle timeout; alerts table

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 12:00:00

Existing slices get no idle timeout (GPRs are released idle only when they ask for it).
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idle_timeout_s", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("max_idle_timeout_s", sa.Integer(), nullable=True))
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=96), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("cluster", sa.String(length=63), nullable=True),
        sa.Column("slice", sa.String(length=63), nullable=True),
        sa.Column("gpr_id", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("raised_at", sa.DateTime(), nullable=False),
        sa.Column("cleared_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_alerts_gpr_id_gprs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alerts")),
    )
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_alerts_gpu_uuid"), ["gpu_uuid"], unique=False)
        batch_op.create_index(batch_op.f("ix_alerts_raised_at"), ["raised_at"], unique=False)
        batch_op.create_index("ix_alerts_slice_raised", ["slice", "raised_at"], unique=False)


def downgrade() -> None:
    op.drop_table("alerts")
    with op.batch_alter_table("slices", schema=None) as batch_op:
        batch_op.drop_column("max_idle_timeout_s")
        batch_op.drop_column("idle_timeout_s")
