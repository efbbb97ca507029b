"""when each chunk of a job's output reached the server

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Chunks stored before have no arrival time: the raw log's timestamps leave them unmarked.
    with op.batch_alter_table("job_log_chunks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("received_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_log_chunks", schema=None) as batch_op:
        batch_op.drop_column("received_at")
