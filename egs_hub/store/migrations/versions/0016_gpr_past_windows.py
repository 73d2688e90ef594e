"""gpr_past_windows: the window an evicted GPR held before it was queued again, so that usage, cost
and budgets count it (before this revision a re-queued GPR's first window was forgotten)

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpr_past_windows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("window_start", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=False),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("price_per_gpu_hour", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["gpr_id"], ["gprs.id"], name=op.f("fk_gpr_past_windows_gpr_id_gprs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpr_past_windows")),
    )
    op.create_index(op.f("ix_gpr_past_windows_gpr_id"), "gpr_past_windows", ["gpr_id"])
    op.create_index(op.f("ix_gpr_past_windows_window_start"), "gpr_past_windows", ["window_start"])


def downgrade() -> None:
    op.drop_index(op.f("ix_gpr_past_windows_window_start"), table_name="gpr_past_windows")
    op.drop_index(op.f("ix_gpr_past_windows_gpr_id"), table_name="gpr_past_windows")
    op.drop_table("gpr_past_windows")
