"""clusters registered through the API (kubeconfig and context, or in-cluster); whole nodes

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 09:00:00

A cluster registered with POST /clusters keeps how to reach it, so the service
connects to it again at every start until it is removed. ``nodes.whole`` marks a
node bound to one GPR at a time (Kubernetes). Existing clusters are not
registered (the local host and clusters from config) and existing nodes are
bound per GPU, as before.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("registered", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("kubeconfig", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("context", sa.String(length=253), nullable=True))
        batch_op.add_column(sa.Column("in_cluster", sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("whole", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("whole")
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.drop_column("in_cluster")
        batch_op.drop_column("context")
        batch_op.drop_column("kubeconfig")
        batch_op.drop_column("registered")
