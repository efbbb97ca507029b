"""``push``: workflows whose ``on.push.branches`` match. Tag pushes and branch deletions start nothing."""

from __future__ import annotations

import logging

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.triggers import Push, branch_of
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.payload import Payload
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import Trigger, start_workflows

log = logging.getLogger(__name__)
router = Router()


@router.register("push")
async def on_push(event: Event, app: GitHubApp) -> None:
    """Start the workflows this push runs."""
    data = Payload(event.data)
    ref = data.optional_string("ref", max_length=255)
    branch = branch_of(ref)
    installation, name = installation_id(data), repository_name(data)
    if data.optional_boolean("deleted") or branch is None or installation is None or name is None:
        log.info("push %s to %s starts nothing (tag, deletion or no installation)", event.delivery_id, ref)
        return
    repo = app.repository(installation, name)
    trigger = Trigger(
        sha=data.sha("after"),
        event=Push(branch),
        event_name="push",
        ref=branch,
        delivery_id=event.delivery_id,
    )
    await start_workflows(app, repo, trigger)
