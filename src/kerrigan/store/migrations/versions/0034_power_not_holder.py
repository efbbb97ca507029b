"""a person's power request refused when its agent is to take it (issue 30): device_requests.failure may be
not_holder, the person no longer holding the device (their reservation ended) by then

Revision ID: 0034
Revises: 0032
Create Date: 2026-12-10
"""

from __future__ import annotations

from alembic import op

revision = "0034"
down_revision = "0032"
branch_labels = None
depends_on = None

NAME = "ck_device_requests_device_power_failure"


def upgrade() -> None:
    # No table refers to device_requests: rebuilding it (SQLite's way to change a CHECK) deletes nothing.
    with op.batch_alter_table("device_requests", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f(NAME), type_="check")
        batch_op.create_check_constraint(
            "device_power_failure", "failure IN ('no_power', 'busy', 'power_failed', 'not_holder')"
        )


def downgrade() -> None:
    # The previous release knows no not_holder: such a request (ended, audited) reads as a busy device.
    op.execute("UPDATE device_requests SET failure = 'busy' WHERE failure = 'not_holder'")
    with op.batch_alter_table("device_requests", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f(NAME), type_="check")
        batch_op.create_check_constraint(
            "device_power_failure", "failure IN ('no_power', 'busy', 'power_failed')"
        )
