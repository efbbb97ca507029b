"""A job's life on a runner host: offered, accepted or refused, started, its output, its end.

Every call a runner repeats is idempotent: "already decided" is an answer, not an error. Output arrives in
numbered chunks; a chunk seen before is acknowledged again, and a gap is reported with the number expected
so the runner re-sends from there.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from sqlalchemy import and_, func, literal, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Subquery

from kerrigan.core.device_status import refusal_hold
from kerrigan.core.lifecycle import (
    ENDED,
    NOT_STARTED,
    QUEUE_WAIT_EXCEEDED,
    SOURCE_UNAVAILABLE,
    JobState,
    TransitionError,
    ended_by_runner,
)
from kerrigan.core.manifest import DEFAULT_QUEUE_WAIT_LIMIT_S
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES, cut_notice, fitting
from kerrigan.store.audit import KERRIGAN_ACTOR
from kerrigan.store.models import DeviceLeaseRow, HostLeaseRow, JobLogRow, JobRow, SessionRow
from kerrigan.store.runners import hold_after_refusal
from kerrigan.store.signals import Topic, mark
from kerrigan.store.transitions import move_job, settle_session

__all__ = ["ENDED", "NOT_STARTED", "QUEUE_WAIT_EXCEEDED", "JobState"]

OUTCOMES = frozenset({"cancelled", "timed_out", SOURCE_UNAVAILABLE})
CUT_SEQ: Final = -1  # the chunk number of the server's notice that a job's output was cut
REQUEUE_REASONS = frozenset({"runner_full", "runner_disk_full"})


class NotYoursError(LookupError):
    """The job does not exist, or is not offered to the calling runner host."""


class LogGapError(Exception):
    """A chunk came before the ones it follows; ``expected_seq`` is where the runner should resume."""

    def __init__(self, expected_seq: int) -> None:
        super().__init__(f"chunk out of order: expected seq {expected_seq}")
        self.expected_seq = expected_seq


@dataclass(frozen=True, slots=True)
class Offer:
    """A job offered to a runner host; ``device_id`` is None for a job that holds no device."""

    job_id: str
    session_id: str
    task_id: str
    device_id: str | None
    repository: str
    head_sha: str
    command: str | None
    vcpus: int
    timeout_s: int | None
    installation_id: int | None = None
    workflow_run_id: int | None = None
    queue_wait_s: float = 0.0
    queue_wait_limit_s: float = float(DEFAULT_QUEUE_WAIT_LIMIT_S)
    priority: str = "normal"
    env: Mapping[str, str] = field(default_factory=dict)  # the manifest's env for the job
    results: tuple[str, ...] = ()  # the manifest's results globs
    secrets: tuple[str, ...] = ()  # the names of the secrets its accept hands out
    artifacts: Mapping[str, Any] = field(default_factory=dict)  # the manifest's artifacts
    roles: tuple[tuple[str, str], ...] = ()  # a gang's (role, device), in role order; device_id the first
    # Whether the job may have secrets: a fork's session only when approved with `/kerrigan approve secrets`.
    secrets_allowed: bool = True


@dataclass(frozen=True, slots=True)
class Transition:
    """The state a call left the job in, and whether this call changed it (or found it decided)."""

    state: JobState
    changed: bool


# A job's lease of its first device: one row a job, gang or not (a gang holds a lease per role).
FIRST_LEASE: Final = and_(DeviceLeaseRow.job_pk == JobRow.pk, DeviceLeaseRow.device_id == JobRow.device_id)
# A job that holds no device holds room on a runner host: one row a job.
ROOM_LEASE: Final = HostLeaseRow.job_pk == JobRow.pk


def _held_by(host: str) -> Subquery:
    """The ids of the jobs ``host`` holds a lease for: of their first device, or of room on it."""
    return union_all(
        select(JobRow.pk).join(DeviceLeaseRow, FIRST_LEASE).where(DeviceLeaseRow.host == host),
        select(HostLeaseRow.job_pk).where(HostLeaseRow.host == host),
    ).subquery()


async def offers(session: AsyncSession, host: str) -> list[Offer]:
    """Jobs leased to devices of ``host`` (or room on it, without a board) and not yet accepted."""
    boarded = await session.execute(
        select(JobRow, SessionRow, DeviceLeaseRow.device_id)
        .join(DeviceLeaseRow, FIRST_LEASE)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(DeviceLeaseRow.host == host, JobRow.state == JobState.LEASED)
    )
    boardless = await session.execute(
        select(JobRow, SessionRow, literal(None))
        .join(HostLeaseRow, ROOM_LEASE)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(HostLeaseRow.host == host, JobRow.state == JobState.LEASED)
    )
    rows = sorted([*boarded.all(), *boardless.all()], key=lambda row: row[0].pk)
    return [
        Offer(
            str(job.pk),
            run.id,
            job.task_id,
            device,
            run.repository,
            run.head_sha,
            job.command,
            job.vcpus,
            job.timeout_s,
            run.installation_id,
            run.workflow_run_id,
            job.queue_wait_s,
            run.queue_wait_limit_s,
            run.priority,
            dict(job.env or {}),
            tuple(job.results or ()),
            tuple(job.secrets or ()),
            dict(job.artifacts or {}),
            roles_of(job.devices),
            run.secrets_allowed,
        )
        for job, run, device in rows
    ]


@dataclass(frozen=True, slots=True)
class RunnerRequests:
    """What the server asks of a runner host on its next poll."""

    cancel: tuple[str, ...] = ()
    withdraw: tuple[str, ...] = ()


async def runner_requests(session: AsyncSession, host: str) -> RunnerRequests:
    """Jobs of ``host`` to cancel (any not ended) and to withdraw (accepted, not started)."""
    held = _held_by(host)
    rows = await session.execute(
        select(JobRow.pk, JobRow.state, JobRow.cancel_requested_at, JobRow.withdraw_requested_at)
        .join(held, held.c.pk == JobRow.pk)
        .where(or_(JobRow.cancel_requested_at.is_not(None), JobRow.withdraw_requested_at.is_not(None)))
        .order_by(JobRow.pk)
    )
    cancel, withdraw = [], []
    for pk, state, cancel_at, withdraw_at in rows:
        if cancel_at is not None:
            cancel.append(str(pk))
        elif withdraw_at is not None and state in NOT_STARTED:
            withdraw.append(str(pk))
    return RunnerRequests(tuple(cancel), tuple(withdraw))


async def observe_runner_waits(
    session: AsyncSession, host: str, waiting: dict[str, int], at: datetime
) -> list[str]:
    """Jobs a runner holds for capacity, with the milliseconds each waited there; asks to withdraw those
    whose queue-wait budget ran out. The ids newly asked for."""
    asked = []
    for job_id, waited_ms in waiting.items():
        if not (job_id.isascii() and job_id.isdigit()):
            continue
        if await lease_holder(session, int(job_id)) != host:
            continue
        found = (
            await session.execute(
                select(JobRow, SessionRow.queue_wait_limit_s)
                .join(SessionRow, JobRow.session_pk == SessionRow.pk)
                .where(JobRow.pk == int(job_id))
            )
        ).first()
        if found is None:
            continue
        job, limit_s = found
        if job.state not in NOT_STARTED or job.withdraw_requested_at is not None:
            continue
        if job.queue_wait_s + waited_ms / 1000 >= limit_s:
            job.withdraw_requested_at = at
            asked.append(job_id)
            mark(session, Topic.RUNNER_REQUESTS)
    return asked


async def lease_holder(session: AsyncSession, job_pk: int) -> str | None:
    """The runner host holding the job's lease (of its devices, or of room on the host), if any."""
    return await session.scalar(
        union_all(
            select(DeviceLeaseRow.host).where(DeviceLeaseRow.job_pk == job_pk),
            select(HostLeaseRow.host).where(HostLeaseRow.job_pk == job_pk),
        ).limit(1)
    )


async def owned_job(session: AsyncSession, job_id: str, host: str) -> JobRow:
    """The job ``job_id`` (locked) when ``host`` holds it, or ran it and it ended; else NotYoursError."""
    numeric = job_id.isascii() and job_id.isdigit()
    job = await session.get(JobRow, int(job_id), with_for_update={"key_share": True}) if numeric else None
    if job is None:
        raise NotYoursError(f"no job {job_id}")
    holder = await lease_holder(session, job.pk)
    # A job in hand is its lease holder's; an ended one answers the host that ran it (a repeated call).
    # A job sent back to the queue is nobody's: a late call from the host that had it changes nothing.
    owner = holder if holder is not None else (job.host if job.state in ENDED else None)
    if owner != host:
        raise NotYoursError(f"job {job_id} is not offered to {host}")
    return job


async def job_repository(session: AsyncSession, job_id: str) -> tuple[int | None, str] | None:
    """The installation and repository of a job's session."""
    if not (job_id.isascii() and job_id.isdigit()):
        return None
    found = (
        await session.execute(
            select(SessionRow.installation_id, SessionRow.repository)
            .join(JobRow, JobRow.session_pk == SessionRow.pk)
            .where(JobRow.pk == int(job_id))
        )
    ).first()
    return (found[0], str(found[1])) if found is not None else None


async def held_jobs(session: AsyncSession, host: str) -> dict[str, str]:
    """Jobs a runner host holds as the server sees them (accepted or running), with their states."""
    held = _held_by(host)
    rows = await session.execute(
        select(JobRow.pk, JobRow.state)
        .join(held, held.c.pk == JobRow.pk)
        .where(JobRow.state.in_([JobState.ACCEPTED, JobState.RUNNING]))
    )
    return {str(pk): str(state) for pk, state in rows}


async def accept(session: AsyncSession, job_id: str, host: str, at: datetime) -> Transition:
    """The runner takes the job."""
    job = await owned_job(session, job_id, host)
    if job.state != JobState.LEASED:
        return Transition(JobState(job.state), changed=False)
    await move_job(session, job, JobState.ACCEPTED, at)
    job.host = host
    return Transition(JobState.ACCEPTED, changed=True)


async def refuse(
    session: AsyncSession,
    job_id: str,
    host: str,
    at: datetime,
    *,
    reason: str,
    detail: str,
    retry: bool = True,
) -> Transition:
    """The runner cannot take the job: capacity refusals put it back in the queue, others end it.

    ``retry=False`` says the host can never run it (a claim of 0, or over its allocatable CPUs): it ends
    ``refused_before_start`` with the runner's detail, which the check run shows.
    """
    job = await owned_job(session, job_id, host)
    if job.state != JobState.LEASED:
        return Transition(JobState(job.state), changed=False)
    if reason in REQUEUE_REASONS and retry:
        await move_job(session, job, JobState.QUEUED, at, reason=reason, detail=detail)
        hold = refusal_hold(reason, detail, at, KERRIGAN_ACTOR)
        if hold is not None:  # offered elsewhere meanwhile, not straight back to the host that said no
            await hold_after_refusal(session, host, hold)
        await settle_session(session, job.session_pk, at)  # the check run says why it waits again
        return Transition(JobState.QUEUED, changed=True)
    await move_job(session, job, JobState.REFUSED_BEFORE_START, at, reason=reason, detail=detail)
    await settle_session(session, job.session_pk, at)
    return Transition(JobState.REFUSED_BEFORE_START, changed=True)


async def start(
    session: AsyncSession, job_id: str, host: str, at: datetime, cpus: str | None = None
) -> Transition:
    """The job's command started (pinned to ``cpus``, a kernel CPU list, when the runner pins)."""
    job = await owned_job(session, job_id, host)
    if job.state not in NOT_STARTED:
        return Transition(JobState(job.state), changed=False)
    # A start that crosses a withdrawal request wins: only the runner's answer decides (seed 003).
    await move_job(session, job, JobState.RUNNING, at)
    job.started_at, job.host, job.cpus = at, host, cpus
    await settle_session(session, job.session_pk, at)
    return Transition(JobState.RUNNING, changed=True)


async def withdrawn(session: AsyncSession, job_id: str, host: str, at: datetime) -> Transition:
    """The runner withdrew a job it had not started: its queue-wait budget ran out."""
    job = await owned_job(session, job_id, host)
    if job.state not in NOT_STARTED:
        return Transition(JobState(job.state), changed=False)
    await move_job(session, job, JobState.REFUSED_BEFORE_START, at, reason=QUEUE_WAIT_EXCEEDED)
    await settle_session(session, job.session_pk, at)
    return Transition(JobState.REFUSED_BEFORE_START, changed=True)


async def request_cancel(session: AsyncSession, session_id: str, at: datetime) -> list[int]:
    """Cancel a session's jobs: queued ones end at once, the others when their runner has stopped them.

    The ids of the jobs that ended now.
    """
    rows = (
        await session.scalars(
            select(JobRow)
            .join(SessionRow, JobRow.session_pk == SessionRow.pk)
            .where(SessionRow.id == session_id, JobRow.state.not_in(ENDED))
            .order_by(JobRow.pk)
            .with_for_update(of=JobRow, key_share=True)
        )
    ).all()
    ended = []
    for job in rows:
        if job.state in (JobState.WAITING, JobState.QUEUED, JobState.LEASED):  # in no runner's hands
            detail = "" if job.state == JobState.WAITING else None  # what it waited for no longer matters
            await move_job(session, job, JobState.CANCELLED, at, reason="cancelled", detail=detail)
            ended.append(job.pk)
        elif job.cancel_requested_at is None:
            job.cancel_requested_at = at
            mark(session, Topic.RUNNER_REQUESTS)
    if ended:
        await settle_session(session, rows[0].session_pk, at)
    return ended


@dataclass(frozen=True, slots=True)
class Appended:
    """What storing a chunk left: the next chunk number expected, and whether the job's output was cut
    (the server stores no more of it: the runner may stop sending)."""

    next_seq: int
    cut: bool = False


async def append_output(
    session: AsyncSession,
    job_id: str,
    host: str,
    *,
    seq: int,
    byte_offset: int,
    data: str,
    truncated_before_seq: int | None = None,
    max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES,
    at: datetime | None = None,
) -> Appended:
    """Store a chunk of output, arrived ``at``; the next sequence number expected. A repeat is acknowledged
    again (its first arrival time stays).

    A runner that no longer has the chunks the server expects (it evicted them after 24 hours) says so
    with ``truncated_before_seq`` equal to ``seq``: the gap is recorded as a visible notice, never skipped
    silently. Output past ``max_bytes`` (counted in the runner's byte offsets) is not stored: the part of
    the chunk that fits is, then the cut notice, at seq ``CUT_SEQ`` (no runner chunk has a negative number,
    so the notice cannot be forged by output). Later chunks are acknowledged in order and dropped.
    """
    job = await owned_job(session, job_id, host)
    cut_at = await _cut_at(session, job.pk)
    if seq < job.next_seq:
        return Appended(job.next_seq, cut_at is not None)
    if (
        truncated_before_seq is not None
        and truncated_before_seq == seq
        and seq > job.next_seq
        and byte_offset >= job.log_bytes  # a jump over evicted chunks goes forwards only
    ):
        if cut_at is None:
            notice = f"[output chunks {job.next_seq}..{seq - 1} were evicted on the runner before upload]\n"
            session.add(
                JobLogRow(
                    job_pk=job.pk, seq=job.next_seq, byte_offset=job.log_bytes, data=notice, received_at=at
                )
            )
        job.next_seq, job.log_bytes = seq, byte_offset
    if seq > job.next_seq or byte_offset != job.log_bytes:
        raise LogGapError(job.next_seq)
    size = len(data.encode())
    cut = cut_at is not None
    if not cut and job.log_bytes + size > max_bytes:
        kept = fitting(data, max_bytes - job.log_bytes)
        if kept:
            session.add(JobLogRow(job_pk=job.pk, seq=seq, byte_offset=byte_offset, data=kept, received_at=at))
        before = kept or await session.scalar(
            select(JobLogRow.data)
            .where(JobLogRow.job_pk == job.pk, JobLogRow.seq >= 0)
            .order_by(JobLogRow.seq.desc())
            .limit(1)
        )
        notice = cut_notice(max_bytes)
        if before and not before.endswith("\n"):  # the notice is a line of its own
            notice = "\n" + notice
        where = byte_offset + len(kept.encode())
        session.add(JobLogRow(job_pk=job.pk, seq=CUT_SEQ, byte_offset=where, data=notice, received_at=at))
        cut = True
    elif not cut:
        session.add(JobLogRow(job_pk=job.pk, seq=seq, byte_offset=byte_offset, data=data, received_at=at))
    job.next_seq += 1
    job.log_bytes += size
    return Appended(job.next_seq, cut)


async def _cut_at(session: AsyncSession, job_pk: int) -> int | None:
    """Where the job's output was cut (the bytes stored before the cut notice), or None."""
    found = await session.scalar(
        select(JobLogRow.byte_offset).where(JobLogRow.job_pk == job_pk, JobLogRow.seq == CUT_SEQ)
    )
    return int(found) if found is not None else None


async def finish(
    session: AsyncSession,
    job_id: str,
    host: str,
    at: datetime,
    *,
    exit_status: int,
    accounting: dict[str, Any] | None,
    outcome: str | None = None,
) -> Transition:
    """The job ended; its device is free again.

    ``outcome`` says why the runner stopped it: ``cancelled`` (asked to) or ``timed_out`` (its timeout);
    or, before its command started, ``source_unavailable`` (GitHub or the network failed the fetch). Any
    other job that ends before its command started failed on its host (``not_started``, the lab's failure).
    A job offered but never accepted cannot end this way: :class:`~kerrigan.core.lifecycle.TransitionError`.
    """
    job = await owned_job(session, job_id, host)
    if job.state in ENDED:
        return Transition(JobState(job.state), changed=False)
    state, reason = ended_by_runner(exit_status, outcome, started=job.started_at is not None)
    if job.state == JobState.LEASED:  # only a lost lease ends a job its host never took
        raise TransitionError("job", job.state, state.value)
    await move_job(session, job, state, at, reason=reason, exit_status=exit_status)
    job.accounting = accounting
    await settle_session(session, job.session_pk, at)
    return Transition(state, changed=True)


async def output(session: AsyncSession, job_id: int, after_seq: int = -1) -> list[tuple[int, str]]:
    """A job's output chunks after ``after_seq``, in order."""
    rows = await session.execute(
        select(JobLogRow.seq, JobLogRow.data)
        .where(JobLogRow.job_pk == job_id, JobLogRow.seq > after_seq)
        .order_by(JobLogRow.seq)
    )
    return [(int(seq), str(data)) for seq, data in rows]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as reports show it."""

    pk: int
    task_id: str
    state: str
    device_id: str | None
    host: str | None
    exit_status: int | None
    reason: str | None
    started_at: datetime | None
    finished_at: datetime | None
    detail: str | None = None
    attempt: int = 1
    retry_of: int | None = None  # the attempt this one retries
    roles: tuple[tuple[str, str], ...] = ()  # a gang's (role, device); device_id is the first role's
    boardless: bool = False  # ``board: none``: no device; ``host`` is where it runs


def roles_of(devices: list[dict[str, str]] | None) -> tuple[tuple[str, str], ...]:
    """A job row's ``devices`` as (role, device) pairs, in role order."""
    return tuple((str(d["role"]), str(d["device"])) for d in devices or ())


async def session_job_records(session: AsyncSession, session_pk: int) -> list[JobRecord]:
    """Every job of a session, in task order, as reports show them."""
    rows = (
        await session.scalars(select(JobRow).where(JobRow.session_pk == session_pk).order_by(JobRow.pk))
    ).all()
    return [
        JobRecord(
            row.pk,
            row.task_id,
            row.state,
            row.device_id,
            row.host,
            row.exit_status,
            row.reason,
            row.started_at,
            row.finished_at,
            row.detail,
            row.attempt,
            row.retry_of,
            roles_of(row.devices),
            bool(row.boardless),
        )
        for row in rows
    ]


async def output_tail(session: AsyncSession, job_pk: int, chunks: int = 20) -> str:
    """The last chunks of a job's output, joined; the cut notice last when its output was cut."""
    rows = await session.execute(
        select(JobLogRow.data)
        .where(JobLogRow.job_pk == job_pk, JobLogRow.seq >= 0)
        .order_by(JobLogRow.seq.desc())
        .limit(chunks)
    )
    tail = "".join(reversed([str(data) for (data,) in rows]))
    notice = await session.scalar(
        select(JobLogRow.data).where(JobLogRow.job_pk == job_pk, JobLogRow.seq == CUT_SEQ)
    )
    return tail + str(notice) if notice is not None else tail


async def output_tails(session: AsyncSession, job_pks: Collection[int], chunks: int = 20) -> dict[int, str]:
    """:func:`output_tail` of each of the jobs, in one query (a check run shows every job's); a job with
    no output is missing from the answer."""
    if not job_pks:
        return {}
    newest = (
        func.row_number().over(partition_by=JobLogRow.job_pk, order_by=JobLogRow.seq.desc()).label("newest")
    )
    ranked = (
        select(JobLogRow.job_pk, JobLogRow.seq, JobLogRow.data, newest)
        .where(JobLogRow.job_pk.in_(job_pks), JobLogRow.seq >= 0)
        .subquery()
    )
    rows = await session.execute(
        select(ranked.c.job_pk, ranked.c.seq, ranked.c.data)
        .where(ranked.c.newest <= chunks)
        .union_all(
            select(JobLogRow.job_pk, JobLogRow.seq, JobLogRow.data).where(
                JobLogRow.job_pk.in_(job_pks), JobLogRow.seq == CUT_SEQ
            )
        )
    )
    kept: dict[int, list[tuple[int, str]]] = {}
    notices: dict[int, str] = {}
    for job_pk, seq, data in rows:
        if seq == CUT_SEQ:
            notices[job_pk] = str(data)
        else:
            kept.setdefault(job_pk, []).append((seq, str(data)))
    return {
        job_pk: "".join(data for _, data in sorted(kept.get(job_pk, []))) + notices.get(job_pk, "")
        for job_pk in kept.keys() | notices.keys()
    }
