"""the task key power (issue 29): jobs.power, whether the runner power-cycles the job's wired boards before
it (cycle, every job before this revision) or keeps one that is on

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        # Checked by the database, as every enum column is (0025): core.manifest.PowerChoice's values. Every
        # job stored before was power-cycled: cycle.
        batch_op.add_column(
            sa.Column(
                "power",
                sa.String(length=8),
                sa.CheckConstraint("power IN ('cycle', 'keep')", name=op.f("ck_jobs_job_power")),
                nullable=False,
                server_default="cycle",
            )
        )


def downgrade() -> None:
    # A statement that writes first, as 0027's downgrade does: Python's sqlite3 opens the transaction only
    # on one, and a downgrade refused further down would otherwise leave the column dropped under a version
    # that still names it. An older release cycles every job's boards: a queued keep job is then cycled.
    op.execute("UPDATE jobs SET power = 'cycle' WHERE 1 = 0")
    # Dropped in place (SQLite 3.35 and later can): rebuilding the table would drop the old one, and with
    # foreign keys enforced that deletes every job's output and results (ON DELETE CASCADE).
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("power")
