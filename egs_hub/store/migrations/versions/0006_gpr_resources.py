"""GPRs made from GPR custom resources applied with kubectl

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 09:00:00

``gpr_resources`` links a GPR to the GpuProvisionRequest it was made from
(cluster, namespace, name, uid), so that a restarted service never makes a
second GPR of one resource. Existing GPRs came through the API and have none.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpr_resources",
        sa.Column("gpr_id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["gpr_id"], ["gprs.id"], name=op.f("fk_gpr_resources_gpr_id_gprs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("gpr_id", name=op.f("pk_gpr_resources")),
        sa.UniqueConstraint("uid", name=op.f("uq_gpr_resources_uid")),
    )
    with op.batch_alter_table("gpr_resources", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gpr_resources_cluster"), ["cluster"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("gpr_resources", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gpr_resources_cluster"))
    op.drop_table("gpr_resources")
