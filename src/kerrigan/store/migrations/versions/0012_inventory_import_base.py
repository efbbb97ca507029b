"""the inventory file as last imported: the base of the next import's three-way merge

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No rows for imports made before: the next import into a filled database has no base and says so.
    op.create_table(
        "inventory_imports",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_inventory_imports")),
    )
    with op.batch_alter_table("inventory_imports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_inventory_imports_imported_at"), ["imported_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("inventory_imports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_inventory_imports_imported_at"))
    op.drop_table("inventory_imports")
