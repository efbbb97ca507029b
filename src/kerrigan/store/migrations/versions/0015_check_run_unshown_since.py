"""check runs: since when GitHub has not shown a session's newest version (the check-run lag metric)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unshown_since", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_sessions_unshown_since", ["unshown_since"], unique=False)
    # Check runs behind now count as behind since their newest version was recorded.
    op.execute(
        "UPDATE sessions SET unshown_since = COALESCE(version_at, updated_at) WHERE shown_version < version"
    )


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_unshown_since")
        batch_op.drop_column("unshown_since")
