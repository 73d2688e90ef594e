"""keyset indexes: events on (time, id), alerts on (raised_at, id)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 10:00:00

GET /events and GET /alerts page newest first on these keys (service/cursors.py); each
index replaces the one-column index on the time it starts with.
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_time")
        batch_op.create_index("ix_events_time_id", ["time", "id"], unique=False)
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_index("ix_alerts_raised_at")
        batch_op.create_index("ix_alerts_raised_at_id", ["raised_at", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_index("ix_alerts_raised_at_id")
        batch_op.create_index("ix_alerts_raised_at", ["raised_at"], unique=False)
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_time_id")
        batch_op.create_index("ix_events_time", ["time"], unique=False)
