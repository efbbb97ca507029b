"""runner hosts report

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("protocol", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("capabilities", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("resources", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.add_column(sa.Column("device_states", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.drop_column("device_states")
        batch_op.drop_column("resources")
        batch_op.drop_column("capabilities")
        batch_op.drop_column("protocol")
