"""a board's power in a person's hands (issue 30): device_requests, the power requests a host's agent takes
in its long poll and answers

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Checked by the database, as every enum column is (0025): core.device_power's enums' values.
    op.create_table(
        "device_requests",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("device_id", sa.String(length=63), nullable=False),
        sa.Column("host", sa.String(length=63), nullable=False),
        sa.Column("login", sa.String(length=100), nullable=False),
        sa.Column(
            "action",
            sa.String(length=8),
            sa.CheckConstraint(
                "action IN ('cycle', 'on', 'off', 'status')",
                name=op.f("ck_device_requests_device_power_action"),
            ),
            nullable=False,
        ),
        sa.Column(
            "state",
            sa.String(length=16),
            sa.CheckConstraint(
                "state IN ('waiting', 'sent', 'done', 'failed', 'expired')",
                name=op.f("ck_device_requests_device_request_state"),
            ),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "power",
            sa.String(length=8),
            sa.CheckConstraint(
                "power IN ('on', 'off', 'unknown')", name=op.f("ck_device_requests_device_power_state")
            ),
            nullable=True,
        ),
        sa.Column(
            "failure",
            sa.String(length=16),
            sa.CheckConstraint(
                "failure IN ('no_power', 'busy', 'power_failed')",
                name=op.f("ck_device_requests_device_power_failure"),
            ),
            nullable=True,
        ),
        sa.Column("message", sa.String(length=500), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_device_requests")),
        sa.UniqueConstraint("id", name=op.f("uq_device_requests_id")),
    )
    with op.batch_alter_table("device_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_device_requests_device_id"), ["device_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_device_requests_host"), ["host"], unique=False)
        batch_op.create_index(batch_op.f("ix_device_requests_state"), ["state"], unique=False)


def downgrade() -> None:
    # A statement that writes first, as 0028's downgrade does: SQLite's driver opens its transaction only
    # then, so the drop below is undone with it when an older migration of the same downgrade refuses. The
    # requests are short-lived (a minute at most); each one that ended is in the audit log.
    op.execute("DELETE FROM device_requests")
    with op.batch_alter_table("device_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_requests_state"))
        batch_op.drop_index(batch_op.f("ix_device_requests_host"))
        batch_op.drop_index(batch_op.f("ix_device_requests_device_id"))
    op.drop_table("device_requests")
