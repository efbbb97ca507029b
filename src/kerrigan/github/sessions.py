"""From an event to sessions and check runs: read the manifests at the commit, resolve, store, report.

Every entry point is safe to run twice for the same delivery: a session is keyed by the delivery and the
workflow, and a session that already has its check run is not reported again.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

import aiohttp

from kerrigan.config import Settings
from kerrigan.core.explain import explain, explanation_json
from kerrigan.core.manifest import ManifestResult, parse_manifest
from kerrigan.core.matching import Outcome
from kerrigan.core.runner_protocol import JobCredentials
from kerrigan.core.sessions import Conclusion, Job, Session, SessionState
from kerrigan.core.triggers import EVENT_NAMES, Event, priority_for, runs_on
from kerrigan.core.yamlsource import Problem
from kerrigan.github.checks import (
    CheckRunBody,
    SessionContext,
    awaiting_approval_body,
    invalid_manifest_body,
    resolution_body,
)
from kerrigan.github.client import GitHubClient, InstallationTokens
from kerrigan.github.repository import ManifestFile, Repository
from kerrigan.store.database import Database
from kerrigan.store.inventory import load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.store.sessions import create_session, find_sessions, queue_position, update_session

log = logging.getLogger(__name__)
MAX_WORKFLOW_NAME = 100  # a manifest's name is at most this long; a file path standing in for it is cut


@dataclass(frozen=True)
class GitHubApp:
    """What handling an event needs: the database, the settings and an authenticated GitHub client."""

    database: Database
    settings: Settings
    client: GitHubClient
    tokens: InstallationTokens

    @classmethod
    def connect(cls, database: Database, settings: Settings, http: aiohttp.ClientSession) -> GitHubApp:
        """The app for ``settings`` (which must carry the App id and private key)."""
        if settings.github_app_id is None or settings.github_private_key is None:
            raise ValueError("KERRIGAN_GITHUB_APP_ID and a private key are needed to talk to GitHub")
        client = GitHubClient(http, base_url=settings.github_api_url)
        tokens = InstallationTokens(client, settings.github_app_id, settings.github_private_key)
        return cls(database, settings, client, tokens)

    def repository(self, installation_id: int, full_name: str) -> Repository:
        """The calls for one repository, as its installation."""
        return Repository(self.client, self.tokens, installation_id, full_name)

    async def job_credentials(self, installation_id: int, full_name: str) -> JobCredentials:
        """A token a runner fetches one repository with: read-only, that repository only, short-lived."""
        data = await self.tokens.scoped_token(installation_id, full_name, JOB_TOKEN_PERMISSIONS)
        return JobCredentials(
            str(data["token"]), str(data.get("expires_at", "")), self.settings.github_api_url
        )

    def details_url(self, session_id: str) -> str:
        """The session page a check run links to."""
        return f"{self.settings.public_url}/sessions/{session_id}"


JOB_TOKEN_PERMISSIONS: Final = {"contents": "read", "actions": "read"}


@dataclass(frozen=True, slots=True)
class Trigger:
    """What started (or restarts) sessions at one commit."""

    sha: str
    event: Event | None  # None for a retry: the workflows named in ``only`` run whatever their triggers
    event_name: str
    ref: str | None = None
    pull_request: int | None = None
    awaiting_approval: bool = False
    delivery_id: str | None = None
    only: Collection[str] | None = None
    workflow_run_id: int | None = None


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
    """Start every workflow the trigger runs at its commit; report each as a check run."""
    files = await repo.manifests(trigger.sha)
    started = []
    for file in files:
        manifest = _read(file)
        name = manifest.name or file.path
        if trigger.only is not None and name not in trigger.only:
            continue
        workflow = manifest.workflow
        if workflow is not None and trigger.event is not None and not runs_on(workflow, trigger.event):
            continue
        if workflow is None and trigger.only is None and await _reported(app, repo, trigger.sha, file.path):
            continue  # a broken manifest is reported once per commit, not once per event
        session = await _start(app, repo, trigger, file, manifest)
        if session is not None:
            started.append(session)
    return started


async def _reported(app: GitHubApp, repo: Repository, sha: str, path: str) -> bool:
    async with app.database.sessions() as db:
        earlier = await find_sessions(db, repo.full_name, head_sha=sha)
    return any(session.manifest_path == path for session in earlier)


def _read(file: ManifestFile) -> ManifestResult:
    """Parse a manifest; one that could not be read is a manifest with that one error."""
    if file.error is not None:
        problem = Problem(file.path, 1, 1, "", file.error)
        return ManifestResult(file.path, None, None, (problem,), ())
    return parse_manifest(file.text, file.path)


async def _start(
    app: GitHubApp, repo: Repository, trigger: Trigger, file: ManifestFile, manifest: ManifestResult
) -> Session | None:
    name = (manifest.name or file.path)[:MAX_WORKFLOW_NAME]
    database = app.database
    if trigger.delivery_id is not None:
        async with database.sessions() as db:
            done = await find_sessions(db, repo.full_name, delivery_id=trigger.delivery_id, workflow=name)
        if done and done[-1].check_run_id is not None:
            return None  # this delivery was handled before a restart
        if done:
            return await _report(app, repo, done[-1], manifest)
    workflow = manifest.workflow
    priority = "normal"
    if workflow is not None:
        priority = (
            priority_for(workflow, trigger.event).value if trigger.event else workflow.scheduling.priority
        )
    session = Session(
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
        created_at=database.clock(),
        pull_request=trigger.pull_request,
        awaiting_approval=trigger.awaiting_approval and workflow is not None,
        delivery_id=trigger.delivery_id,
        workflow_run_id=trigger.workflow_run_id,
        jobs=tuple(
            Job(task.id, command=task.run, vcpus=task.vcpus, timeout_s=task.timeout_s)
            for task in workflow.tasks
        )
        if workflow
        else (),
    )
    async with database.sessions() as db, db.begin():
        session = await create_session(db, session, database.clock())
    return await _report(app, repo, session, manifest)


async def _report(app: GitHubApp, repo: Repository, session: Session, manifest: ManifestResult) -> Session:
    """Resolve the session (unless it waits for approval) and create its check run."""
    body, state, conclusion, resolution = await _resolve(app, session, manifest)
    check_run_id = await repo.create_check_run(body)
    async with app.database.sessions() as db, db.begin():
        return await update_session(
            db,
            session.id,
            app.database.clock(),
            check_run_id=check_run_id,
            state=state,
            conclusion=conclusion.value if conclusion else None,
            resolution=resolution,
        )


async def _resolve(
    app: GitHubApp, session: Session, manifest: ManifestResult
) -> tuple[CheckRunBody, SessionState, Conclusion | None, dict[str, object]]:
    if manifest.workflow is None:
        document: dict[str, object] = {
            "workflow": manifest.name,
            "file": manifest.file,
            "errors": [p.as_dict() for p in manifest.errors],
            "warnings": [p.as_dict() for p in manifest.warnings],
            "tasks": [],
        }
        return (
            invalid_manifest_body(manifest, _context(app, session)),
            SessionState.COMPLETED,
            Conclusion.FAILURE,
            document,
        )
    if session.awaiting_approval:
        return awaiting_approval_body(session.workflow, _context(app, session)), SessionState.QUEUED, None, {}
    async with app.database.sessions() as db:
        inventory = await load_inventory(db)
        descriptions = await label_keys(db)
        position = await queue_position(db, session.id)
    explanation = explain(manifest, inventory)
    body = resolution_body(explanation, _context(app, session, position))
    resolved = explanation_json(explanation, descriptions)
    scheduling = manifest.workflow.scheduling
    resolved["scheduling"] = {  # what dispatch needs from the manifest, kept with the session
        "strategy": scheduling.strategy.value,
        "max_devkits": scheduling.max_devkits,
        "priority": session.priority,
        "queue_wait_limit_s": scheduling.queue_wait_limit_s,
    }
    if any(item.resolution.outcome is Outcome.UNSCHEDULABLE for item in explanation.tasks):
        return body, SessionState.COMPLETED, Conclusion.FAILURE, resolved
    return body, SessionState.QUEUED, None, resolved


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
            delivery_id=delivery_id,
            only={old.workflow},
            workflow_run_id=old.workflow_run_id,
        )
        started += await start_workflows(app, repo, trigger)
    return started


async def approve(app: GitHubApp, repo: Repository, sha: str) -> list[Session]:
    """Sessions of a fork's pull request at ``sha`` that waited for approval: resolve them now."""
    async with app.database.sessions() as db:
        waiting = await find_sessions(db, repo.full_name, head_sha=sha, awaiting_approval=True)
    if not waiting:
        return []
    files = {file.path: file for file in await repo.manifests(sha)}
    approved = []
    for waited in waiting:
        file = files.get(waited.manifest_path)
        if file is None or waited.check_run_id is None:
            continue
        manifest = _read(file)
        session = dataclasses.replace(waited, awaiting_approval=False)
        body, state, conclusion, resolution = await _resolve(app, session, manifest)
        await repo.update_check_run(waited.check_run_id, body)
        # Only once GitHub shows the resolution does the session stop waiting, in one write: a failure
        # before this leaves it waiting, and the approval can simply be given again.
        async with app.database.sessions() as db, db.begin():
            approved.append(
                await update_session(
                    db,
                    session.id,
                    app.database.clock(),
                    awaiting_approval=False,
                    state=state,
                    conclusion=conclusion.value if conclusion else None,
                    resolution=resolution,
                )
            )
    return approved
