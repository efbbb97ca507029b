"""jobs: what the manifest's pipeline keys give a job (``env``, ``needs``, ``results``, ``secrets``,
``artifacts``), the test results a job's runner sent (``job_results``), and whether a session's jobs get
secrets (a fork's pull request only when its approval says so)

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
        batch_op.add_column(sa.Column("results", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("secrets", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("artifacts", sa.JSON(), nullable=False, server_default="{}"))
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("secrets_allowed", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.create_table(
        "job_results",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("job_pk", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.pk"], name=op.f("fk_job_results_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_job_results")),
        sa.UniqueConstraint("job_pk", "path", name="uq_job_results_job_path"),
    )
    op.create_table(
        "job_artifacts",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("job_pk", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.pk"], name=op.f("fk_job_artifacts_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_job_artifacts")),
        sa.UniqueConstraint("job_pk", "path", name="uq_job_artifacts_job_path"),
    )
    op.create_table(
        "job_artifact_chunks",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("artifact_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["artifact_pk"],
            ["job_artifacts.pk"],
            name=op.f("fk_job_artifact_chunks_artifact_pk_job_artifacts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_job_artifact_chunks")),
        sa.UniqueConstraint("artifact_pk", "seq", name="uq_job_artifact_chunks_artifact_seq"),
    )


def downgrade() -> None:
    op.drop_table("job_artifact_chunks")
    op.drop_table("job_artifacts")
    op.drop_table("job_results")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("secrets_allowed")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("artifacts")
        batch_op.drop_column("secrets")
        batch_op.drop_column("results")
        batch_op.drop_column("needs")
        batch_op.drop_column("env")
