"""Tables, in SQLAlchemy 2.0's typed style. One schema for SQLite and PostgreSQL.

Labels, tags and owners are JSON columns: they are read and written whole with their pool or device, filters
over effective labels run in the core (the same rules as matching), and the audit log keeps before/after.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from kerrigan.core.device_power import PowerAction, PowerFailure, PowerState, RequestState
from kerrigan.core.device_status import Health
from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import Conclusion, FailureClass, JobState
from kerrigan.core.manifest import (
    DEFAULT_MAX_DEVKITS,
    DEFAULT_QUEUE_WAIT_LIMIT_S,
    PowerChoice,
    Priority,
    Strategy,
)
from kerrigan.core.reservations import EndReason, ReservationState
from kerrigan.core.sessions import SessionState
from kerrigan.core.suspect_retry import SuspectRetry

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

NAME = String(63)


class UTCDateTime(TypeDecorator[datetime]):
    """Times in UTC, handed back with their zone on every database (SQLite's driver drops it)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored: pass an aware time (UTC)")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


Timestamp = UTCDateTime()


def _values(enum_type: type[enum.Enum]) -> list[str]:
    return [str(member.value) for member in enum_type]


def by_value(enum_type: type[enum.Enum], name: str, length: int) -> Enum:
    """A column of ``enum_type`` stored by its values in a VARCHAR of ``length``, checked by the database
    (a CHECK constraint named ``name``), handed back as members."""
    return Enum(
        enum_type,
        name=name,
        native_enum=False,
        values_callable=_values,
        create_constraint=True,
        length=length,
    )


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so Alembic names constraints alike on both databases."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, str]: JSON, list[str]: JSON, dict[str, Any]: JSON}  # noqa: RUF012 -- read by SQLAlchemy, never mutated


class PoolRow(Base):
    """A pool: explicit labels, tags, firmware policy and owners."""

    __tablename__ = "pools"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(NAME, unique=True)
    name: Mapped[str] = mapped_column(String(200))
    firmware_channel: Mapped[str | None] = mapped_column(String(63))
    firmware_base_version: Mapped[str | None] = mapped_column(String(63))
    labels: Mapped[dict[str, str]] = mapped_column(default=dict)
    tags: Mapped[list[str]] = mapped_column(default=list)
    owners: Mapped[list[str]] = mapped_column(default=list)
    # Globs on owner/name; empty: every installed repository may use the pool.
    repositories: Mapped[list[str]] = mapped_column(default=list, server_default="[]")
    # Its devices' health check as the inventory file writes it ({run, every, timeout_s, vcpus}), or None.
    health_check: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    updated_at: Mapped[datetime] = mapped_column(Timestamp)

    devices: Mapped[list[DeviceRow]] = relationship(back_populates="pool", passive_deletes="all")

    __mapper_args__ = {"version_id_col": version}  # noqa: RUF012 -- SQLAlchemy's declared form


class RunnerHostRow(Base):
    """A runner host; ``online`` is kept by heartbeats once runners report (an inventory file may set it)."""

    __tablename__ = "runner_hosts"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(NAME, unique=True)
    online: Mapped[bool] = mapped_column(Boolean, default=True)
    token_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    token_created_at: Mapped[datetime | None] = mapped_column(Timestamp)  # None: before Kerrigan kept it
    token_used_at: Mapped[datetime | None] = mapped_column(Timestamp)  # to the minute (a write a minute)
    last_heartbeat_at: Mapped[datetime | None] = mapped_column(Timestamp)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    protocol: Mapped[int | None] = mapped_column(Integer)
    capabilities: Mapped[list[str]] = mapped_column(default=list)
    resources: Mapped[dict[str, Any]] = mapped_column(default=dict)
    device_states: Mapped[dict[str, Any]] = mapped_column(default=dict)
    health: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Paused by a person: its devices get no new jobs until it is resumed, or until ``paused_until``.
    paused_reason: Mapped[str | None] = mapped_column(String(500))
    paused_by: Mapped[str | None] = mapped_column(String(100))
    paused_at: Mapped[datetime | None] = mapped_column(Timestamp)
    paused_until: Mapped[datetime | None] = mapped_column(Timestamp)


class DeviceRow(Base):
    """A device (target) in a pool, driven by a runner host."""

    __tablename__ = "devices"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(NAME, unique=True)
    pool_pk: Mapped[int] = mapped_column(ForeignKey("pools.pk", ondelete="RESTRICT"), index=True)
    board: Mapped[str] = mapped_column(String(63))
    target_type: Mapped[str] = mapped_column(String(63))
    os_type: Mapped[str] = mapped_column(String(63))
    host: Mapped[str] = mapped_column(NAME, index=True)
    state: Mapped[DeviceState] = mapped_column(
        by_value(DeviceState, "device_state", 16),
        default=DeviceState.AVAILABLE,
    )
    state_reason: Mapped[str] = mapped_column(String(500), default="")
    state_changed_at: Mapped[datetime] = mapped_column(Timestamp)
    state_by: Mapped[str] = mapped_column(String(100), default="", server_default="")
    state_until: Mapped[datetime | None] = mapped_column(Timestamp)  # maintenance ends by itself then
    health: Mapped[Health] = mapped_column(
        by_value(Health, "device_health", 16), default=Health.UNKNOWN, server_default=Health.UNKNOWN.value
    )
    health_reason: Mapped[str] = mapped_column(String(500), default="", server_default="")
    health_at: Mapped[datetime | None] = mapped_column(Timestamp)
    health_job_pk: Mapped[int | None] = mapped_column(Integer)  # the health-check job that decided it
    # Infrastructure failures in a row (any other end resets it): three make a device without a health
    # check bad.
    infrastructure_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Recoveries failed in a row (core.recovery): three make the device bad; one that boots resets it.
    recovery_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    health_check: Mapped[dict[str, Any] | None] = mapped_column(  # over its pool's
        JSON(none_as_null=True), nullable=True
    )
    labels: Mapped[dict[str, str]] = mapped_column(default=dict)
    tags: Mapped[list[str]] = mapped_column(default=list)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    updated_at: Mapped[datetime] = mapped_column(Timestamp)

    pool: Mapped[PoolRow] = relationship(back_populates="devices")

    __mapper_args__ = {"version_id_col": version}  # noqa: RUF012 -- SQLAlchemy's declared form


class LabelKeyRow(Base):
    """An approved label key with its description (the registry System Admins keep)."""

    __tablename__ = "label_keys"

    key: Mapped[str] = mapped_column(NAME, primary_key=True)
    description: Mapped[str] = mapped_column(String(500))
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(Timestamp)


class InstallationRow(Base):
    """A GitHub App installation."""

    __tablename__ = "installations"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    github_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    account: Mapped[str] = mapped_column(String(100))
    suspended: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp)


class RepositoryRow(Base):
    """A repository an installation covers."""

    __tablename__ = "repositories"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    github_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    full_name: Mapped[str] = mapped_column(String(200), index=True)
    installation_pk: Mapped[int] = mapped_column(
        ForeignKey("installations.pk", ondelete="CASCADE"), index=True
    )


class SessionRow(Base):
    """A triggered workflow at one commit: one check run, one job per task."""

    __tablename__ = "sessions"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    repository_pk: Mapped[int | None] = mapped_column(
        ForeignKey("repositories.pk", ondelete="SET NULL"), index=True
    )
    head_sha: Mapped[str] = mapped_column(String(40), index=True)
    workflow: Mapped[str] = mapped_column(String(100))
    manifest_path: Mapped[str] = mapped_column(String(500))
    event: Mapped[str] = mapped_column(String(40))
    priority: Mapped[Priority] = mapped_column(by_value(Priority, "session_priority", 16))
    state: Mapped[SessionState] = mapped_column(
        by_value(SessionState, "session_state", 16),
        default=SessionState.QUEUED,
    )
    conclusion: Mapped[Conclusion | None] = mapped_column(by_value(Conclusion, "session_conclusion", 32))
    check_run_id: Mapped[int | None] = mapped_column(BigInteger)
    resolution: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The manifest's retry policy (``RetryPolicy.as_dict``); None for a session stored without one: no retry.
    retry: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    updated_at: Mapped[datetime] = mapped_column(Timestamp)
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    repository: Mapped[str] = mapped_column(String(200), default="", index=True)
    head_branch: Mapped[str | None] = mapped_column(String(255))
    pull_request: Mapped[int | None] = mapped_column(Integer)
    awaiting_approval: Mapped[bool] = mapped_column(Boolean, default=False)
    # The owner of the fork whose code it runs (None: the repository's own): its concurrency scope.
    fork_owner: Mapped[str | None] = mapped_column(String(100))
    # Its jobs get the repository's secrets they name; a fork's pull request only once approved with them.
    secrets_allowed: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    delivery_id: Mapped[str | None] = mapped_column(String(64))
    workflow_run_id: Mapped[int | None] = mapped_column(BigInteger)
    # The manifest's scheduling block, typed: what dispatch reads (never parsed back out of ``resolution``).
    strategy: Mapped[Strategy] = mapped_column(
        by_value(Strategy, "session_strategy", 16), default=Strategy.SPREAD
    )
    max_devkits: Mapped[int] = mapped_column(Integer, default=DEFAULT_MAX_DEVKITS)
    queue_wait_limit_s: Mapped[float] = mapped_column(Float, default=float(DEFAULT_QUEUE_WAIT_LIMIT_S))
    # The check run as a projection of this row: ``version`` counts the changes GitHub should show,
    # ``shown_version`` is the last one GitHub confirmed. The reconciler claims a row (``sync_claim``
    # until ``sync_claimed_until``) to send it, and comes back at ``sync_due_at`` while it is behind.
    version: Mapped[int] = mapped_column(Integer, default=0)
    version_at: Mapped[datetime | None] = mapped_column(Timestamp)
    shown_version: Mapped[int] = mapped_column(Integer, default=0)
    # Since when GitHub has not shown the newest version (None: it shows it): the check-run lag.
    unshown_since: Mapped[datetime | None] = mapped_column(Timestamp, index=True)
    check_run_resolution: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    sync_due_at: Mapped[datetime | None] = mapped_column(Timestamp, index=True)
    sync_claim: Mapped[str | None] = mapped_column(String(32))
    sync_claimed_until: Mapped[datetime | None] = mapped_column(Timestamp)
    sync_attempts: Mapped[int] = mapped_column(Integer, default=0)
    create_sent_version: Mapped[int | None] = mapped_column(Integer)  # a create whose outcome is unknown
    check_run_error: Mapped[str | None] = mapped_column(Text)
    check_run_error_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # Who ended it early (a login, or None when Kerrigan did) and why ("superseded by 3f2a1b0").
    cancelled_by: Mapped[str | None] = mapped_column(String(100))
    cancel_reason: Mapped[str | None] = mapped_column(String(500))
    # The last Hold board request on its check run that held nothing, and why ("@bob may not ...").
    hold_note: Mapped[str | None] = mapped_column(String(300))
    concurrency_group: Mapped[str | None] = mapped_column(String(300), index=True)
    # The device a health-check session checks (its event is "health_check"; it has no repository and no
    # check run); None for every other session.
    health_check_device: Mapped[str | None] = mapped_column(NAME)

    __table_args__ = (
        UniqueConstraint("delivery_id", "manifest_path"),
        Index("ix_sessions_created_at", "created_at"),
        Index("ix_sessions_repository_created_at", "repository", "created_at"),  # history by repository
        Index("ix_sessions_health_check_device_created_at", "health_check_device", "created_at"),
    )


class JobRow(Base):
    """One task of a session, run on one device."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("session_pk", "task_id", "attempt"),
        Index("ix_jobs_device_id_created_at", "device_id", "created_at"),  # a device's history
    )

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.pk", ondelete="CASCADE"), index=True)
    task_id: Mapped[str] = mapped_column(NAME)
    device_id: Mapped[str | None] = mapped_column(NAME)
    state: Mapped[JobState] = mapped_column(by_value(JobState, "job_state", 32), default=JobState.QUEUED)
    exit_status: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    started_at: Mapped[datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)
    vcpus: Mapped[int] = mapped_column(Integer, default=2)
    ready_at: Mapped[datetime | None] = mapped_column(Timestamp)
    reason: Mapped[str | None] = mapped_column(String(64))
    host: Mapped[str | None] = mapped_column(NAME)
    command: Mapped[str | None] = mapped_column(Text)
    timeout_s: Mapped[int | None] = mapped_column(Integer)
    detail: Mapped[str | None] = mapped_column(String(500))
    accounting: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    next_seq: Mapped[int] = mapped_column(Integer, default=0)
    log_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    # The same of its console (JobConsoleRow): its chunks are numbered from 0 apart from the output's.
    console_next_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    console_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cpus: Mapped[str | None] = mapped_column(String(500))  # the CPU list the runner pinned it to
    queue_wait_s: Mapped[float] = mapped_column(Float, default=0.0)  # spent before queue_wait_observed_at
    queue_wait_observed_at: Mapped[datetime | None] = mapped_column(Timestamp)
    withdraw_requested_at: Mapped[datetime | None] = mapped_column(Timestamp)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(Timestamp)
    failure_class: Mapped[FailureClass | None] = mapped_column(
        by_value(FailureClass, "job_failure_class", 32)
    )
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    retry_of: Mapped[int | None] = mapped_column(ForeignKey("jobs.pk", ondelete="SET NULL"))
    # The task's requirements, resolved when the session was: {"labels": {key: [values]}, "tags": [...]}.
    requirements: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Devices this attempt must not be leased: those where earlier attempts failed for the infrastructure.
    avoid_devices: Mapped[list[str]] = mapped_column(default=list, server_default="[]")
    # The manifest's env for this job (the workflow's with the task's over it, the matrix's values in).
    env: Mapped[dict[str, str]] = mapped_column(JSON, default=dict, server_default="{}")
    # The tasks (ids as written) whose every job must succeed before this one is queued.
    needs: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    # The manifest's ``results`` globs: JUnit XML files the runner sends once the command has ended.
    results: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    # The repository secrets (names, upper-case) the runner hands the job at acceptance.
    secrets: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    # The manifest's artifacts: {"download": [{"name", "path"}], "upload": [globs]}.
    artifacts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    # A gang job's devices, in role order: [{"role", "device"}], set when they are leased (and kept once
    # it ends, as ``device_id`` is); ``device_id`` is the first role's. Empty for a job of one device.
    devices: Mapped[list[dict[str, str]]] = mapped_column(JSON, default=list, server_default="[]")
    # ``board: none``: it holds no device, only room on a runner host (``host``, under a HostLeaseRow).
    boardless: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Runner hosts this attempt of a boardless job must not be leased: where earlier attempts failed for
    # the infrastructure (as ``avoid_devices`` for a job that holds a device).
    avoid_hosts: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")
    # A suspect retry's attempt (core.suspect_retry): ``avoid_devices`` are never leased it, even when they
    # are all it matches (a retry's are otherwise, the failure may have passed).
    avoid_strict: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # A job that failed on a device suspect for its task: the device's numbers then (its runs and failures
    # of the task in 7 days, this one counted), and what became of it (core.suspect_retry.SuspectRetry).
    suspect_runs: Mapped[int | None] = mapped_column(Integer)
    suspect_failures: Mapped[int | None] = mapped_column(Integer)
    suspect_retry: Mapped[SuspectRetry | None] = mapped_column(
        by_value(SuspectRetry, "job_suspect_retry", 16)
    )
    # The task's ``power`` (core.manifest.PowerChoice): whether the runner power-cycles its wired boards
    # before it (``cycle``) or leaves one that is on as it is (``keep``).
    power: Mapped[PowerChoice] = mapped_column(
        by_value(PowerChoice, "job_power", 8),
        default=PowerChoice.CYCLE,
        server_default=PowerChoice.CYCLE.value,
    )


class JobResultRow(Base):
    """One JUnit XML file a job's runner sent, as parsed (``kerrigan.core.results.stored``); a file sent
    again replaces the one of the same path."""

    __tablename__ = "job_results"
    __table_args__ = (UniqueConstraint("job_pk", "path", name="uq_job_results_job_path"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.pk", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(String(500))
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(Timestamp)


class JobArtifactRow(Base):
    """A file a job's runner uploaded (the manifest's ``artifacts.upload``): ``size`` is None until the
    last chunk arrived; ``note`` says why it was not kept (over the limit), its chunks then absent."""

    __tablename__ = "job_artifacts"
    __table_args__ = (UniqueConstraint("job_pk", "path", name="uq_job_artifacts_job_path"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.pk", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(String(500))
    size: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))
    note: Mapped[str | None] = mapped_column(String(500))
    received_at: Mapped[datetime] = mapped_column(Timestamp)


class JobArtifactChunkRow(Base):
    """A piece of an uploaded file, in order."""

    __tablename__ = "job_artifact_chunks"
    __table_args__ = (UniqueConstraint("artifact_pk", "seq", name="uq_job_artifact_chunks_artifact_seq"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    artifact_pk: Mapped[int] = mapped_column(ForeignKey("job_artifacts.pk", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class LogChunkColumns:
    """A numbered chunk of one of a job's logs (:class:`kerrigan.core.log_streams.LogStream`): a repeat is
    recognised and a gap detected by its number."""

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.pk", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    byte_offset: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[str] = mapped_column(Text)
    received_at: Mapped[datetime | None] = mapped_column(Timestamp)  # when it reached the server


class JobLogRow(LogChunkColumns, Base):
    """A chunk of a job's output."""

    __tablename__ = "job_log_chunks"
    __table_args__ = (UniqueConstraint("job_pk", "seq"),)


class JobConsoleRow(LogChunkColumns, Base):
    """A chunk of a job's console (its board's), numbered apart from its output; a table of its own, so
    that no query of the output needs to tell the two apart."""

    __tablename__ = "job_console_chunks"
    __table_args__ = (UniqueConstraint("job_pk", "seq"),)


class DeviceLeaseRow(Base):
    """A device held by one job, or by a person's reservation. The device is the key: a second lease of it
    cannot exist. A gang job holds one lease per role (``role``; None for a job of one device). A
    reservation's lease runs until the reservation ends (``expires_at``); heartbeats renew only jobs'."""

    __tablename__ = "device_leases"

    device_id: Mapped[str] = mapped_column(NAME, primary_key=True)
    # The job holding the device, or the person's reservation (the store sets one of the two).
    job_pk: Mapped[int | None] = mapped_column(ForeignKey("jobs.pk", ondelete="CASCADE"), index=True)
    reservation_pk: Mapped[int | None] = mapped_column(
        ForeignKey("reservations.pk", ondelete="CASCADE"), index=True
    )
    session_id: Mapped[str] = mapped_column(String(36), index=True)
    host: Mapped[str] = mapped_column(NAME, index=True)
    granted_at: Mapped[datetime] = mapped_column(Timestamp)
    expires_at: Mapped[datetime] = mapped_column(Timestamp, index=True)
    role: Mapped[str | None] = mapped_column(String(63))


class HostLeaseRow(Base):
    """Room on a runner host held by a job that holds no device (``board: none``): its vCPUs there, until
    it ends. Renewed by the host's heartbeats and expired as a device's lease is; one a job."""

    __tablename__ = "host_leases"

    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.pk", ondelete="CASCADE"), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(36), index=True)
    host: Mapped[str] = mapped_column(NAME, index=True)
    granted_at: Mapped[datetime] = mapped_column(Timestamp)
    expires_at: Mapped[datetime] = mapped_column(Timestamp, index=True)


class ReservationRow(Base):
    """A board for a person (:mod:`kerrigan.core.reservations`): waiting for a device, holding one, ended."""

    __tablename__ = "reservations"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    login: Mapped[str] = mapped_column(String(100), index=True)
    # What was asked: {"labels": {key: [values]}, "tags": [...]}, and a device by id (or none).
    requirements: Mapped[dict[str, Any]] = mapped_column(JSON)
    device: Mapped[str | None] = mapped_column(NAME)
    duration_s: Mapped[int] = mapped_column(Integer)
    wait_s: Mapped[int] = mapped_column(Integer, default=0)
    note: Mapped[str] = mapped_column(String(200), default="")
    state: Mapped[ReservationState] = mapped_column(
        by_value(ReservationState, "reservation_state", 16), index=True
    )
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    wait_until: Mapped[datetime | None] = mapped_column(Timestamp)
    granted_at: Mapped[datetime | None] = mapped_column(Timestamp)
    ends_at: Mapped[datetime | None] = mapped_column(Timestamp)
    device_id: Mapped[str | None] = mapped_column(NAME, index=True)  # the device granted
    host: Mapped[str | None] = mapped_column(NAME)
    ended_at: Mapped[datetime | None] = mapped_column(Timestamp)
    end_reason: Mapped[EndReason | None] = mapped_column(by_value(EndReason, "reservation_end_reason", 32))
    ended_by: Mapped[str | None] = mapped_column(String(100))
    # While it is active: the private settings its runner host's devices file gives the device, as the
    # host reported them for its person (None: not reported); erased when it ends.
    holder_settings: Mapped[dict[str, str] | None] = mapped_column(JSON(none_as_null=True))
    # A hold (Hold board): the failed job whose board(s) this reservation holds, so its workspace can be
    # kept and a shell opened in it while the hold lasts. A plain number: the job may be deleted since.
    held_job_pk: Mapped[int | None] = mapped_column(Integer, index=True)


class DeviceRequestRow(Base):
    """A person's request of a device's power (:mod:`kerrigan.core.device_power`), handed to its host's
    agent in its long poll and answered by it; audited once it ends."""

    __tablename__ = "device_requests"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    device_id: Mapped[str] = mapped_column(NAME, index=True)
    host: Mapped[str] = mapped_column(NAME, index=True)
    login: Mapped[str] = mapped_column(String(100))
    action: Mapped[PowerAction] = mapped_column(by_value(PowerAction, "device_power_action", 8))
    state: Mapped[RequestState] = mapped_column(
        by_value(RequestState, "device_request_state", 16), index=True
    )
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    sent_at: Mapped[datetime | None] = mapped_column(Timestamp)
    answered_at: Mapped[datetime | None] = mapped_column(Timestamp)
    power: Mapped[PowerState | None] = mapped_column(by_value(PowerState, "device_power_state", 8))
    failure: Mapped[PowerFailure | None] = mapped_column(by_value(PowerFailure, "device_power_failure", 16))
    message: Mapped[str] = mapped_column(String(500), default="")


class DeliveryRow(Base):
    """A webhook delivery, stored before it is answered so that none is lost or done twice."""

    __tablename__ = "webhook_deliveries"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String(64), unique=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)
    received_at: Mapped[datetime] = mapped_column(Timestamp)
    processed_at: Mapped[datetime | None] = mapped_column(Timestamp)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    claimed_until: Mapped[datetime | None] = mapped_column(Timestamp)
    # The fencing token of the claim: written afresh by each claim, so a worker whose claim ran out and was
    # taken over can tell, and writes nothing more.
    claim_token: Mapped[str | None] = mapped_column(String(32))
    next_attempt_at: Mapped[datetime | None] = mapped_column(Timestamp)


class ApprovalRow(Base):
    """A ``/kerrigan approve`` comment that approved a fork's commit: the same comment, delivered again
    (GitHub's redelivery, a replay), never approves anything more."""

    __tablename__ = "approvals"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    comment_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    repository: Mapped[str] = mapped_column(String(200))
    pull_request: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(40))
    login: Mapped[str] = mapped_column(String(100))
    secrets: Mapped[bool] = mapped_column(Boolean)
    approved_at: Mapped[datetime] = mapped_column(Timestamp)


class ApiTokenRow(Base):
    """An API token for a GitHub login; only the SHA-256 of the token is stored."""

    __tablename__ = "api_tokens"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    login: Mapped[str] = mapped_column(String(100), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    last_used_at: Mapped[datetime | None] = mapped_column(Timestamp)
    revoked_at: Mapped[datetime | None] = mapped_column(Timestamp)


class SignInRow(Base):
    """A browser's sign-in, kept on the server so that Sign out (or an admin) ends it for good; the cookie
    holds a random id whose SHA-256 is ``id_hash``."""

    __tablename__ = "signins"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    id_hash: Mapped[str] = mapped_column(String(64), unique=True)
    login: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    expires_at: Mapped[datetime] = mapped_column(Timestamp, index=True)
    ended_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # When GitHub last confirmed the login may sign in (membership is asked again an hour after it).
    checked_at: Mapped[datetime | None] = mapped_column(Timestamp)


class AuditRow(Base):
    """One change to a label, tag, state, ownership or other inventory field: who, when, before, after."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_subject", "subject_type", "subject_id"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(Timestamp, index=True)
    actor: Mapped[str] = mapped_column(String(100), index=True)
    action: Mapped[str] = mapped_column(String(40))
    subject_type: Mapped[str] = mapped_column(String(20))
    subject_id: Mapped[str] = mapped_column(String(200))  # an id, or a repository's owner/name (a secret's)
    pool_id: Mapped[str | None] = mapped_column(NAME, index=True)
    field: Mapped[str] = mapped_column(String(100))
    before: Mapped[Any] = mapped_column(JSON, nullable=True)
    after: Mapped[Any] = mapped_column(JSON, nullable=True)


class SecretRow(Base):
    """A repository's secret, encrypted with Fernet: the value is never stored in the clear."""

    __tablename__ = "secrets"
    __table_args__ = (UniqueConstraint("repository_id", "name"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    # GitHub's id of the repository, not its name: a renamed or reinstalled repository keeps its secrets.
    repository_id: Mapped[int] = mapped_column(BigInteger)
    name: Mapped[str] = mapped_column(String(100))  # upper-case, as GitHub stores secret names
    ciphertext: Mapped[str] = mapped_column(Text)  # a Fernet token
    # Which key encrypted it (a digest of the key, not the key), so a rotation can find rows under old keys.
    key_id: Mapped[str] = mapped_column(String(16), index=True)
    set_by: Mapped[str] = mapped_column(String(100))
    set_at: Mapped[datetime] = mapped_column(Timestamp)


class SuspectNameRow(Base):
    """A device named suspect for a task (:mod:`kerrigan.store.suspects`): kept so that it stays named
    while its evidence holds (:data:`kerrigan.core.flaky.RELEASE_RATE`) whichever process or replica
    looks, and after a restart."""

    __tablename__ = "suspect_names"
    __table_args__ = (UniqueConstraint("task", "device_id", name="uq_suspect_names_task_device"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    task: Mapped[str] = mapped_column(String(400))  # store.suspects.task_key: owner/name:workflow:task
    device_id: Mapped[str] = mapped_column(NAME)  # no foreign key: a retired device's name just expires
    named_at: Mapped[datetime] = mapped_column(Timestamp)
