"""``/kerrigan retry [workflow]`` and ``/kerrigan approve`` in pull request comments.

Only commenters with write, maintain or admin permission may use them; others get a reply saying so. Bots
and edited comments are ignored. A command that was carried out gets a reaction.
"""

from __future__ import annotations

import logging
import re

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.sessions import Session
from kerrigan.github.payload import Payload, PayloadError
from kerrigan.github.repository import Repository
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import GitHubApp, approve, retry
from kerrigan.store.sessions import find_sessions, latest_per_workflow

log = logging.getLogger(__name__)
router = Router()

MAX_COMMENT = 65536  # GitHub's limit on a comment's body
MAX_NUMBER = 2**31 - 1  # sessions keep the pull request's number in a 32-bit column
_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
COMMAND = re.compile(r"\A\s*/kerrigan\s+(?P<verb>retry|approve)\b[ \t]*(?P<argument>[^\n]*)")


@router.register("issue_comment", action="created")
async def on_comment(event: Event, app: GitHubApp) -> None:
    """Carry out a ``/kerrigan`` command on a pull request."""
    data = Payload(event.data)
    issue = data.object("issue")
    comment = data.object("comment")
    match = COMMAND.match(comment.optional_string("body", max_length=MAX_COMMENT) or "")
    installation, name = installation_id(data), repository_name(data)
    if match is None or not issue.has("pull_request") or installation is None or name is None:
        return
    sender = data.object("sender")
    if sender.optional_string("type") == "Bot":
        return
    login = sender.string("login", max_length=100)
    if _LOGIN.fullmatch(login) is None:  # it goes into the permission call's path
        raise PayloadError(f"payload field sender.login not a GitHub login ({login[:50]!r})")
    number = issue.integer("number", maximum=MAX_NUMBER)
    comment_id = comment.integer("id")
    repo = app.repository(installation, name)
    may_write, permission = await repo.permission(login)
    verb = match["verb"]
    if not may_write:
        await repo.comment(
            number,
            f"@{login} `/kerrigan {verb}` needs write, maintain or admin permission on this repository; "
            f"you have {permission}. Ask a maintainer to run it.",
        )
        return
    sha = str((await repo.pull_request(number))["head"]["sha"])
    if verb == "approve":
        done = await approve(app, repo, sha)
        if not done:
            await repo.comment(number, f"@{login} nothing here waits for approval at `{sha[:12]}`.")
            return
    else:
        done = await _retry(app, repo, sha, match["argument"].strip(), event.delivery_id)
        if not done:
            what = (
                f"workflow `{match['argument'].strip()}`" if match["argument"].strip() else "failed session"
            )
            await repo.comment(number, f"@{login} there is no {what} to retry at `{sha[:12]}`.")
            return
    await repo.react(comment_id, "rocket")


async def _retry(
    app: GitHubApp, repo: Repository, sha: str, workflow: str, delivery_id: str | None
) -> list[Session]:
    async with app.database.sessions() as db:
        sessions = latest_per_workflow(await find_sessions(db, repo.full_name, head_sha=sha))
    chosen = (
        [s for s in sessions if s.workflow == workflow] if workflow else [s for s in sessions if s.failed]
    )
    if not chosen:
        return []
    return await retry(app, repo, chosen, delivery_id)
