"""slices.remediation: what becomes of a provisioned GPR when one of its GPUs fails (replace, notify,
off; existing slices replace); slices.maintenance_crossing: what becomes of a GPR whose window runs
past a maintenance on its node (ask, shorten, move; existing slices ask, as before); gprs.replaced:
the nodes replaced during a GPR's window

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("slices", sa.Column("remediation", sa.String(length=16), nullable=False, server_default="replace"))
    op.add_column(
        "slices", sa.Column("maintenance_crossing", sa.String(length=16), nullable=False, server_default="ask")
    )
    op.add_column("gprs", sa.Column("replaced", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    op.execute("ALTER TABLE gprs DROP COLUMN replaced")
    op.execute("ALTER TABLE slices DROP COLUMN maintenance_crossing")
    op.execute("ALTER TABLE slices DROP COLUMN remediation")
