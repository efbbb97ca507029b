"""Re-runs from GitHub's UI: a check run's *Re-run* and *Retry* action, and *Re-run all* on the suite.

Each makes a fresh session for the same commit and workflow.
"""

from __future__ import annotations

import logging

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.github.checks import RETRY_ACTION, workflow_of
from kerrigan.github.payload import Payload
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import GitHubApp, retry
from kerrigan.store.sessions import find_sessions, latest_per_workflow

log = logging.getLogger(__name__)
router = Router()


@router.register("check_run", action="rerequested")
@router.register("check_run", action="requested_action")
async def on_check_run(event: Event, app: GitHubApp) -> None:
    """Retry the session behind one of our check runs."""
    data = Payload(event.data)
    check_run = data.object("check_run")
    if data.optional_string("action") == "requested_action":
        requested = data.optional_object("requested_action")
        identifier = requested.optional_string("identifier") if requested is not None else None
        if identifier != RETRY_ACTION["identifier"]:
            log.info("check_run action %r ignored", identifier)
            return
    installation, name = installation_id(data), repository_name(data)
    if installation is None or name is None or workflow_of(check_run.optional_string("name") or "") is None:
        return
    check_run_id = check_run.integer("id")
    async with app.database.sessions() as db:
        sessions = await find_sessions(db, name, check_run_id=check_run_id)
    external_id = check_run.optional_string("external_id")
    if not sessions and external_id:
        head_sha = check_run.sha("head_sha")
        async with app.database.sessions() as db:
            sessions = [s for s in await find_sessions(db, name, head_sha=head_sha) if s.id == external_id]
    if not sessions:
        log.warning("check run %s of %s has no session here; nothing to re-run", check_run_id, name)
        return
    await retry(app, app.repository(installation, name), sessions[-1:], event.delivery_id)


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
