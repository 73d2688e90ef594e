"""projects: a display name, the hub group of project admins, a quota over the project's slices and a
fair-share weight; the default project exists, holding what was made before projects

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 08:00:00
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs, not a batch: SQLite's batch copies the table and drops the old one, which the
    # slices' and clusters' foreign keys to it refuse.
    for column in (
        sa.Column("display_name", sa.String(length=100), server_default="", nullable=False),
        sa.Column("admin_group", sa.String(length=255), nullable=True),
        sa.Column("owns_group", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("max_gpus", sa.Integer(), nullable=True),
        sa.Column("max_gpu_hours", sa.Float(), nullable=True),
        sa.Column("max_cost_month", sa.Float(), nullable=True),
        sa.Column("share", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
    ):
        op.add_column("projects", column)
    projects = sa.table("projects", sa.column("name", sa.String), sa.column("created_at", sa.DateTime))
    found = op.get_bind().execute(sa.select(sa.func.count()).select_from(projects).where(projects.c.name == "default"))
    if not found.scalar():
        now = datetime.now(UTC).replace(tzinfo=None)
        op.bulk_insert(projects, [{"name": "default", "created_at": now}])


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN, not a batch (as in upgrade).
    for column in (
        "updated_at",
        "share",
        "max_cost_month",
        "max_gpu_hours",
        "max_gpus",
        "owns_group",
        "admin_group",
        "display_name",
    ):
        op.execute(f"ALTER TABLE projects DROP COLUMN {column}")
