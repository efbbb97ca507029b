"""suspect retries (issue 28): jobs.avoid_strict, and a failure on a suspect device's numbers and verdict
(jobs.suspect_runs, jobs.suspect_failures, jobs.suspect_retry)

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("avoid_strict", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("suspect_runs", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("suspect_failures", sa.Integer(), nullable=True))
        # Checked by the database, as every enum column is (0025): core.suspect_retry.SuspectRetry's values.
        batch_op.add_column(
            sa.Column(
                "suspect_retry",
                sa.String(length=16),
                sa.CheckConstraint(
                    "suspect_retry IN ('retried', 'no_peer', 'spent')", name=op.f("ck_jobs_job_suspect_retry")
                ),
                nullable=True,
            )
        )


def downgrade() -> None:
    # A statement that writes first: Python's sqlite3 opens the transaction only on one, and runs the DDL
    # below outside any; a downgrade refused further down (0024's, while a boardless job runs) would then
    # leave these columns dropped under a version that still names them.
    op.execute("UPDATE jobs SET suspect_retry = NULL WHERE 1 = 0")
    # Dropped in place (SQLite 3.35 and later can): rebuilding the table would drop the old one, and with
    # foreign keys enforced that deletes every job's output and results (ON DELETE CASCADE).
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("suspect_retry")
        batch_op.drop_column("suspect_failures")
        batch_op.drop_column("suspect_runs")
        batch_op.drop_column("avoid_strict")
