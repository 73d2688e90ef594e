"""slices: what happens when a GPR's nodes fail their pre-checks; gprs: nodes to avoid;
clusters: node selector and exit grace of registered clusters

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 15:00:00

``slices.bind_failure``: "fail" (what every GPR met before this revision) or "move" (queued
again, away from the nodes that failed). ``gprs.avoid_nodes``: the ``[cluster, node]`` pairs
that failed a GPR's pre-checks; existing GPRs avoid none. ``clusters.node_selector`` and
``clusters.exit_grace_s``: settings of a cluster registered through the API; NULL (clusters
registered before) means the defaults (``egs.io/slice``, 5 minutes).
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("slices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("bind_failure", sa.String(length=16), server_default="fail", nullable=False))
    with op.batch_alter_table("gprs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("avoid_nodes", sa.JSON(), server_default="[]", nullable=False))
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("node_selector", sa.String(length=1000), nullable=True))
        batch_op.add_column(sa.Column("exit_grace_s", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.drop_column("exit_grace_s")
        batch_op.drop_column("node_selector")
    with op.batch_alter_table("gprs", schema=None) as batch_op:
        batch_op.drop_column("avoid_nodes")
    with op.batch_alter_table("slices", schema=None) as batch_op:
        batch_op.drop_column("bind_failure")
