"""jobs: the environment the manifest gives a job (``env``) and the tasks it waits for (``needs``)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("env", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.add_column(sa.Column("needs", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("needs")
        batch_op.drop_column("env")
