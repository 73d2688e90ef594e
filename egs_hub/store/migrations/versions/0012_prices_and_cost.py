"""cost: prices per GPU-hour of a shape on a cluster, the price a GPR's window started at, the
utilisation readings of each GPR's GPUs per day, GPRs by window start (usage per period), and
a slice's monthly budget

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 07:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prices",
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("shape", sa.String(length=100), nullable=False),
        sa.Column("price_per_gpu_hour", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "shape", name=op.f("pk_prices")),
    )
    op.create_table(
        "gpr_utilization",
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.DateTime(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("readings", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["gpr_id"], ["gprs.id"], name=op.f("fk_gpr_utilization_gpr_id_gprs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("gpr_id", "day", name=op.f("pk_gpr_utilization")),
    )
    # Plain ALTER TABLEs, not batches: SQLite's batch copies a table and drops the old one, and
    # dropping gprs or slices would delete (cascade) or be refused for the rows that refer to them.
    op.add_column("gprs", sa.Column("price_per_gpu_hour", sa.Float(), nullable=True))
    op.create_index("ix_gprs_window_start", "gprs", ["window_start"])
    op.add_column("slices", sa.Column("max_cost_month", sa.Float(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE slices DROP COLUMN max_cost_month")
    op.drop_index("ix_gprs_window_start", table_name="gprs")
    op.execute("ALTER TABLE gprs DROP COLUMN price_per_gpu_hour")
    op.drop_table("gpr_utilization")
    op.drop_table("prices")
