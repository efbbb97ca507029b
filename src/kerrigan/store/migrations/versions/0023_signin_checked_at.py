"""signins.checked_at: when GitHub last confirmed that the signed-in login may sign in

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("signins", schema=None) as batch_op:
        batch_op.add_column(sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("signins", schema=None) as batch_op:
        batch_op.drop_column("checked_at")
