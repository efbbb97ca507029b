"""device leases

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "device_leases",
        sa.Column("device_id", sa.String(length=63), nullable=False),
        sa.Column("job_pk", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("host", sa.String(length=63), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.pk"], name=op.f("fk_device_leases_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("device_id", name=op.f("pk_device_leases")),
        sa.UniqueConstraint("job_pk", name=op.f("uq_device_leases_job_pk")),
    )
    with op.batch_alter_table("device_leases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_device_leases_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_device_leases_host"), ["host"], unique=False)
        batch_op.create_index(batch_op.f("ix_device_leases_session_id"), ["session_id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("vcpus", sa.Integer(), nullable=False, server_default="2"))
        batch_op.add_column(sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("reason", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("reason")
        batch_op.drop_column("ready_at")
        batch_op.drop_column("vcpus")

    with op.batch_alter_table("device_leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_leases_session_id"))
        batch_op.drop_index(batch_op.f("ix_device_leases_host"))
        batch_op.drop_index(batch_op.f("ix_device_leases_expires_at"))

    op.drop_table("device_leases")
