"""boardless jobs (``board: none``): jobs.boardless and jobs.avoid_hosts, and host_leases, the room on a
runner host such a job holds

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("boardless", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("avoid_hosts", sa.JSON(), nullable=False, server_default="[]"))
    op.create_table(
        "host_leases",
        sa.Column("job_pk", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("host", sa.String(length=63), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.pk"], name=op.f("fk_host_leases_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_pk", name=op.f("pk_host_leases")),
    )
    with op.batch_alter_table("host_leases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_host_leases_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_host_leases_host"), ["host"], unique=False)
        batch_op.create_index(batch_op.f("ix_host_leases_session_id"), ["session_id"], unique=False)


ENDED = ("succeeded", "failed", "timed_out", "cancelled", "refused_before_start", "retried", "skipped")


def downgrade() -> None:
    # An older release knows no boardless job: it would lease one a device (its kerrigan.host as a device's
    # label), or leave one that holds a host's room held for ever. Refused while any has not ended.
    left = op.get_bind().scalar(
        sa.text("SELECT count(*) FROM jobs WHERE boardless AND state NOT IN :ended").bindparams(
            sa.bindparam("ended", ENDED, expanding=True)
        )
    )
    if left:
        raise RuntimeError(
            f"{left} job(s) with board: none have not ended; let them end (or cancel their sessions) "
            "before downgrading below revision 0024"
        )
    with op.batch_alter_table("host_leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_host_leases_session_id"))
        batch_op.drop_index(batch_op.f("ix_host_leases_host"))
        batch_op.drop_index(batch_op.f("ix_host_leases_expires_at"))
    op.drop_table("host_leases")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("avoid_hosts")
        batch_op.drop_column("boardless")
