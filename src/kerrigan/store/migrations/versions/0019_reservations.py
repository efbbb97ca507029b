"""reservations: a board for a person, leased like a job's (``device_leases.reservation_pk``)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("login", sa.String(length=100), nullable=False),
        sa.Column("requirements", sa.JSON(), nullable=False),
        sa.Column("device", sa.String(length=63), nullable=True),
        sa.Column("duration_s", sa.Integer(), nullable=False),
        sa.Column("wait_s", sa.Integer(), nullable=False),
        sa.Column("note", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("wait_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("device_id", sa.String(length=63), nullable=True),
        sa.Column("host", sa.String(length=63), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.String(length=32), nullable=True),
        sa.Column("ended_by", sa.String(length=100), nullable=True),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_reservations")),
        sa.UniqueConstraint("id", name=op.f("uq_reservations_id")),
    )
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reservations_login"), ["login"], unique=False)
        batch_op.create_index(batch_op.f("ix_reservations_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_reservations_device_id"), ["device_id"], unique=False)
    with op.batch_alter_table("device_leases", schema=None) as batch_op:
        batch_op.alter_column("job_pk", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("reservation_pk", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_device_leases_reservation_pk"), ["reservation_pk"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_device_leases_reservation_pk_reservations"),
            "reservations",
            ["reservation_pk"],
            ["pk"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    op.execute("DELETE FROM device_leases WHERE job_pk IS NULL")  # the reservations' leases go with them
    with op.batch_alter_table("device_leases", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_device_leases_reservation_pk_reservations"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_device_leases_reservation_pk"))
        batch_op.drop_column("reservation_pk")
        batch_op.alter_column("job_pk", existing_type=sa.Integer(), nullable=False)
    op.drop_table("reservations")
