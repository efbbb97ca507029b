"""reservations.holder_settings: the devices-file settings its runner host reports for the person holding it

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("holder_settings", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.drop_column("holder_settings")
