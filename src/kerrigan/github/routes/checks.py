"""From GitHub's UI: a check run's *Re-run* and *Retry* action and *Re-run all* on the suite, each making a
fresh session for the same commit and workflow; a check run's *Cancel* action, cancelling its session; and
its *Hold board* action, reserving a failed job's board(s) for the clicker (:mod:`kerrigan.github.holds`).

Cancel and Hold board are for the repository's writers and System Admins (``comments.may_cancel``); anyone
else's Cancel changes nothing and is logged (a check run's action has no way to answer the clicker); their
Hold board is refused on the check run itself, with the reason.
"""

from __future__ import annotations

import logging
from typing import Final

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.sessions import Session
from kerrigan.github.checks import CANCEL_ACTION, HOLD_ACTION, RETRY_ACTION, workflow_of
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.holds import failed_job_of, hold, refuse
from kerrigan.github.payload import Payload, PayloadError
from kerrigan.github.repository import Repository
from kerrigan.github.routes.comments import LOGIN, may_cancel
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import retry
from kerrigan.store.cancel import cancel_session
from kerrigan.store.deliveries import check_fence
from kerrigan.store.sessions import find_sessions, latest_per_workflow

log = logging.getLogger(__name__)
router = Router()
ACTIONS: Final = (RETRY_ACTION["identifier"], CANCEL_ACTION["identifier"], HOLD_ACTION["identifier"])


@router.register("check_run", action="rerequested")
@router.register("check_run", action="requested_action")
async def on_check_run(event: Event, app: GitHubApp) -> None:
    """Retry, or cancel, the session behind one of our check runs."""
    data = Payload(event.data)
    check_run = data.object("check_run")
    identifier: str | None = RETRY_ACTION["identifier"]  # a re-run is a retry
    if data.optional_string("action") == "requested_action":
        requested = data.optional_object("requested_action")
        identifier = requested.optional_string("identifier") if requested is not None else None
        if identifier not in (
            RETRY_ACTION["identifier"],
            CANCEL_ACTION["identifier"],
            HOLD_ACTION["identifier"],
        ):
            log.info("check_run action %r ignored", identifier)
            return
    installation, name = installation_id(data), repository_name(data)
    if installation is None or name is None or workflow_of(check_run.optional_string("name") or "") is None:
        return
    sessions = await _sessions_of(app, name, check_run)
    if not sessions:
        log.warning("check run %s of %s has no session here; nothing to do", check_run.integer("id"), name)
        return
    repo = app.repository(installation, name)
    if identifier in (CANCEL_ACTION["identifier"], HOLD_ACTION["identifier"]):
        login = data.object("sender").string("login", max_length=100)
        if LOGIN.fullmatch(login) is None:  # it goes into the permission call's path
            raise PayloadError(f"payload field sender.login not a GitHub login ({login[:50]!r})")
        if identifier == HOLD_ACTION["identifier"]:
            await _hold(app, repo, sessions[-1], login)
        else:
            await _cancel(app, repo, sessions[-1], login)
        return
    await retry(app, repo, sessions[-1:], event.delivery_id)


async def _sessions_of(app: GitHubApp, name: str, check_run: Payload) -> list[Session]:
    """The sessions a check run shows, oldest first: by its id, else by the session id it carries."""
    check_run_id = check_run.integer("id")
    async with app.database.sessions() as db:
        sessions = await find_sessions(db, name, check_run_id=check_run_id)
    external_id = check_run.optional_string("external_id")
    if not sessions and external_id:
        head_sha = check_run.sha("head_sha")
        async with app.database.sessions() as db:
            sessions = [s for s in await find_sessions(db, name, head_sha=head_sha) if s.id == external_id]
    return sessions


async def _cancel(app: GitHubApp, repo: Repository, session: Session, login: str) -> None:
    may, role = await may_cancel(app, repo, login)
    if not may:
        log.warning(
            "%s (%s on %s) may not cancel session %s: nothing changed",
            *(login, role, repo.full_name, session.id),
        )
        return
    database = app.database
    async with database.writing(), database.sessions() as db, db.begin():
        await check_fence(db)
        done = await cancel_session(
            db, session.id, database.clock(), by=login, reason=f"cancelled by {login}"
        )
    if done is not None and not done.changed:
        log.info("session %s: cancel by %s changed nothing (%s)", session.id, login, done.state.value)
    else:
        log.info("session %s cancelled by %s", session.id, login)


async def _hold(app: GitHubApp, repo: Repository, session: Session, login: str) -> None:
    """Hold board: the session's failed job's board(s) for a writer; the check run says who holds which
    board until when, or why nothing was held."""
    job = await failed_job_of(app, session.id)
    if job is None:
        log.info("session %s: hold by %s, but no job of it failed on a board", session.id, login)
        return
    may, role = await may_cancel(app, repo, login)
    if not may:
        log.warning("%s (%s on %s) may not hold job %d's board", login, role, repo.full_name, job.pk)
        await refuse(
            app,
            job,
            f"@{login} holds no board: Hold board needs write, maintain or admin permission on "
            f"{repo.full_name}; {login} has {role}",
        )
        return
    await hold(app, job, login)


@router.register("check_suite", action="rerequested")
async def on_check_suite(event: Event, app: GitHubApp) -> None:
    """Re-run all: a fresh session for every workflow that ran at the suite's commit."""
    data = Payload(event.data)
    installation, name = installation_id(data), repository_name(data)
    suite = data.optional_object("check_suite")
    sha = suite.optional_sha("head_sha") if suite is not None else None
    if installation is None or name is None or sha is None:
        return
    async with app.database.sessions() as db:
        sessions = latest_per_workflow(await find_sessions(db, name, head_sha=sha))
    await retry(app, app.repository(installation, name), sessions, event.delivery_id)
