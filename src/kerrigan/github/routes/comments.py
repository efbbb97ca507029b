"""``/kerrigan retry [workflow]``, ``/kerrigan cancel [workflow]``, ``/kerrigan hold [task]`` (hold a failed
job's board, :mod:`kerrigan.github.holds`) and ``/kerrigan approve [SHA] [secrets]`` in pull request
comments (``approve`` runs a fork's commit: the one named, or the head the comment was written on,
:mod:`kerrigan.core.approvals`; ``secrets`` also gives its jobs the repository secrets they name).

Only commenters with write, maintain or admin permission may use them (and System Admins may cancel and
hold); others get a reply saying so. Bots and edited comments are ignored. A command that was carried out
gets a reaction. A comment approves once: the same comment delivered again approves nothing
(:mod:`kerrigan.store.approvals`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Final

from cachetools import TTLCache
from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.approvals import (
    ApproveCommand,
    Approved,
    PullHead,
    Refusal,
    Refused,
    decide,
    read_approve,
)
from kerrigan.core.holds import HoldableJob
from kerrigan.core.sessions import Session, SessionState
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.holds import hold, job_for_command
from kerrigan.github.payload import Payload, PayloadError
from kerrigan.github.repository import COMMENT_LIMIT, Repository
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import approve, retry, still_never_scheduled
from kerrigan.store.approvals import Approval, find_approval
from kerrigan.store.cancel import cancel_session
from kerrigan.store.deliveries import check_fence
from kerrigan.store.reservations import Reservation
from kerrigan.store.sessions import commits_beginning, find_sessions, latest_per_workflow

log = logging.getLogger(__name__)
router = Router()

MAX_NUMBER = 2**31 - 1  # sessions keep the pull request's number in a 32-bit column
LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
QUOTED_MAX: Final = 100  # characters of a command's argument a reply quotes back
COMMAND = re.compile(r"\A\s*/kerrigan\s+(?P<verb>retry|cancel|approve|hold)\b[ \t]*(?P<argument>[^\n]*)")
PERMISSION_TTL_S: Final = 60
# GitHub's answers to "may this login write here?", kept briefly: a burst of Cancel clicks asks once.
# Keyed by the API's address too, so two GitHubs (a test's stand-ins, say) never share an answer.
_PERMISSIONS: TTLCache[tuple[str, str, str], tuple[bool, str]] = TTLCache(maxsize=4096, ttl=PERMISSION_TTL_S)


async def may_cancel(app: GitHubApp, repo: Repository, login: str) -> tuple[bool, str]:
    """Whether ``login`` may cancel the repository's sessions, and the name of its role: System Admins
    may, and those GitHub says have write, maintain or admin (asked once per ``PERMISSION_TTL_S``)."""
    if login.lower() in app.settings.admins:
        return True, "System Admin"
    key = (app.settings.github_api_url, repo.full_name.lower(), login.lower())
    answer = _PERMISSIONS.get(key)
    if answer is None:
        answer = await repo.permission(login)
        _PERMISSIONS[key] = answer
    return answer


@router.register("issue_comment", action="created")
async def on_comment(event: Event, app: GitHubApp) -> None:
    """Carry out a ``/kerrigan`` command on a pull request."""
    data = Payload(event.data)
    issue = data.object("issue")
    comment = data.object("comment")
    match = COMMAND.match(comment.optional_string("body", max_length=COMMENT_LIMIT) or "")
    installation, name = installation_id(data), repository_name(data)
    if match is None or not issue.has("pull_request") or installation is None or name is None:
        return
    sender = data.object("sender")
    if sender.optional_string("type") == "Bot":
        return
    login = sender.string("login", max_length=100)
    if LOGIN.fullmatch(login) is None:  # it goes into the permission call's path
        raise PayloadError(f"payload field sender.login not a GitHub login ({login[:50]!r})")
    number = issue.integer("number", maximum=MAX_NUMBER)
    comment_id = comment.integer("id")
    repo = app.repository(installation, name)
    verb = match["verb"]
    may_write, permission = (
        await may_cancel(app, repo, login) if verb in ("cancel", "hold") else await repo.permission(login)
    )
    if not may_write:
        await repo.comment(
            number,
            f"@{login} `/kerrigan {verb}` needs write, maintain or admin permission on this repository; "
            f"you have {permission}. Ask a maintainer to run it.",
        )
        return
    if verb == "approve":
        argument = match["argument"].strip()
        if await _approve(app, repo, number=number, comment=comment, login=login, argument=argument):
            await repo.react(comment_id, "rocket")
        return
    sha = Payload(await repo.pull_request(number), "pull_request").object("head").sha("sha")
    if verb == "hold":
        if not await _hold(app, repo, number, sha, task=match["argument"].strip(), login=login):
            return
    elif verb == "cancel":
        workflow = match["argument"].strip()
        if not await _cancel(app, repo, sha, workflow, login):
            what = f"workflow {quoted(workflow)}" if workflow else "session"
            await repo.comment(number, f"@{login} there is no running or queued {what} at `{sha[:12]}`.")
            return
    else:
        workflow = match["argument"].strip()
        done, skipped = await _retry(app, repo, sha, workflow, event.delivery_id)
        if skipped:
            await repo.comment(number, skipped_reply(login, sha, skipped, retried=len(done)))
        if not done:
            if not skipped:
                what = f"workflow {quoted(workflow)}" if workflow else "failed session"
                await repo.comment(number, f"@{login} there is no {what} to retry at `{sha[:12]}`.")
            return
    await repo.react(comment_id, "rocket")


async def _approve(
    app: GitHubApp, repo: Repository, *, number: int, comment: Payload, login: str, argument: str
) -> bool:
    """Carry out ``/kerrigan approve`` from a writer: approve the commit the comment covers, or reply why
    nothing was approved; whether something was."""
    command = read_approve(argument)
    if command is None:
        await repo.comment(
            number,
            f"@{login} `/kerrigan approve` takes the commit to run (its sha, at least 7 characters) and "
            "then, to give its jobs the repository secrets they name, `secrets`: "
            f"`/kerrigan approve [SHA] [secrets]`; not {quoted(argument)}.",
        )
        return False
    comment_id = comment.integer("id")
    async with app.database.sessions() as db:
        earlier = await find_approval(db, comment_id)
        seen = await commits_beginning(db, repo.full_name, command.sha) if command.sha else set()
    if earlier is not None:
        log.warning(
            "comment %d on %s#%d approved %s before: delivered again, it approves nothing more",
            comment_id,
            repo.full_name,
            number,
            earlier.head_sha[:12],
        )
        return False
    written = comment.optional_string("created_at", max_length=40)
    decision = decide(command, await _pull_head(repo, number), comment.optional_time("created_at"), seen)
    if isinstance(decision, Refused):
        await repo.comment(number, refusal_reply(login, command, decision, written))
        return False
    approval = Approval(
        comment_id,
        repo.full_name,
        number,
        decision.sha,
        login,
        command.secrets,
        app.database.clock(),
    )
    done = await approve(app, repo, approval)
    if done is None:  # the same comment, delivered twice at once: the other delivery approved
        return False
    if not done:
        await repo.comment(number, f"@{login} nothing here waits for approval at `{decision.sha}`.")
        return False
    await repo.comment(number, approved_reply(login, decision, done, secrets=command.secrets))
    return True


async def _pull_head(repo: Repository, number: int) -> PullHead:
    """The pull request's head as GitHub has it now, with when the pull request and its head repository
    last changed."""
    pull = Payload(await repo.pull_request(number), "pull_request")
    head = pull.object("head")
    head_repo = head.optional_object("repo")
    return PullHead(
        head.sha("sha"),
        pull.optional_time("updated_at"),
        head_repo.optional_time("pushed_at") if head_repo is not None else None,
    )


def refusal_reply(login: str, command: ApproveCommand, refused: Refused, commented_at: str | None) -> str:
    """Why the comment approved nothing, and the command that would approve the head."""
    head = refused.head
    again = f"`/kerrigan approve {head}{' secrets' if command.secrets else ''}`"
    if refused.reason is Refusal.MOVED:
        if refused.named is not None:
            return (
                f"@{login} the head of this pull request moved from `{refused.named}` to `{head}`: review "
                f"`{head}` and comment {again} to run it."
            )
        return (
            f"@{login} `{command.sha}` is not the head of this pull request; its head is `{head}`: review it "
            f"and comment {again} to run it."
        )
    if refused.reason is Refusal.AMBIGUOUS:
        return (
            f"@{login} `{command.sha}` could name more than one commit (a fork can make one whose sha begins "
            f"the same way), so nothing was approved. The head is `{head}`: review it and comment {again}."
        )
    written = f" (written at {quoted(commented_at, 40)})" if commented_at else ""
    return (
        f"@{login} this pull request changed after your comment{written}, so Kerrigan cannot tell which "
        f"commit you saw, and approved nothing. Its head is now `{head}`: review it and comment {again}."
    )


def approved_reply(login: str, approved: Approved, sessions: list[Session], *, secrets: bool) -> str:
    """The reply to an approval: the commit approved, the workflows that will run, and about secrets."""
    workflows = ", ".join(quoted(name) for name in dict.fromkeys(session.workflow for session in sessions))
    given = "with the repository secrets their tasks name" if secrets else "without the repository's secrets"
    return f"@{login} approved `{approved.sha}` to run on lab hardware: {workflows}, {given}."


def quoted(argument: str, limit: int = QUOTED_MAX) -> str:
    """A command's argument as a reply quotes it: in code, cut to ``limit`` characters (a comment may be
    as long as GitHub allows, and a reply quoting it whole would be refused), backticks made harmless."""
    cut = argument[:limit].replace("`", "'")
    return f"`{cut}`" + ("… (cut)" if len(argument) > limit else "")


def skipped_reply(login: str, sha: str, skipped: list[tuple[Session, str]], *, retried: int) -> str:
    """The reply naming the failed sessions a plain ``/kerrigan retry`` left alone, and why."""
    lines = [
        f"@{login} retried {retried} failed session(s) at `{sha[:12]}`; not these, which would fail the same "
        "way again:",
        "",
        *(f"- `{session.workflow}`: {reason}" for session, reason in skipped),
        "",
        "Push a fix for a manifest's errors; once the lab has a device for a task that can never be "
        "scheduled, `/kerrigan retry WORKFLOW` re-runs that workflow.",
    ]
    return "\n".join(lines)


async def _retry(
    app: GitHubApp, repo: Repository, sha: str, workflow: str, delivery_id: str | None
) -> tuple[list[Session], list[tuple[Session, str]]]:
    """Re-run ``workflow``'s latest session at ``sha`` (whatever it ended as), or without one every failed
    session that may pass; the new sessions, and the failed ones skipped with why."""
    async with app.database.sessions() as db:
        sessions = latest_per_workflow(await find_sessions(db, repo.full_name, head_sha=sha))
    skipped: list[tuple[Session, str]] = []
    if workflow:
        chosen = [s for s in sessions if s.workflow == workflow]
    else:
        chosen, never = [], []
        for session in (s for s in sessions if s.failed):
            reason = session.cannot_pass()
            if reason is None:
                chosen.append(session)
            elif session.has_manifest_errors:
                skipped.append((session, reason))
            else:  # a task had no device then: the lab may have one now
                never.append(session)
        if never:
            still = await still_never_scheduled(app, repo, never)
            chosen += [session for session in never if session.id not in still]
            skipped += [(session, still[session.id]) for session in never if session.id in still]
    if not chosen:
        return [], skipped
    return await retry(app, repo, chosen, delivery_id), skipped


async def _hold(app: GitHubApp, repo: Repository, number: int, sha: str, *, task: str, login: str) -> bool:
    """Carry out ``/kerrigan hold [task]`` from a writer and reply who holds which board until when, or
    why nothing was held; whether a hold is there."""
    job, problem = await job_for_command(app, repo.full_name, sha, task)
    if job is None:
        await repo.comment(number, f"@{login} holds no board: {problem}.")
        return False
    outcome = await hold(app, job, login)
    if outcome.refused:
        await repo.comment(number, f"@{login} holds no board: {outcome.refused}.")
        return False
    await repo.comment(number, hold_reply(login, job, outcome.reservations, made=outcome.made))
    return True


def hold_reply(login: str, job: HoldableJob, reservations: Sequence[Reservation], *, made: bool) -> str:
    """Who holds which board of ``job``, and until when (or that it is queued for it)."""
    lines = [
        f"@{login} {'' if made else 'already '}holds the board(s) of failed job {job.pk} "
        f"({quoted(job.task_id)}):",
        "",
    ]
    for reservation in reservations:
        device = reservation.device_id or reservation.device or "?"
        if reservation.ends_at is not None:
            when = f"until {reservation.ends_at.strftime('%Y-%m-%d %H:%M UTC')}"
        else:
            when = f"queued: granted once it is free ({reservation.duration_s // 60} min from then)"
        lines.append(f"- `{device}`, reservation `{reservation.id[:8]}`: {when}")
    lines += ["", "`kerrigan reservations` lists them; `kerrigan release ID` gives a board back."]
    return "\n".join(lines)


async def _cancel(app: GitHubApp, repo: Repository, sha: str, workflow: str, login: str) -> list[str]:
    """Cancel the sessions at ``sha`` that have not ended (``workflow``'s only, when named); their ids."""
    database = app.database
    async with database.sessions() as db:
        sessions = await find_sessions(db, repo.full_name, head_sha=sha, workflow=workflow or None)
    cancelled = []
    async with database.writing(), database.sessions() as db, db.begin():
        await check_fence(db)
        for session in sessions:
            if session.state is SessionState.COMPLETED:
                continue
            done = await cancel_session(
                db, session.id, database.clock(), by=login, reason=f"cancelled by {login}"
            )
            if done is not None:  # cancelled now, or stopping from an earlier cancel
                cancelled.append(session.id)
    return cancelled
