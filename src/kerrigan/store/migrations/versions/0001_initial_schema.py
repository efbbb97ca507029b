"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("login", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_login"), ["login"], unique=False)

    op.create_table(
        "audit_log",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column("subject_type", sa.String(length=20), nullable=False),
        sa.Column("subject_id", sa.String(length=63), nullable=False),
        sa.Column("pool_id", sa.String(length=63), nullable=True),
        sa.Column("field", sa.String(length=100), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_actor"), ["actor"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_log_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_log_pool_id"), ["pool_id"], unique=False)
        batch_op.create_index("ix_audit_log_subject", ["subject_type", "subject_id"], unique=False)

    op.create_table(
        "installations",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("github_id", sa.BigInteger(), nullable=False),
        sa.Column("account", sa.String(length=100), nullable=False),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_installations")),
        sa.UniqueConstraint("github_id", name=op.f("uq_installations_github_id")),
    )
    op.create_table(
        "label_keys",
        sa.Column("key", sa.String(length=63), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_label_keys")),
    )
    op.create_table(
        "pools",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("firmware_channel", sa.String(length=63), nullable=True),
        sa.Column("firmware_base_version", sa.String(length=63), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("owners", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_pools")),
        sa.UniqueConstraint("id", name=op.f("uq_pools_id")),
    )
    op.create_table(
        "runner_hosts",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=63), nullable=False),
        sa.Column("online", sa.Boolean(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("last_heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_runner_hosts")),
        sa.UniqueConstraint("id", name=op.f("uq_runner_hosts_id")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_runner_hosts_token_hash")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.String(length=64), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("delivery_id", name=op.f("uq_webhook_deliveries_delivery_id")),
    )
    op.create_table(
        "devices",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=63), nullable=False),
        sa.Column("pool_pk", sa.Integer(), nullable=False),
        sa.Column("board", sa.String(length=63), nullable=False),
        sa.Column("target_type", sa.String(length=63), nullable=False),
        sa.Column("os_type", sa.String(length=63), nullable=False),
        sa.Column("host", sa.String(length=63), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "available",
                "maintenance",
                "offline",
                "retired",
                name="device_state",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("state_reason", sa.String(length=500), nullable=False),
        sa.Column("state_changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_pk"], ["pools.pk"], name=op.f("fk_devices_pool_pk_pools"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_devices")),
        sa.UniqueConstraint("id", name=op.f("uq_devices_id")),
    )
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_devices_host"), ["host"], unique=False)
        batch_op.create_index(batch_op.f("ix_devices_pool_pk"), ["pool_pk"], unique=False)

    op.create_table(
        "repositories",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("github_id", sa.BigInteger(), nullable=False),
        sa.Column("full_name", sa.String(length=200), nullable=False),
        sa.Column("installation_pk", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["installation_pk"],
            ["installations.pk"],
            name=op.f("fk_repositories_installation_pk_installations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_repositories")),
        sa.UniqueConstraint("github_id", name=op.f("uq_repositories_github_id")),
    )
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_repositories_full_name"), ["full_name"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_repositories_installation_pk"), ["installation_pk"], unique=False
        )

    op.create_table(
        "sessions",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("repository_pk", sa.Integer(), nullable=True),
        sa.Column("head_sha", sa.String(length=40), nullable=False),
        sa.Column("workflow", sa.String(length=100), nullable=False),
        sa.Column("manifest_path", sa.String(length=500), nullable=False),
        sa.Column("event", sa.String(length=40), nullable=False),
        sa.Column("priority", sa.String(length=16), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "queued",
                "in_progress",
                "completed",
                name="session_state",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("conclusion", sa.String(length=32), nullable=True),
        sa.Column("check_run_id", sa.BigInteger(), nullable=True),
        sa.Column("resolution", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository_pk"],
            ["repositories.pk"],
            name=op.f("fk_sessions_repository_pk_repositories"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_sessions")),
        sa.UniqueConstraint("id", name=op.f("uq_sessions_id")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sessions_head_sha"), ["head_sha"], unique=False)
        batch_op.create_index(batch_op.f("ix_sessions_repository_pk"), ["repository_pk"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("pk", sa.Integer(), nullable=False),
        sa.Column("session_pk", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=63), nullable=False),
        sa.Column("device_id", sa.String(length=63), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_pk"], ["sessions.pk"], name=op.f("fk_jobs_session_pk_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_jobs")),
        sa.UniqueConstraint("session_pk", "task_id", name=op.f("uq_jobs_session_pk")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_session_pk"), ["session_pk"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_session_pk"))

    op.drop_table("jobs")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_repository_pk"))
        batch_op.drop_index(batch_op.f("ix_sessions_head_sha"))

    op.drop_table("sessions")
    with op.batch_alter_table("repositories", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_repositories_installation_pk"))
        batch_op.drop_index(batch_op.f("ix_repositories_full_name"))

    op.drop_table("repositories")
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_devices_pool_pk"))
        batch_op.drop_index(batch_op.f("ix_devices_host"))

    op.drop_table("devices")
    op.drop_table("webhook_deliveries")
    op.drop_table("runner_hosts")
    op.drop_table("pools")
    op.drop_table("label_keys")
    op.drop_table("installations")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_log_subject")
        batch_op.drop_index(batch_op.f("ix_audit_log_pool_id"))
        batch_op.drop_index(batch_op.f("ix_audit_log_at"))
        batch_op.drop_index(batch_op.f("ix_audit_log_actor"))

    op.drop_table("audit_log")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_login"))

    op.drop_table("api_tokens")
