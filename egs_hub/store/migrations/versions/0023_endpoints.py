"""endpoints and endpoint_replicas: inference endpoints (core/endpoints.py) and the GPR of each replica

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27 09:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slice", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("runtime", sa.String(length=16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("wanted", sa.Integer(), nullable=False),
        sa.Column("hold_replicas", sa.Integer(), nullable=True),
        sa.Column("hold_until", sa.DateTime(), nullable=True),
        sa.Column("last_request", sa.DateTime(), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("refused_at", sa.DateTime(), nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["slice"], ["slices.name"], name=op.f("fk_endpoints_slice_slices")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoints")),
        sa.UniqueConstraint("slice", "name", name=op.f("uq_endpoints_slice")),
    )
    op.create_table(
        "endpoint_replicas",
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("endpoint_id", sa.Integer(), nullable=False),
        sa.Column("renews", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["endpoints.id"],
            name=op.f("fk_endpoint_replicas_endpoint_id_endpoints"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_endpoint_replicas_gpr_id_gprs")),
        sa.PrimaryKeyConstraint("gpr_id", name=op.f("pk_endpoint_replicas")),
    )
    op.create_index(op.f("ix_endpoint_replicas_endpoint_id"), "endpoint_replicas", ["endpoint_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_endpoint_replicas_endpoint_id"), table_name="endpoint_replicas")
    op.drop_table("endpoint_replicas")
    op.drop_table("endpoints")
