"""a job's console, a log of its own: job_console_chunks, and its chunk numbering on the job

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_console_chunks",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("job_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.pk"], name=op.f("fk_job_console_chunks_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_job_console_chunks")),
        sa.UniqueConstraint("job_pk", "seq", name=op.f("uq_job_console_chunks_job_pk")),
    )
    with op.batch_alter_table("job_console_chunks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_console_chunks_job_pk"), ["job_pk"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("console_next_seq", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("console_bytes", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    # A statement that writes first: SQLite's driver opens its transaction only then, so the column drops
    # below are undone with it when an older migration of the same downgrade refuses (0024's, a boardless
    # job that has not ended); a DROP first would be committed at once.
    op.execute("DELETE FROM job_console_chunks")
    # Dropped in place (SQLite 3.35 and later can): rebuilding ``jobs`` would drop the old table, and with
    # foreign keys enforced that deletes what refers to it (ON DELETE CASCADE).
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("console_bytes")
        batch_op.drop_column("console_next_seq")
    with op.batch_alter_table("job_console_chunks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_console_chunks_job_pk"))
    op.drop_table("job_console_chunks")
