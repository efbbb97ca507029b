"""sessions for github

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("installation_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("repository", sa.String(length=200), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("head_branch", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("pull_request", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("awaiting_approval", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("delivery_id", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_sessions_repository"), ["repository"], unique=False)

    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_column("next_attempt_at")
        batch_op.drop_column("claimed_until")

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_repository"))
        batch_op.drop_column("delivery_id")
        batch_op.drop_column("awaiting_approval")
        batch_op.drop_column("pull_request")
        batch_op.drop_column("head_branch")
        batch_op.drop_column("repository")
        batch_op.drop_column("installation_id")
