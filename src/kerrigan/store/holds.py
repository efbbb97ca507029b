"""Holds in the database (:mod:`kerrigan.core.holds`): a failed job's board(s) reserved for a person.

:func:`place_hold` queues one reservation per board of the job, each pinned to its device and marked as
the hold of that job (``held_job_pk``), and audits it; asked again by the same person while their hold
lasts (a redelivered webhook, a second click), it answers the hold there is rather than making another.
:func:`note_refusal` keeps on the job's session why a click held nothing, for its check run to say;
:func:`holds_of` reads a session's holds for its check run; :func:`held_workspaces` tells a runner host
which of its jobs' workspaces a hold keeps; :func:`shell_target` who may open a shell in a job's sandbox.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.holds import HoldableJob, HoldShown, hold_requests, refusal
from kerrigan.core.inventory import DeviceState, Inventory
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.core.job_shell import HoldOfJob
from kerrigan.core.lifecycle import JobState
from kerrigan.core.reservations import DEFAULT_PER_USER, RequestError, ReservationState, over_limit
from kerrigan.core.roles import Principal
from kerrigan.store.audit import Change, record
from kerrigan.store.models import DeviceRow, JobRow, PoolRow, ReservationRow, SessionRow
from kerrigan.store.reservations import (
    Reservation,
    create_reservation,
    get_reservation,
    held_count,
    hold_changed,
)


class HoldRefusedError(Exception):
    """The job's boards cannot be held: why, in words for the person."""


@dataclass(frozen=True, slots=True)
class JobToHold:
    """A job with what a hold's permission check needs: its session and repository."""

    job: HoldableJob
    session_id: str
    session_pk: int
    repository: str
    installation_id: int | None


def _holdable(row: JobRow) -> HoldableJob:
    devices = tuple(role["device"] for role in row.devices or () if role.get("device"))
    if not devices and row.device_id is not None and not row.boardless:
        devices = (row.device_id,)
    return HoldableJob(row.pk, row.task_id, JobState(row.state), devices, row.attempt)


async def job_to_hold(session: AsyncSession, job_pk: int) -> JobToHold | None:
    """The job ``job_pk`` (its row number, the id the API and the CLI show), or None when there is none."""
    found = (
        await session.execute(
            select(JobRow, SessionRow.id, SessionRow.repository, SessionRow.installation_id)
            .join(SessionRow, SessionRow.pk == JobRow.session_pk)
            .where(JobRow.pk == job_pk)
        )
    ).one_or_none()
    if found is None:
        return None
    row, session_id, repository, installation = found
    return JobToHold(_holdable(row), session_id, row.session_pk, repository or "", installation)


async def session_jobs(session: AsyncSession, session_pk: int) -> list[HoldableJob]:
    """The jobs of a session, as holds see them."""
    rows = await session.scalars(select(JobRow).where(JobRow.session_pk == session_pk).order_by(JobRow.pk))
    return [_holdable(row) for row in rows]


async def place_hold(
    session: AsyncSession,
    principal: Principal,
    job: HoldableJob,
    now: datetime,
    *,
    duration_s: int,
    inventory: Inventory,
    per_user: int = DEFAULT_PER_USER,
) -> tuple[list[Reservation], bool]:
    """Hold ``job``'s board(s) for ``principal`` (whose right to was checked): its reservations, one per
    board, and whether they were made now (False: the person's hold of the job that lasts still).
    :class:`HoldRefusedError` says why not (nothing queued), as does :class:`RequestError` for a person
    over ``KERRIGAN_RESERVATIONS_PER_USER`` (a gang job's boards count as one)."""
    login = principal.login
    if session.get_bind().dialect.name == "postgresql":
        # One person's requests one at a time: two deliveries of one click must not both hold.
        await session.execute(select(func.pg_advisory_xact_lock(func.hashtext(login.lower()))))
    existing = (
        await session.scalars(
            select(ReservationRow.id)
            .where(
                ReservationRow.held_job_pk == job.pk,
                func.lower(ReservationRow.login) == login.lower(),
                ReservationRow.state != ReservationState.ENDED,
            )
            .order_by(ReservationRow.pk)
        )
    ).all()
    if existing:
        return [await get_reservation(session, reservation_id) for reservation_id in existing], False
    retired = await session.scalars(
        select(DeviceRow.id).where(DeviceRow.id.in_(job.devices), DeviceRow.state == DeviceState.RETIRED)
    )
    why = refusal(job, frozenset(retired))
    if why is None:
        missing = [device for device in job.devices if device not in inventory.devices_by_id]
        why = f"board {', '.join(missing)} of job {job.pk} is no longer in the lab" if missing else None
    if why is not None:
        raise HoldRefusedError(why)
    problem = over_limit(await held_count(session, login), per_user)
    if problem is not None:
        raise RequestError("reservations", problem)
    made = []
    for request in hold_requests(job, duration_s):
        reservation, _ = await create_reservation(
            session, principal, request, now, inventory=inventory, held_job_pk=job.pk
        )
        pool = await session.scalar(
            select(PoolRow.id)
            .join(DeviceRow, DeviceRow.pool_pk == PoolRow.pk)
            .where(DeviceRow.id == request.device)
        )
        change = FieldChange(
            ChangeKind.ADD, "reservation", reservation.id, f"hold:{request.device}", None, f"job {job.pk}"
        )
        await record(session, Change(login, now), change, pool)
        made.append(reservation)
    await note_refusal(session, job.pk, None, now)
    return made, True


async def note_refusal(session: AsyncSession, job_pk: int, note: str | None, now: datetime) -> None:
    """Keep on the job's session why a hold of it held nothing (``None``: a hold was made, the last note
    goes); its check run shows it anew either way."""
    session_pk = await session.scalar(select(JobRow.session_pk).where(JobRow.pk == job_pk))
    row = await session.get(SessionRow, session_pk) if session_pk is not None else None
    if row is None:
        return
    row.hold_note = note[:300] if note is not None else None
    await hold_changed(session, job_pk, now)


async def holds_of(session: AsyncSession, job_pks: Collection[int]) -> list[HoldShown]:
    """The holds of these jobs' boards, oldest first, with those that ended."""
    if not job_pks:
        return []
    rows = await session.execute(
        select(ReservationRow, JobRow.task_id)
        .join(JobRow, JobRow.pk == ReservationRow.held_job_pk)
        .where(ReservationRow.held_job_pk.in_(list(job_pks)))
        .order_by(ReservationRow.pk)
    )
    shown = []
    for row, task_id in rows:
        until = row.ends_at if row.state == ReservationState.ACTIVE else row.wait_until
        device = row.device_id or row.device or "?"
        shown.append(HoldShown(row.login, device, int(row.held_job_pk or 0), task_id, row.state, until))
    return shown


async def held_workspaces(session: AsyncSession, host: str) -> list[str]:
    """The ids of the jobs run on runner host ``host`` that a hold not ended (waiting or active) holds:
    their workspaces are kept there until it ends (docs/runner.md, capability ``held_workspaces``)."""
    rows = await session.scalars(
        select(JobRow.pk)
        .join(ReservationRow, ReservationRow.held_job_pk == JobRow.pk)
        .where(JobRow.host == host, ReservationRow.state != ReservationState.ENDED)
        .distinct()
        .order_by(JobRow.pk)
    )
    return [str(pk) for pk in rows]


@dataclass(frozen=True, slots=True)
class ShellTarget:
    """A job a shell may be asked for: where it ran (None: nowhere yet), its device, its holds and its
    repository ("" for the lab's own job: a health check)."""

    host: str | None
    device_id: str | None
    holds: tuple[HoldOfJob, ...]
    repository: str


async def shell_target(session: AsyncSession, job_pk: int) -> ShellTarget | None:
    """Job ``job_pk``'s host, device and the reservations holding it (``kerrigan shell``), or None when
    there is no such job."""
    job = (
        await session.execute(
            select(JobRow.host, JobRow.device_id, SessionRow.repository)
            .join(SessionRow, SessionRow.pk == JobRow.session_pk)
            .where(JobRow.pk == job_pk)
        )
    ).first()
    if job is None:
        return None
    rows = await session.execute(
        select(ReservationRow.login, ReservationRow.state, ReservationRow.ends_at)
        .where(ReservationRow.held_job_pk == job_pk, ReservationRow.state != ReservationState.ENDED)
        .order_by(ReservationRow.pk)
    )
    holds = tuple(HoldOfJob(login, ReservationState(state), ends_at) for login, state, ends_at in rows)
    return ShellTarget(job.host, job.device_id, holds, job.repository or "")
