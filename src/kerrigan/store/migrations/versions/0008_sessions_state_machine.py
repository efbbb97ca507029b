"""sessions and jobs as one state machine: typed scheduling, check-run versions, failure classes, attempts

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

INFRASTRUCTURE = ("runner_lost", "not_started", "source_unavailable", "runner_disk_full", "device_fault")


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("strategy", sa.String(length=16), nullable=False, server_default="spread")
        )
        batch_op.add_column(sa.Column("max_devkits", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("queue_wait_limit_s", sa.Float(), nullable=False, server_default="300"))
        batch_op.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("version_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("shown_version", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("check_run_resolution", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("sync_due_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("sync_claim", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("sync_claimed_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("sync_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("create_sent_version", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("check_run_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("check_run_error_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_sessions_sync_due_at"), ["sync_due_at"], unique=False)
        batch_op.create_unique_constraint(
            batch_op.f("uq_sessions_delivery_id"), ["delivery_id", "manifest_path"]
        )

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("failure_class", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("retry_of", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("requirements", sa.JSON(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_jobs_retry_of_jobs"), "jobs", ["retry_of"], ["pk"], ondelete="SET NULL"
        )
        batch_op.drop_constraint("uq_jobs_session_pk", type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_jobs_session_pk"), ["session_pk", "task_id", "attempt"]
        )

    _carry_over()


def _carry_over() -> None:
    """Sessions and jobs stored before: their scheduling out of the resolution, their versions shown, and
    the ended jobs' failure classes."""
    bind = op.get_bind()
    sessions = sa.table(
        "sessions",
        sa.column("pk", sa.Integer),
        sa.column("resolution", sa.JSON),
        sa.column("strategy", sa.String),
        sa.column("max_devkits", sa.Integer),
        sa.column("queue_wait_limit_s", sa.Float),
        sa.column("check_run_id", sa.BigInteger),
        sa.column("version", sa.Integer),
        sa.column("shown_version", sa.Integer),
    )
    for pk, resolution, check_run_id in bind.execute(
        sa.select(sessions.c.pk, sessions.c.resolution, sessions.c.check_run_id)
    ):
        scheduling = (resolution or {}).get("scheduling", {}) if isinstance(resolution, dict) else {}
        values: dict[str, object] = {}
        if isinstance(scheduling.get("strategy"), str):
            values["strategy"] = scheduling["strategy"]
        if isinstance(scheduling.get("max_devkits"), int):
            values["max_devkits"] = scheduling["max_devkits"]
        if isinstance(scheduling.get("queue_wait_limit_s"), int | float):
            values["queue_wait_limit_s"] = float(scheduling["queue_wait_limit_s"])
        if check_run_id is not None:  # what was reported before is taken as shown
            values["version"] = values["shown_version"] = 1
        if values:
            bind.execute(sa.update(sessions).where(sessions.c.pk == pk).values(**values))
    _requirements_of_queued_jobs(bind, sessions)
    jobs = sa.table(
        "jobs",
        sa.column("state", sa.String),
        sa.column("reason", sa.String),
        sa.column("exit_status", sa.Integer),
        sa.column("failure_class", sa.String),
    )
    bind.execute(
        sa.update(jobs)
        .where(jobs.c.state == "failed", jobs.c.reason == "timed_out")
        .values(state="timed_out")
    )
    rules = [
        (jobs.c.state == "cancelled", "cancelled"),
        (jobs.c.state == "timed_out", "timeout"),
        (
            sa.and_(jobs.c.state == "refused_before_start", jobs.c.reason == "queue_wait_exceeded"),
            "queue_wait_exceeded",
        ),
        (
            sa.and_(jobs.c.state == "refused_before_start", jobs.c.reason.in_(INFRASTRUCTURE)),
            "infrastructure",
        ),
        (sa.and_(jobs.c.state == "refused_before_start", jobs.c.failure_class.is_(None)), "unfit"),
        (
            sa.and_(
                jobs.c.state == "failed", sa.or_(jobs.c.reason.in_(INFRASTRUCTURE), jobs.c.exit_status == 75)
            ),
            "infrastructure",
        ),
        (sa.and_(jobs.c.state == "failed", jobs.c.failure_class.is_(None)), "test"),
    ]
    for condition, failure_class in rules:
        bind.execute(
            sa.update(jobs)
            .where(condition, jobs.c.failure_class.is_(None))
            .values(failure_class=failure_class)
        )


def _requirements_of_queued_jobs(bind: sa.Connection, sessions: sa.TableClause) -> None:
    """Jobs not ended yet: their task's requirements, from their session's resolution."""
    jobs = sa.table(
        "jobs",
        sa.column("pk", sa.Integer),
        sa.column("session_pk", sa.Integer),
        sa.column("task_id", sa.String),
        sa.column("state", sa.String),
        sa.column("requirements", sa.JSON),
    )
    waiting = bind.execute(
        sa.select(jobs.c.pk, jobs.c.task_id, sessions.c.resolution)
        .join(sessions, sessions.c.pk == jobs.c.session_pk)
        .where(jobs.c.state.in_(("queued", "leased", "accepted", "running")))
    )
    for pk, task_id, resolution in waiting:
        tasks = resolution.get("tasks", []) if isinstance(resolution, dict) else []
        for task in tasks:
            if (
                isinstance(task, dict)
                and task.get("id") == task_id
                and isinstance(task.get("requested"), dict)
            ):
                bind.execute(sa.update(jobs).where(jobs.c.pk == pk).values(requirements=task["requested"]))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_jobs_session_pk"), type_="unique")
        batch_op.create_unique_constraint("uq_jobs_session_pk", ["session_pk", "task_id"])
        batch_op.drop_constraint(batch_op.f("fk_jobs_retry_of_jobs"), type_="foreignkey")
        batch_op.drop_column("requirements")
        batch_op.drop_column("retry_of")
        batch_op.drop_column("attempt")
        batch_op.drop_column("failure_class")
    op.execute("UPDATE jobs SET state = 'failed' WHERE state = 'timed_out'")

    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_sessions_delivery_id"), type_="unique")
        batch_op.drop_index(batch_op.f("ix_sessions_sync_due_at"))
        for column in (
            "check_run_error_at",
            "check_run_error",
            "create_sent_version",
            "sync_attempts",
            "sync_claimed_until",
            "sync_claim",
            "sync_due_at",
            "check_run_resolution",
            "shown_version",
            "version_at",
            "version",
            "queue_wait_limit_s",
            "max_devkits",
            "strategy",
        ):
            batch_op.drop_column(column)
