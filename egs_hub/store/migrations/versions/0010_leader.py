"""leader: which replica of the service plans, binds and serves, its term and URL

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 18:30:00

service/leadership.py writes the one row when a replica takes the lock; every write of the
service checks its term (the fence).
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leader",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("term", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("since", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leader")),
    )


def downgrade() -> None:
    op.drop_table("leader")
