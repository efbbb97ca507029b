"""job lifecycle

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_log_chunks",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("job_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.pk"], name=op.f("fk_job_log_chunks_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_job_log_chunks")),
        sa.UniqueConstraint("job_pk", "seq", name=op.f("uq_job_log_chunks_job_pk")),
    )
    with op.batch_alter_table("job_log_chunks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_log_chunks_job_pk"), ["job_pk"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("host", sa.String(length=63), nullable=True))
        batch_op.add_column(sa.Column("command", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("timeout_s", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("detail", sa.String(length=500), nullable=True))
        batch_op.add_column(sa.Column("accounting", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("next_seq", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("log_bytes", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("log_bytes")
        batch_op.drop_column("next_seq")
        batch_op.drop_column("accounting")
        batch_op.drop_column("detail")
        batch_op.drop_column("timeout_s")
        batch_op.drop_column("command")
        batch_op.drop_column("host")

    with op.batch_alter_table("job_log_chunks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_log_chunks_job_pk"))

    op.drop_table("job_log_chunks")
