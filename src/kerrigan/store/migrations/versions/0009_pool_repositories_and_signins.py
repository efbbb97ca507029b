"""which repositories may use a pool; browser sign-ins kept on the server so Sign out revokes them

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("repositories", sa.JSON(), nullable=False, server_default="[]"))
    op.create_table(
        "signins",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("login", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("pk"),
        sa.UniqueConstraint("id_hash"),
    )
    op.create_index("ix_signins_expires_at", "signins", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_signins_expires_at", table_name="signins")
    op.drop_table("signins")
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_column("repositories")
