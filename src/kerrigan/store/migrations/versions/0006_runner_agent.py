"""runner agent: workflow run ids, CPU sets, withdraw and cancel requests, queue-wait spent, host health

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("workflow_run_id", sa.BigInteger(), nullable=True))

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cpus", sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column("queue_wait_s", sa.Float(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("queue_wait_observed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("withdraw_requested_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))

    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.drop_column("health")

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("cancel_requested_at")
        batch_op.drop_column("withdraw_requested_at")
        batch_op.drop_column("queue_wait_observed_at")
        batch_op.drop_column("queue_wait_s")
        batch_op.drop_column("cpus")

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("workflow_run_id")
