"""approvals: the comments that approved a fork's commit; sessions.fork_owner: a fork's concurrency scope

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("repository", sa.String(length=200), nullable=False),
        sa.Column("pull_request", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(length=40), nullable=False),
        sa.Column("login", sa.String(length=100), nullable=False),
        sa.Column("secrets", sa.Boolean(), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_approvals")),
        sa.UniqueConstraint("comment_id", name=op.f("uq_approvals_comment_id")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fork_owner", sa.String(length=100), nullable=True))
    # Only a fork's sessions wait for approval: those waiting now get a fork's scope (whose owner is not
    # known here: GitHub's name for a deleted account), so that once approved they meet no own session.
    op.execute("UPDATE sessions SET fork_owner = 'ghost' WHERE awaiting_approval")


def downgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("fork_owner")
    op.drop_table("approvals")
