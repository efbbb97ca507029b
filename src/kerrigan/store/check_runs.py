"""The check-run reconciler's side of the store: which check runs are behind, claims on them, and what
GitHub last confirmed or refused.

A session's ``version`` counts the states GitHub should show; ``shown_version`` is the last one GitHub
confirmed. A reconciler claims a session that is behind and due (``sync_due_at``) for a while, as delivery
workers claim deliveries: a fresh ``sync_claim`` token until ``sync_claimed_until``, renewed while it sends
and checked by every write after, so a reconciler whose claim was taken over writes nothing. Claims of a
dead process run out and are taken up by another.

A running job's output shows on its check run too, its latest lines, but a chunk of output does not make a
version of its own: :func:`output_arrived` records one only when the session's last version is at least
``OUTPUT_VERSION_EVERY`` old, so output alone updates a check run at most once in that time. The lines
that arrive after such a version show with the next one (the job's next output after the interval, or
its end).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import ColumnElement, case, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.flaky import Suspect
from kerrigan.core.holds import HoldShown
from kerrigan.core.log_streams import CONSOLE_SHOWN, LogStream
from kerrigan.core.results import JUnitReport
from kerrigan.core.sessions import Session, SessionState
from kerrigan.store.artifacts import ArtifactInfo, artifacts_of
from kerrigan.store.holds import holds_of
from kerrigan.store.jobs.output import output_tails
from kerrigan.store.jobs.records import JobRecord, session_job_records
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.results import results_of
from kerrigan.store.sessions import get_session
from kerrigan.store.suspects import task_key
from kerrigan.store.transitions import locked_session, record_version

ERROR_LIMIT = 4000  # characters of GitHub's answer kept on the session
OUTPUT_VERSION_EVERY: Final = timedelta(seconds=10)
# Of a console, more chunks than of output for the same 20 lines: an agent may send a board's lines as
# they come, a few at a time.
CONSOLE_TAIL_CHUNKS: Final = 64


@dataclass(frozen=True, slots=True)
class Claim:
    """A check run this reconciler may send until ``until``."""

    session_pk: int
    session_id: str
    token: str
    until: datetime
    attempts: int


@dataclass(frozen=True, slots=True)
class JobView:
    """A job as its check run shows it."""

    record: JobRecord
    output_tail: str
    suspect: str = ""  # its device is suspect for its task: the numbers, as a sentence
    results: tuple[JUnitReport, ...] = ()  # the JUnit XML files its runner sent
    files: tuple[ArtifactInfo, ...] = ()  # the files it uploaded, and the notes of those not kept
    console_tail: str = ""  # its board's console's last chunks, when it failed or timed out


@dataclass(frozen=True, slots=True)
class Projection:
    """What the check run of a session is rendered from, read in one transaction: the session (whose
    ``version`` the rendering is), its jobs, the resolution's check-run body, an unknown create, and why
    it was cancelled."""

    session: Session
    jobs: tuple[JobView, ...]
    resolution_body: dict[str, object] | None
    create_sent_version: int | None
    cancel_reason: str | None = None  # "cancelled by hubot", "superseded by 3f2a1b0"
    holds: tuple[HoldShown, ...] = ()  # who holds (or held) which failed job's board
    hold_note: str | None = None  # why the last Hold board click held nothing


def _due(now: datetime) -> tuple[ColumnElement[bool], ...]:
    return (
        SessionRow.sync_due_at <= now,
        or_(SessionRow.sync_claimed_until.is_(None), SessionRow.sync_claimed_until < now),
    )


async def claim_due(session: AsyncSession, now: datetime, lease: timedelta, limit: int = 16) -> list[Claim]:
    """Claim up to ``limit`` check runs that are behind and due, earliest due first."""
    query = (
        select(SessionRow.pk, SessionRow.id, SessionRow.sync_attempts)
        .where(*_due(now))
        .order_by(SessionRow.sync_due_at, SessionRow.pk)
        .limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=SessionRow, key_share=True)
    claims = []
    for pk, session_id, attempts in (await session.execute(query)).all():
        token = secrets.token_hex(16)
        claimed = await session.execute(
            update(SessionRow)
            .where(SessionRow.pk == pk, *_due(now))
            .values(sync_claim=token, sync_claimed_until=now + lease)
            .execution_options(synchronize_session=False)
        )
        if claimed.rowcount == 1:  # type: ignore[attr-defined]
            claims.append(Claim(pk, str(session_id), token, now + lease, int(attempts)))
    return claims


def _ours(claim: Claim) -> tuple[ColumnElement[bool], ...]:
    return SessionRow.pk == claim.session_pk, SessionRow.sync_claim == claim.token


async def _write(session: AsyncSession, claim: Claim, **values: object) -> bool:
    written = await session.execute(
        update(SessionRow).where(*_ours(claim)).values(**values).execution_options(synchronize_session=False)
    )
    return bool(written.rowcount == 1)  # type: ignore[attr-defined]


async def renew(session: AsyncSession, claim: Claim, until: datetime) -> bool:
    """Keep the claim until ``until``; whether it is still ours."""
    return await _write(session, claim, sync_claimed_until=until)


async def projection(
    session: AsyncSession, claim: Claim, suspects: Mapping[tuple[str, str], Suspect] | None = None
) -> Projection:
    """The session's state now, with its jobs and their output tails (of a running job, the lines so
    far), to render; ``suspects`` (:mod:`kerrigan.store.suspects`) names the failed jobs whose device
    fails their task more often than its peers."""
    # A check run shows the body stored with the resolution, never the per-device lists it was made from.
    found = await get_session(session, claim.session_id, device_lists=False)
    row = await session.get(SessionRow, claim.session_pk)
    assert row is not None
    records = await session_job_records(session, claim.session_pk)
    # A running job shows its latest lines; an ended one its last, also one that never started (its
    # output is then the runner's reason, such as a refused tarball).
    shown = [record.pk for record in records if record.started_at or record.finished_at]
    tails = await output_tails(session, shown)
    consoles = await output_tails(
        session,
        [record.pk for record in records if record.state in CONSOLE_SHOWN],
        CONSOLE_TAIL_CHUNKS,
        LogStream.CONSOLE,
    )
    results = await results_of(session, shown)
    files = await artifacts_of(session, shown)
    views = [
        JobView(
            record,
            tails.get(record.pk, ""),
            _suspect(found, record, suspects or {}),
            tuple(results.get(record.pk, ())),
            tuple(files.get(record.pk, ())),
            consoles.get(record.pk, ""),
        )
        for record in records
    ]
    return Projection(
        found,
        tuple(views),
        row.check_run_resolution,
        row.create_sent_version,
        row.cancel_reason,
        tuple(await holds_of(session, [record.pk for record in records])),
        row.hold_note,
    )


def _suspect(found: Session, record: JobRecord, suspects: Mapping[tuple[str, str], Suspect]) -> str:
    if record.device_id is None or record.state not in ("failed", "retried"):
        return ""
    suspect = suspects.get((task_key(found.repository, found.workflow, record.task_id), record.device_id))
    return suspect.sentence() if suspect is not None else ""


def _output_due(version_at: datetime | None, at: datetime) -> bool:
    return version_at is None or at - version_at >= OUTPUT_VERSION_EVERY


async def output_arrived(session: AsyncSession, job_pk: int, at: datetime) -> bool:
    """Output of the job was stored in this transaction: record a check-run version of its session so
    the check run shows the latest lines, unless the session's last version is younger than
    ``OUTPUT_VERSION_EVERY`` (or the session has ended). Whether a version was recorded.

    Read first without a lock, so that most chunks (which make no version) do not queue on the session
    row behind the other jobs of the session; read again under the lock before recording."""
    found = (
        await session.execute(
            select(SessionRow.pk, SessionRow.state, SessionRow.version_at)
            .join(JobRow, JobRow.session_pk == SessionRow.pk)
            .where(JobRow.pk == job_pk)
        )
    ).one_or_none()
    if found is None or found[1] == SessionState.COMPLETED or not _output_due(found[2], at):
        return False
    row = await locked_session(session, int(found[0]))
    if row.state == SessionState.COMPLETED or not _output_due(row.version_at, at):
        return False
    record_version(session, row, at)
    return True


async def create_sent(session: AsyncSession, claim: Claim, version: int) -> bool:
    """A create of ``version`` is about to be sent: until its answer is known, a retry looks for it first."""
    return await _write(session, claim, create_sent_version=version)


async def adopted(session: AsyncSession, claim: Claim, check_run_id: int) -> bool:
    """GitHub has the check run (created now, or found after an unknown outcome)."""
    return await _write(session, claim, check_run_id=check_run_id, create_sent_version=None)


async def not_created(session: AsyncSession, claim: Claim) -> bool:
    """GitHub said for certain that it created nothing: the next try creates without looking first."""
    return await _write(session, claim, create_sent_version=None)


async def shown(session: AsyncSession, claim: Claim, version: int, now: datetime) -> bool:
    """GitHub shows ``version``: done unless a newer version came meanwhile (then it is due at once).

    One statement, reading ``version`` as it is when it runs: a version recorded by another transaction
    after this reconciler last read the row is never cleared as shown (on SQLite a read does not begin
    the transaction, so a value read first and written back later could be stale).
    """
    shown_now = case((SessionRow.shown_version > version, SessionRow.shown_version), else_=version)
    return await _write(
        session,
        claim,
        shown_version=shown_now,
        sync_attempts=0,
        sync_due_at=case((SessionRow.version > shown_now, now), else_=None),
        # A newer version is behind since it was recorded (about: the newest one's time).
        unshown_since=case((SessionRow.version > shown_now, SessionRow.version_at), else_=None),
        sync_claim=None,
        sync_claimed_until=None,
    )


async def retry_later(
    session: AsyncSession, claim: Claim, at: datetime, *, failed: bool, attempts: int | None = None
) -> bool:
    """Give the claim back; try again at ``at`` (``failed``: after a failure, which counts for backoff;
    ``attempts``: the failures in a row so far, when this claim saw more than one)."""
    values: dict[str, object] = {"sync_due_at": at, "sync_claim": None, "sync_claimed_until": None}
    if failed:
        values["sync_attempts"] = attempts if attempts is not None else claim.attempts + 1
    return await _write(session, claim, **values)


async def refusal_noted(session: AsyncSession, claim: Claim, now: datetime, error: str) -> bool:
    """GitHub refused a version, and the short body sent instead is not through yet: keep GitHub's answer
    on the session meanwhile (the claim stays held)."""
    return await _write(session, claim, check_run_error=error[:ERROR_LIMIT], check_run_error_at=now)


async def refused(
    session: AsyncSession,
    claim: Claim,
    now: datetime,
    error: str,
    *,
    shown_version: int | None,
    retry_at: datetime,
) -> bool:
    """GitHub refused a version for good: keep its answer on the session. With ``shown_version`` GitHub
    shows a shorter body of that version instead (done); without, the version is tried again at
    ``retry_at`` (a newer version goes at once: the refusal does not stop it)."""
    values: dict[str, object] = {
        "check_run_error": error[:ERROR_LIMIT],
        "check_run_error_at": now,
        "sync_attempts": 0,
        "sync_claim": None,
        "sync_claimed_until": None,
    }
    if not await _write(session, claim, **values):
        return False
    if shown_version is not None:
        row = await session.get(SessionRow, claim.session_pk)
        assert row is not None
        row.shown_version = max(row.shown_version, shown_version)
        row.sync_due_at = None if row.shown_version >= row.version else now
        row.unshown_since = None if row.shown_version >= row.version else row.unshown_since
    else:
        await session.execute(
            update(SessionRow).where(SessionRow.pk == claim.session_pk).values(sync_due_at=retry_at)
        )
    return True


async def sweep(session: AsyncSession, now: datetime) -> int:
    """Make every session whose shown version is behind and that nothing will send due now; how many."""
    swept = await session.execute(
        update(SessionRow)
        .where(SessionRow.shown_version < SessionRow.version, SessionRow.sync_due_at.is_(None))
        .values(sync_due_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(swept.rowcount)  # type: ignore[attr-defined]


async def behind_count(session: AsyncSession) -> int:
    """How many check runs GitHub does not show up to date (for tests, metrics and the demo)."""
    rows = await session.execute(select(SessionRow.pk).where(SessionRow.shown_version < SessionRow.version))
    return len(rows.all())
