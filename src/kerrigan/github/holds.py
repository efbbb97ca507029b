"""Hold board from GitHub: a check run's *Hold board* action and ``/kerrigan hold [task]`` on a pull request
(:mod:`kerrigan.core.holds`). The clicker must write to the repository (or be a System Admin), as for
*Cancel*; the hold, or why there is none, shows on the job's check run (and a comment's reply says it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select

from kerrigan.core.holds import HoldableJob, choose, failed
from kerrigan.core.reservations import RequestError
from kerrigan.core.roles import Principal
from kerrigan.github.github_app import GitHubApp
from kerrigan.store.deliveries import check_fence
from kerrigan.store.holds import HoldRefusedError, note_refusal, place_hold, session_jobs
from kerrigan.store.inventory import load_inventory
from kerrigan.store.models import SessionRow
from kerrigan.store.reservations import Reservation, UnmatchableError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HoldOutcome:
    """What a hold request did: the reservations of the hold (``made``: now, else the person's hold that
    lasts), or why nothing was held."""

    job: HoldableJob | None
    reservations: tuple[Reservation, ...] = ()
    made: bool = False
    refused: str = ""


async def hold(app: GitHubApp, job: HoldableJob, login: str) -> HoldOutcome:
    """Hold ``job``'s board(s) for ``login`` (a writer, as checked): the hold, or why not, which its
    session's check run then shows."""
    database, settings = app.database, app.settings
    principal = Principal(login, admin=login.lower() in settings.admins)
    try:
        async with database.writing(), database.sessions() as db, db.begin():
            await check_fence(db)
            reservations, made = await place_hold(
                db,
                principal,
                job,
                database.clock(),
                duration_s=settings.hold_s,
                inventory=await load_inventory(db),
                per_user=settings.reservations_per_user,
            )
    except (HoldRefusedError, RequestError, UnmatchableError) as exc:
        why = exc.message if isinstance(exc, RequestError) else str(exc)
        await refuse(app, job, f"@{login} holds no board: {why}")
        return HoldOutcome(job, refused=why)
    log.info("job %d: %s holds %s", job.pk, login, ", ".join(r.device or "?" for r in reservations))
    return HoldOutcome(job, tuple(reservations), made)


async def refuse(app: GitHubApp, job: HoldableJob, note: str) -> None:
    """Keep why a hold of ``job`` held nothing, for its check run to say."""
    database = app.database
    async with database.writing(), database.sessions() as db, db.begin():
        await check_fence(db)
        await note_refusal(db, job.pk, note, database.clock())


async def failed_job_of(app: GitHubApp, session_id: str) -> HoldableJob | None:
    """The failed job a check run's *Hold board* means: the only failed task's newest attempt, or with
    several, the first task's (``/kerrigan hold TASK`` names another)."""
    async with app.database.sessions() as db:
        session_pk = await db.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
        jobs = await session_jobs(db, session_pk) if session_pk is not None else []
    chosen = choose(jobs, "")
    if chosen.job is not None:
        return chosen.job
    first = next((job for job in jobs if failed(job)), None)
    return choose(jobs, first.task_id).job if first is not None else None


async def job_for_command(
    app: GitHubApp, repository: str, sha: str, task: str
) -> tuple[HoldableJob | None, str]:
    """The failed job ``/kerrigan hold [task]`` means at ``sha``: in the newest session there with a failed
    job (of ``task``, when named); else why none is."""
    async with app.database.sessions() as db:
        pks = (
            await db.scalars(
                select(SessionRow.pk)
                .where(SessionRow.repository == repository, SessionRow.head_sha == sha)
                .order_by(SessionRow.pk.desc())
            )
        ).all()
        problem = f"no session ran at `{sha[:12]}`"
        for session_pk in pks:
            chosen = choose(await session_jobs(db, session_pk), task)
            if chosen.job is not None:
                return chosen.job, ""
            problem = f"{chosen.problem} at `{sha[:12]}`"
            if chosen.ambiguous:  # in the newest session with failed jobs: say so, not what older ones had
                return None, problem
    return None, problem
