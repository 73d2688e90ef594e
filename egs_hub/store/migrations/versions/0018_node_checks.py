"""check_runs: each check of a node's checklist at a GPR's entry or exit; clusters.checks: the
checklist (NULL: the default); nodes.quarantined_at and quarantine_reason: a node that failed its
exit checks, which the planner does not plan on; last_check_runs: the last run of each check of each
node

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26 13:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "check_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpr_id", sa.Integer(), nullable=True),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("phase", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_check_runs")),
    )
    op.create_index(op.f("ix_check_runs_gpr_id"), "check_runs", ["gpr_id"])
    op.create_index("ix_check_runs_cluster_node", "check_runs", ["cluster", "node"])
    op.add_column("clusters", sa.Column("checks", sa.JSON(), nullable=True))
    op.add_column("nodes", sa.Column("quarantined_at", sa.DateTime(), nullable=True))
    op.add_column("nodes", sa.Column("quarantine_reason", sa.Text(), nullable=True))
    op.create_table(
        "last_check_runs",
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("phase", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "node", "phase", "name", name=op.f("pk_last_check_runs")),
    )


def downgrade() -> None:
    op.execute("ALTER TABLE nodes DROP COLUMN quarantine_reason")
    op.execute("ALTER TABLE nodes DROP COLUMN quarantined_at")
    op.execute("ALTER TABLE clusters DROP COLUMN checks")
    op.drop_table("last_check_runs")
    op.drop_index("ix_check_runs_cluster_node", table_name="check_runs")
    op.drop_index(op.f("ix_check_runs_gpr_id"), table_name="check_runs")
    op.drop_table("check_runs")
