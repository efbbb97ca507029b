"""who ended a session early and why, its concurrency group, a job's avoided devices; history's indexes

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancelled_by", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("cancel_reason", sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column("concurrency_group", sa.String(length=300), nullable=True))
        batch_op.create_index("ix_sessions_concurrency_group", ["concurrency_group"], unique=False)
        batch_op.create_index("ix_sessions_created_at", ["created_at"], unique=False)
        batch_op.create_index("ix_sessions_repository_created_at", ["repository", "created_at"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("avoid_devices", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.create_index("ix_jobs_device_id_created_at", ["device_id", "created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_device_id_created_at")
        batch_op.drop_column("avoid_devices")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_repository_created_at")
        batch_op.drop_index("ix_sessions_created_at")
        batch_op.drop_index("ix_sessions_concurrency_group")
        batch_op.drop_column("concurrency_group")
        batch_op.drop_column("cancel_reason")
        batch_op.drop_column("cancelled_by")
