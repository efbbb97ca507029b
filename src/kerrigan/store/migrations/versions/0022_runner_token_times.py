"""runner_hosts.token_created_at and token_used_at: when a host's token was made and last used

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_created_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("token_used_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runner_hosts", schema=None) as batch_op:
        batch_op.drop_column("token_used_at")
        batch_op.drop_column("token_created_at")
