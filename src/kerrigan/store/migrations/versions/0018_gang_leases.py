"""gang jobs: a job may hold several devices (one lease row each, with its role), and a job records each
role's device (``jobs.devices``)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("device_leases", schema=None) as batch_op:
        batch_op.drop_constraint("uq_device_leases_job_pk", type_="unique")
        batch_op.add_column(sa.Column("role", sa.String(length=63), nullable=True))
        batch_op.create_index(batch_op.f("ix_device_leases_job_pk"), ["job_pk"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("devices", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("devices")
    # One lease a job again: a gang keeps the lease of its job's device_id (the first role's, the one the
    # older code releases); the others are freed.
    op.execute(
        "DELETE FROM device_leases WHERE role IS NOT NULL AND device_id NOT IN "
        "(SELECT device_id FROM jobs WHERE jobs.pk = device_leases.job_pk AND device_id IS NOT NULL)"
    )
    with op.batch_alter_table("device_leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_leases_job_pk"))
        batch_op.drop_column("role")
        batch_op.create_unique_constraint("uq_device_leases_job_pk", ["job_pk"])
