"""From an event to sessions: read the manifests at the commit, resolve against the inventory, store.

Nothing here writes to GitHub: a session is resolved and stored with its check run's first version, and the
reconciler (:mod:`kerrigan.github.reconciler`) shows it. Every entry point is safe to run twice for the same
delivery: a session is keyed by the delivery and the manifest's path, and a delivery whose worker lost its
claim writes nothing (:func:`kerrigan.store.deliveries.check_fence`).

Parsing manifests and resolving them against the inventory is work for the processor, not the event loop:
both run in a thread (``asyncio.to_thread``), so the server answers webhooks, probes and pages meanwhile.
A fork's pull request waiting for approval has its manifests parsed (its workflows' names and triggers say
which check runs wait) but not resolved: that waits for the approval.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.explain import Explanation, explain, explanation_json
from kerrigan.core.forks import for_fork
from kerrigan.core.inventory import Inventory
from kerrigan.core.job_spec import spec_of_task
from kerrigan.core.lifecycle import RetryPolicy, resolution_outcome
from kerrigan.core.manifest import CancelInProgress, ManifestResult, Priority, parse_manifest
from kerrigan.core.manifest.secret_names import unset_secrets
from kerrigan.core.matching import Outcome
from kerrigan.core.resolution import EMPTY as EMPTY_RESOLUTION
from kerrigan.core.resolution import Resolution
from kerrigan.core.sessions import Job, Session, SessionState, never_scheduled_reason
from kerrigan.core.triggers import EVENT_NAMES, Event, priority_for, runs_on
from kerrigan.core.yamlsource import Problem
from kerrigan.github.checks import (
    SessionContext,
    awaiting_approval_body,
    invalid_manifest_body,
    resolution_body,
)
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.repository import ManifestFile, Repository
from kerrigan.store.approvals import Approval, record_approval
from kerrigan.store.cancel import cancel_session
from kerrigan.store.deliveries import check_fence
from kerrigan.store.inventory import load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.store.retrying import in_transaction
from kerrigan.store.secrets import secret_names
from kerrigan.store.sessions import (
    create_session,
    delivered_manifests,
    find_sessions,
    queue_position,
    resolve_session,
    superseded_sessions,
)

log = logging.getLogger(__name__)
MAX_WORKFLOW_NAME = 100  # a manifest's name is at most this long; a file path standing in for it is cut


@dataclass(frozen=True, slots=True)
class Trigger:
    """What started (or restarts) sessions at one commit."""

    sha: str
    event: Event | None  # None for a retry: the workflows named in ``only`` run whatever their triggers
    event_name: str
    ref: str | None = None  # the branch; a fork's named with its owner (``mona:main``)
    pull_request: int | None = None
    awaiting_approval: bool = False
    fork_owner: str | None = None  # the owner of the fork whose code this is; None: the repository's own
    delivery_id: str | None = None
    only: Collection[str] | None = None
    workflow_run_id: int | None = None
    secrets_allowed: bool = True  # False for a retry of a session whose approval gave no secrets


def _context(app: GitHubApp, session: Session, position: int | None = None) -> SessionContext:
    return SessionContext(
        session_id=session.id,
        details_url=app.details_url(session.id),
        head_sha=session.head_sha,
        event=session.event,
        ref=session.head_branch,
        queue_position=position,
    )


async def start_workflows(app: GitHubApp, repo: Repository, trigger: Trigger) -> list[Session]:
    """Start every workflow the trigger runs at its commit: each becomes a session, resolved and stored
    with its check run's first version in one transaction (the reconciler shows it on GitHub)."""
    files = await repo.manifests(trigger.sha)
    chosen: list[tuple[ManifestFile, ManifestResult]] = []
    read = await asyncio.to_thread(_read_all, files, trigger.fork_owner)
    for file, manifest in zip(files, read, strict=True):
        name = manifest.name or file.path
        if trigger.only is not None and name not in trigger.only:
            continue
        workflow = manifest.workflow
        if workflow is not None and trigger.event is not None and not runs_on(workflow, trigger.event):
            continue
        if workflow is None and trigger.only is None and await _reported(app, repo, trigger.sha, file.path):
            continue  # a broken manifest is reported once per commit, not once per event
        chosen.append((file, manifest))
    if not chosen:
        return []
    database = app.database
    gets_secrets = trigger.secrets_allowed and not trigger.awaiting_approval
    async with database.sessions() as db:
        inventory = await load_inventory(db)
        descriptions = await label_keys(db)
        chosen = [
            (file, await _held_to_secrets(db, manifest, repo.full_name, gets_secrets))
            for file, manifest in chosen
        ]
    resolved = await asyncio.to_thread(
        _resolve_all,
        [manifest for _, manifest in chosen if not trigger.awaiting_approval],  # a fork's waits for approval
        inventory,
        descriptions,
        repo.full_name,
    )

    superseded: dict[str, list[str]] = {}

    async def store(db: AsyncSession) -> list[Session]:
        started = []
        superseded.clear()  # what an aborted attempt cancelled, it did not
        await check_fence(db)  # a delivery whose claim was taken over writes nothing
        handled = (
            await delivered_manifests(db, repo.full_name, trigger.delivery_id)
            if trigger.delivery_id is not None
            else set()
        )
        for file, manifest in chosen:
            if file.path in handled:
                continue  # this delivery was handled before a restart
            new = _new_session(app, repo, trigger, file, manifest)
            group = _group(new, manifest)
            session = await create_session(db, new, database.clock(), concurrency_group=group)
            started.append(await _resolve(app, db, session, manifest, resolved.get(file.path)))
            # A session waiting for approval supersedes nothing: the fork's code may not cancel even its
            # own older sessions before a writer has read it (approve supersedes, once approved).
            if group is not None and trigger.event is not None and not new.awaiting_approval:
                superseded[session.id] = await _supersede(db, session, manifest, group, database.clock())
        return started

    # The sessions, their first check-run versions and what they supersede are one transaction, done again
    # whole if the database aborts it (a deadlock): the delivery's effects happen once, or not at all.
    started = await in_transaction(database, store, what=f"{trigger.event_name} at {trigger.sha[:12]}")
    _log_superseded(superseded)
    log.info(
        "%s at %s of %s started %d sessions: %s",
        trigger.event_name,
        trigger.sha[:12],
        repo.full_name,
        len(started),
        ", ".join(f"{session.workflow} ({session.id})" for session in started) or "none (started before)",
    )
    return started


def _group(session: Session, manifest: ManifestResult) -> str | None:
    """The session's expanded concurrency group; None for a merge group's session (never superseded, it
    supersedes nothing) and for an invalid manifest. A fork's group meets only the same fork's sessions
    (:func:`kerrigan.store.sessions.superseded_sessions` compares the fork's owner too)."""
    workflow = manifest.workflow
    if workflow is None or session.event == "merge_group":
        return None
    return workflow.concurrency.expand(
        workflow=session.workflow,
        branch=session.head_branch,
        pull_request=session.pull_request,
        sha=session.head_sha,
    )


async def _supersede(
    db: AsyncSession, newer: Session, manifest: ManifestResult, group: str, at: datetime
) -> list[str]:
    """Cancel the older commits' sessions of ``group`` that the newer one's ``concurrency.cancel`` names;
    their ids, for :func:`_log_superseded` once the transaction is committed. A retry of an old commit is
    no newer commit: :func:`start_workflows` does not call this for it."""
    assert manifest.workflow is not None  # an invalid manifest has no group
    cancel = manifest.workflow.concurrency.cancel
    if cancel is CancelInProgress.NONE:
        return []
    older = await superseded_sessions(db, newer, group, running_too=cancel is CancelInProgress.IN_PROGRESS)
    for session_id in older:
        await cancel_session(db, session_id, at, by=None, reason=f"superseded by {newer.head_sha[:7]}")
    return older


def _log_superseded(superseded: Mapping[str, list[str]]) -> None:
    """Said after the commit: an attempt the database aborted and did again superseded nothing."""
    for newer, older in superseded.items():
        for session_id in older:
            log.info("session %s superseded by %s", session_id, newer)


async def _reported(app: GitHubApp, repo: Repository, sha: str, path: str) -> bool:
    async with app.database.sessions() as db:
        earlier = await find_sessions(db, repo.full_name, head_sha=sha)
    return any(session.manifest_path == path for session in earlier)


def _read(file: ManifestFile, fork_owner: str | None) -> ManifestResult:
    """Parse a manifest (a fork's as a fork's session follows it); one that could not be read is a manifest
    with that one error."""
    if file.error is not None:
        problem = Problem(file.path, 1, 1, "", file.error)
        return ManifestResult(file.path, None, None, (problem,), ())
    manifest = parse_manifest(file.text, file.path)
    return for_fork(manifest) if fork_owner is not None else manifest


def _read_all(files: list[ManifestFile], fork_owner: str | None) -> list[ManifestResult]:
    """Parse every manifest (in a thread: see the module's docstring)."""
    return [_read(file, fork_owner) for file in files]


async def _held_to_secrets(
    db: AsyncSession, manifest: ManifestResult, repository: str, gets_secrets: bool
) -> ManifestResult:
    """``manifest`` with an error on the line of each secret it names that the repository does not have,
    when its jobs would be given secrets at all (a fork approved without them is not held to the names)."""
    workflow = manifest.workflow
    if workflow is None or not gets_secrets or not any(task.secrets for task in workflow.tasks):
        return manifest
    return unset_secrets(manifest, await secret_names(db, repository), repository)


@dataclass(frozen=True, slots=True)
class _Resolved:
    """A valid manifest resolved against the inventory: the explanation and its stored document."""

    explanation: Explanation
    resolution: Resolution
    retry: RetryPolicy


def _resolve_all(
    manifests: list[ManifestResult], inventory: Inventory, descriptions: Mapping[str, str], repository: str
) -> dict[str, _Resolved]:
    """Resolve every valid manifest, by its file (in a thread: see the module's docstring)."""
    resolved = {}
    for manifest in manifests:
        if manifest.workflow is None:
            continue
        explanation = explain(manifest, inventory, repository=repository, check_vcpus=True)
        document = explanation_json(explanation, descriptions)
        resolved[manifest.file] = _Resolved(
            explanation, Resolution.from_document(document), manifest.workflow.retry
        )
    return resolved


def _new_session(
    app: GitHubApp, repo: Repository, trigger: Trigger, file: ManifestFile, manifest: ManifestResult
) -> Session:
    name = (manifest.name or file.path)[:MAX_WORKFLOW_NAME]
    workflow = manifest.workflow
    priority = Priority.NORMAL
    scheduling = {}
    if workflow is not None:
        priority = priority_for(workflow, trigger.event) if trigger.event else workflow.scheduling.priority
        chosen = workflow.scheduling
        scheduling = {
            "strategy": chosen.strategy,
            "max_devkits": chosen.max_devkits,
            "queue_wait_limit_s": float(chosen.queue_wait_limit_s),
        }
    return Session(
        id=str(uuid.uuid4()),
        repository=repo.full_name,
        installation_id=repo.installation_id,
        head_sha=trigger.sha,
        head_branch=trigger.ref,
        workflow=name,
        manifest_path=file.path,
        event=trigger.event_name if trigger.event is None else EVENT_NAMES[type(trigger.event)],
        priority=priority,
        state=SessionState.QUEUED,
        created_at=app.database.clock(),
        pull_request=trigger.pull_request,
        awaiting_approval=trigger.awaiting_approval and workflow is not None,
        fork_owner=trigger.fork_owner,
        # A fork's code gets no secrets until an approval says so (``/kerrigan approve secrets``).
        secrets_allowed=trigger.secrets_allowed and not trigger.awaiting_approval,
        delivery_id=trigger.delivery_id,
        workflow_run_id=trigger.workflow_run_id,
        jobs=tuple(Job(spec_of_task(task)) for task in workflow.tasks) if workflow else (),
        **scheduling,  # type: ignore[arg-type]
    )


async def _resolve(
    app: GitHubApp,
    db: AsyncSession,
    session: Session,
    manifest: ManifestResult,
    resolved: _Resolved | None,
    *,
    approved: bool = False,
    with_secrets: bool = False,
) -> Session:
    """Store the session's outcome with its check run: the manifest's errors (a secret it names that the
    repository lacks among them: :func:`_held_to_secrets`), its wait for approval, or its resolution
    (``resolved``, made for every valid manifest that does not wait)."""
    at = app.database.clock()
    if manifest.workflow is None:
        document: dict[str, object] = {
            "workflow": manifest.name,
            "file": manifest.file,
            "errors": [p.as_dict() for p in manifest.errors],
            "warnings": [p.as_dict() for p in manifest.warnings],
            "tasks": [],
        }
        body = invalid_manifest_body(manifest, _context(app, session))
        return await resolve_session(
            db,
            session.id,
            at,
            outcome=resolution_outcome(valid=False, unschedulable=False),
            resolution=Resolution.from_document(document),
            check_run=body.as_json(),
        )
    if session.awaiting_approval and not approved:
        body = awaiting_approval_body(session.workflow, _context(app, session))
        return await resolve_session(
            db,
            session.id,
            at,
            outcome=resolution_outcome(valid=True, unschedulable=False),
            resolution=EMPTY_RESOLUTION,
            check_run=body.as_json(),
        )
    assert resolved is not None, f"{manifest.file} was not resolved"
    explanation = resolved.explanation
    position = await queue_position(db, session.id)
    body = await asyncio.to_thread(resolution_body, explanation, _context(app, session, position))
    never = [item.task.id for item in explanation.tasks if item.outcome is Outcome.UNSCHEDULABLE]
    return await resolve_session(
        db,
        session.id,
        at,
        outcome=resolution_outcome(valid=True, unschedulable=bool(never)),
        resolution=resolved.resolution,
        retry=resolved.retry,
        check_run=body.as_json(),
        requirements={item.task.id: item.requirements_record() for item in explanation.tasks},
        unschedulable=never,
        awaiting_approval=False if approved else None,
        secrets_allowed=True if approved and with_secrets else None,
    )


async def retry(
    app: GitHubApp, repo: Repository, sessions: Collection[Session], delivery_id: str | None
) -> list[Session]:
    """Fresh sessions for the same commits and workflows as ``sessions``."""
    started: list[Session] = []
    for old in sessions:
        pull_request = old.pull_request
        if pull_request is None and old.event == "pull_request":
            # Check runs of a fork's pull request come with no pull_requests: find it by its head commit.
            pulls = await repo.pulls_for_commit(old.head_sha)
            pull_request = int(pulls[0]["number"]) if pulls else None
        trigger = Trigger(
            sha=old.head_sha,
            event=None,
            event_name=old.event,
            ref=old.head_branch,
            pull_request=pull_request,
            awaiting_approval=old.awaiting_approval,
            fork_owner=old.fork_owner,
            delivery_id=delivery_id,
            secrets_allowed=old.secrets_allowed,
            only={old.workflow},
            workflow_run_id=old.workflow_run_id,
        )
        started += await start_workflows(app, repo, trigger)
    return started


async def still_never_scheduled(
    app: GitHubApp, repo: Repository, sessions: Collection[Session]
) -> dict[str, str]:
    """Of ``sessions``, whose resolutions found a task no device could ever run, those that would fail the
    same way today: each one's id and why, by today's inventory (the lab may have gained the board since).
    A session whose manifest is gone from its commit is left out: a re-run says so itself."""
    inventory: Inventory | None = None
    still: dict[str, str] = {}
    for sha in {session.head_sha for session in sessions}:
        files = {file.path: file for file in await repo.manifests(sha)}
        if inventory is None:
            async with app.database.sessions() as db:
                inventory = await load_inventory(db)
        for session in (s for s in sessions if s.head_sha == sha):
            file = files.get(session.manifest_path)
            if file is None:
                continue
            manifest = await asyncio.to_thread(_read, file, session.fork_owner)
            explanation = explain(manifest, inventory, repository=session.repository, check_vcpus=True)
            never = [item.task.id for item in explanation.tasks if item.outcome is Outcome.UNSCHEDULABLE]
            if never:
                still[session.id] = never_scheduled_reason(never[0])
    return still


async def approve(app: GitHubApp, repo: Repository, approval: Approval) -> list[Session] | None:
    """Sessions at the approval's commit that waited for approval: resolve them now (their check runs
    follow through the reconciler), their jobs with the secrets they name if the approval says so, and let
    each supersede what its manifest's ``concurrency`` says, within its fork's scope. The approval is kept
    in the same transaction; ``None`` when its comment approved before (a redelivery or a replay)."""
    sha = approval.head_sha
    async with app.database.sessions() as db:
        waiting = await find_sessions(db, repo.full_name, head_sha=sha, awaiting_approval=True)
    if not waiting:
        return []
    paths = {session.manifest_path for session in waiting}
    files = [file for file in await repo.manifests(sha) if file.path in paths]
    # The sessions of one commit waiting for approval are one fork's: its manifests read as a fork's.
    fork_owner = waiting[0].fork_owner
    read = await asyncio.to_thread(_read_all, files, fork_owner)
    database = app.database
    async with database.sessions() as db:
        inventory = await load_inventory(db)
        descriptions = await label_keys(db)
        manifests = {
            manifest.file: await _held_to_secrets(db, manifest, repo.full_name, approval.secrets)
            for manifest in read
        }
    resolved = await asyncio.to_thread(
        _resolve_all, list(manifests.values()), inventory, descriptions, repo.full_name
    )

    superseded: dict[str, list[str]] = {}

    async def store(db: AsyncSession) -> list[Session] | None:
        approved: list[Session] = []
        superseded.clear()  # what an aborted attempt cancelled, it did not
        await check_fence(db)
        if not await record_approval(db, approval):
            return None
        # Those that still wait: another approval may have come first while the manifests were read.
        for waited in await find_sessions(db, repo.full_name, head_sha=sha, awaiting_approval=True):
            manifest = manifests.get(waited.manifest_path)
            if manifest is None:
                continue
            session = await _resolve(
                app,
                db,
                waited,
                manifest,
                resolved.get(manifest.file),
                approved=True,
                with_secrets=approval.secrets,
            )
            approved.append(session)
            group = _group(session, manifest)
            if group is not None:  # the head of the pull request: the newest commit of its fork's scope
                superseded[session.id] = await _supersede(db, session, manifest, group, database.clock())
        return approved

    approved = await in_transaction(database, store, what=f"approval at {sha[:12]}")
    _log_superseded(superseded)
    return approved
