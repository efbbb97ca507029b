"""a session's retry policy in a column of its own (sessions.retry), out of its resolution document

Revision ID: 0026
Revises: 0024
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# Each database's own JSON functions: a resolution can hold every device of a large lab, so the policy
# moves in the database rather than through Python, row by row.
_UP = {
    "sqlite": (
        "UPDATE sessions SET retry = json_extract(resolution, '$.retry'),"
        " resolution = json_remove(resolution, '$.retry')"
        " WHERE json_type(resolution, '$.retry') = 'object'"
    ),
    "postgresql": (
        "UPDATE sessions SET retry = (resolution::jsonb -> 'retry')::json,"
        " resolution = (resolution::jsonb - 'retry')::json"
        " WHERE jsonb_typeof(resolution::jsonb -> 'retry') = 'object'"
    ),
}
_DOWN = {
    "sqlite": (
        "UPDATE sessions SET resolution = json_set(resolution, '$.retry', json(retry))"
        " WHERE json_type(retry) = 'object'"
    ),
    "postgresql": (
        "UPDATE sessions"
        " SET resolution = (resolution::jsonb || jsonb_build_object('retry', retry::jsonb))::json"
        " WHERE jsonb_typeof(retry::jsonb) = 'object'"
    ),
}


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("retry", sa.JSON(), nullable=True))
    op.execute(_UP[op.get_bind().dialect.name])


def downgrade() -> None:
    op.execute(_DOWN[op.get_bind().dialect.name])
    # Dropped in place (SQLite 3.35 and later can): rebuilding the table would drop the old one, and with
    # foreign keys enforced that deletes every job of every session (ON DELETE CASCADE).
    with op.batch_alter_table("sessions", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("retry")
