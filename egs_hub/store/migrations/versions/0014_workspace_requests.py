"""workspace requests: a user asks for a workspace in a project; its admins approve (the slice is made)
or deny it

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workspace_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("display_name", sa.String(length=100), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("members", sa.JSON(), nullable=False),
        sa.Column("quota", sa.JSON(), nullable=False),
        sa.Column("clusters", sa.JSON(), nullable=False),
        sa.Column("requested_by", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_by", sa.String(length=255), nullable=True),
        sa.Column("decided_at", sa.DateTime(), nullable=True),
        sa.Column("slice", sa.String(length=63), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace_requests")),
    )
    for column in ("project", "requested_by", "status"):
        op.create_index(op.f(f"ix_workspace_requests_{column}"), "workspace_requests", [column])


def downgrade() -> None:
    for column in ("status", "requested_by", "project"):
        op.drop_index(op.f(f"ix_workspace_requests_{column}"), table_name="workspace_requests")
    op.drop_table("workspace_requests")
