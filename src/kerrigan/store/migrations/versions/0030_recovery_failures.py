"""board recovery (issue 29): devices.recovery_failures, the recoveries of a device that failed in a row

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("recovery_failures", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    # A statement that writes first, as 0029's downgrade does: Python's sqlite3 opens the transaction only
    # on one, and a downgrade refused further down would otherwise leave the column dropped under a version
    # that still names it. An older release keeps no count of failed recoveries.
    op.execute("UPDATE devices SET recovery_failures = 0 WHERE 1 = 0")
    # Dropped in place (SQLite 3.35 and later can), as 0029 drops its column: rebuilding the table would
    # drop the old one, and with foreign keys enforced that deletes what refers to its devices.
    with op.batch_alter_table("devices", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("recovery_failures")
