"""secrets: a repository's secrets, encrypted; the audit log names a secret by its repository's owner/name

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("ciphertext", sa.Text(), nullable=False),
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("set_by", sa.String(length=100), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_secrets")),
        sa.UniqueConstraint("repository_id", "name", name=op.f("uq_secrets_repository_id")),
    )
    with op.batch_alter_table("secrets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_secrets_key_id"), ["key_id"], unique=False)
    # owner/name is up to 140 characters (GitHub: a 39-character owner, a 100-character name).
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.alter_column(
            "subject_id",
            existing_type=sa.String(length=63),
            type_=sa.String(length=200),
            existing_nullable=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.alter_column(
            "subject_id",
            existing_type=sa.String(length=200),
            type_=sa.String(length=63),
            existing_nullable=False,
        )
    with op.batch_alter_table("secrets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_secrets_key_id"))
    op.drop_table("secrets")
