"""promises: the planner's estimates for queued GPRs, kept across restarts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 15:00:00

Starts empty: the first plan after the upgrade makes the promises.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "promises",
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("start", sa.DateTime(), nullable=True),
        sa.Column("end", sa.DateTime(), nullable=True),
        sa.Column("placement", sa.JSON(), nullable=True),
        sa.Column("band", sa.Integer(), nullable=False),
        sa.Column("first_start", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_promises_gpr_id_gprs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("gpr_id", name=op.f("pk_promises")),
    )


def downgrade() -> None:
    op.drop_table("promises")
