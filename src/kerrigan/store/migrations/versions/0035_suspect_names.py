"""a suspect stays named while its evidence holds (issue 31): suspect_names, the (task, device) pairs named
suspect, which every replica reads and a restart keeps

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "suspect_names",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=400), nullable=False),
        sa.Column("device_id", sa.String(length=63), nullable=False),
        sa.Column("named_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_suspect_names")),
        sa.UniqueConstraint("task", "device_id", name=op.f("uq_suspect_names_task_device")),
    )


def downgrade() -> None:
    # A statement that writes first, as 0031's downgrade does. An older release names suspects from the
    # counts alone: dropping the names loses only the margin they kept.
    op.execute("DELETE FROM suspect_names")
    op.drop_table("suspect_names")
