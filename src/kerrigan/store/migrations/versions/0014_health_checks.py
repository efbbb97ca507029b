"""health checks: defined on pools and devices; the device a health-check session checks

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health_check", sa.JSON(), nullable=True))
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health_check", sa.JSON(), nullable=True))
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health_check_device", sa.String(length=63), nullable=True))
        batch_op.create_index(
            "ix_sessions_health_check_device_created_at", ["health_check_device", "created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_health_check_device_created_at")
        batch_op.drop_column("health_check_device")
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_column("health_check")
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_column("health_check")
