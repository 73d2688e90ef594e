"""GPR templates: named GPR shapes for everyone, a project or a slice; a GPR keeps the template it was asked from

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 06:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpr_templates",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=True),
        sa.Column("slice", sa.String(length=63), nullable=True),
        sa.Column("cluster", sa.String(length=100), nullable=True),
        sa.Column("shape", sa.String(length=100), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=True),
        sa.Column("duration_s", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("idle_timeout_s", sa.Integer(), nullable=True),
        sa.Column("preemptible", sa.Boolean(), nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_gpr_templates")),
    )
    op.create_index(op.f("ix_gpr_templates_project"), "gpr_templates", ["project"])
    op.create_index(op.f("ix_gpr_templates_slice"), "gpr_templates", ["slice"])
    # Plain ALTER TABLEs, not batches: SQLite's batch copies the table and drops the old one, and
    # dropping gprs would delete (cascade) or be refused for the rows that refer to it.
    op.add_column("gprs", sa.Column("template", sa.String(length=63), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE gprs DROP COLUMN template")
    op.drop_index(op.f("ix_gpr_templates_slice"), table_name="gpr_templates")
    op.drop_index(op.f("ix_gpr_templates_project"), table_name="gpr_templates")
    op.drop_table("gpr_templates")
