"""hold the failed board (issue 30): reservations.held_job_pk, the failed job a reservation holds the
board(s) of; sessions.hold_note, the last word a Hold board click got that holds nothing (a refusal)

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain number, as devices.health_job_pk: no foreign key, since adding one makes SQLite rebuild the
    # table, and a job deleted by retention leaves a hold that simply names no job any more.
    with op.batch_alter_table("reservations", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("held_job_pk", sa.Integer(), nullable=True))
        batch_op.create_index("ix_reservations_held_job_pk", ["held_job_pk"])
    with op.batch_alter_table("sessions", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("hold_note", sa.String(length=300), nullable=True))


def downgrade() -> None:
    # A statement that writes first, as 0030's downgrade does (Python's sqlite3 opens the transaction only
    # on one). An older release keeps no holds: the reservations stay, as plain ones.
    op.execute("UPDATE sessions SET hold_note = NULL WHERE 1 = 0")
    with op.batch_alter_table("sessions", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("hold_note")
    with op.batch_alter_table("reservations", schema=None, recreate="never") as batch_op:
        batch_op.drop_index("ix_reservations_held_job_pk")
        batch_op.drop_column("held_job_pk")
