"""a device's health, who set its state and until when; a runner host's pause

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Devices start with unknown health: nothing is known of them until a check or a failure says.
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("state_by", sa.String(length=100), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("state_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("health", sa.String(length=16), nullable=False, server_default="unknown")
        )
        batch_op.add_column(
            sa.Column("health_reason", sa.String(length=500), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("health_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("health_job_pk", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("infrastructure_failures", sa.Integer(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("paused_reason", sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column("paused_by", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("paused_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        for column in ("paused_until", "paused_at", "paused_by", "paused_reason"):
            batch_op.drop_column(column)
    with op.batch_alter_table("devices", schema=None) as batch_op:
        for column in (
            "infrastructure_failures",
            "health_job_pk",
            "health_at",
            "health_reason",
            "health",
            "state_until",
            "state_by",
        ):
            batch_op.drop_column(column)
