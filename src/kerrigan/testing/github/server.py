"""The stand-in server: its state, set-up methods and lifecycle, and the middleware around every handler:
it records the request, applies the rate limits (when enforced) and the injected faults, and answers
conditional GETs."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from aiohttp import web

from kerrigan.testing.github import (
    artifacts,
    auth,
    checks,
    contents,
    issues,
    limits,
    manifests,
    organizations,
    repositories,
)
from kerrigan.testing.github.artifacts import FakeArtifact, zip_of
from kerrigan.testing.github.auth import generate_app_key, installation_of
from kerrigan.testing.github.errors import GitHubError, error_response
from kerrigan.testing.github.faults import Fault, Faults
from kerrigan.testing.github.limits import LimitedRequest, RateLimits
from kerrigan.testing.github.manifests import CreatedApp
from kerrigan.testing.github.records import LONG_AGO, FakeRepository, RecordedRequest, now_iso
from kerrigan.testing.github.schema import check_request_body, github_description

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The permissions Kerrigan's app.yml asks for: an installation grants these, tokens may narrow them.
APP_PERMISSIONS: Final = {
    "actions": "read",
    "checks": "write",
    "contents": "read",
    "issues": "write",
    "members": "read",
    "merge_queues": "read",
    "metadata": "read",
    "pull_requests": "read",
}
DROPPED: Final = 0  # the status recorded for a request whose connection was closed unanswered


class GitHubStandIn:
    """The stand-in server; ``async with GitHubStandIn(...) as github:`` starts it on a free loopback port.

    ``seed`` drives the faults injected with a probability; ``validate=False`` accepts request bodies GitHub's
    description refuses (validation is also off when the description or jsonschema is missing);
    ``enforce_limits=True`` applies GitHub's rate limits (see :attr:`limits`).
    """

    def __init__(
        self,
        app_id: str = "4242",
        public_key: str | None = None,
        private_key: str | None = None,
        *,
        seed: int = 0,
        validate: bool = True,
        enforce_limits: bool = False,
    ) -> None:
        if public_key is None:
            private_key, public_key = generate_app_key()
        self.app_id = app_id
        self.app_slug = "kerrigan"
        self.public_key = public_key
        self.private_key = private_key
        self.app_permissions: dict[str, str] = dict(APP_PERMISSIONS)
        self.installations: dict[int, str] = {}  # installation id -> account
        self.installation_apps: dict[int, str] = {}  # installation id -> App id, where not this App's
        self.installation_kinds: dict[int, str] = {}  # installation id -> "User" (else an Organization)
        self.suspended: set[int] = set()  # installations suspended: they mint no tokens
        self.members: dict[str, set[str]] = {}  # organization -> its members' logins (lower-cased)
        # The App manifest flow: Apps created from manifests (by id) and the codes that convert into them.
        self.created_apps: dict[str, CreatedApp] = {}
        self.manifest_codes: dict[str, tuple[str, datetime]] = {}  # code -> (App id, expiry)
        self.repositories: dict[str, FakeRepository] = {}
        self.tokens: dict[str, tuple[int, datetime]] = {}  # token -> (installation, expiry)
        self.token_scopes: dict[str, frozenset[str]] = {}  # token -> the repository names it is limited to
        self.token_lifetime = timedelta(hours=1)
        # OAuth web flow (sign-in to Kerrigan's pages): the app's client credentials, codes, user tokens.
        self.oauth_client_id = "Iv1.standin"
        self.oauth_client_secret = secrets.token_hex(20)
        self.oauth_codes: dict[str, tuple[str, str]] = {}  # code -> (login, redirect_uri)
        self.user_tokens: dict[str, str] = {}  # token -> login
        self.downloads: dict[str, tuple[str, str]] = {}  # one-time tarball keys -> (repository, ref)
        self.artifacts: dict[int, FakeArtifact] = {}
        self.artifact_downloads: dict[str, int] = {}  # one-time artifact keys -> artifact id
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.check_suites: dict[tuple[str, str], int] = {}  # (repository, head sha) -> suite id
        self.comments: list[dict[str, Any]] = []
        self.pushed_at: dict[str, str] = {}  # repository -> its last push (GitHub's ``pushed_at``)
        self.reactions: list[dict[str, Any]] = []
        self.requests: list[RecordedRequest] = []
        self.description = github_description() if validate else None
        self.limits = RateLimits(enabled=enforce_limits)
        self.faults = Faults(random.Random(seed))  # noqa: S311 -- reproducible picks, not secrets
        self.ids = itertools.count(1000)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- set-up ------------------------------------------------------------------------------------

    def add_installation(
        self, installation_id: int, account: str, *, app_id: str | None = None, kind: str = "Organization"
    ) -> None:
        """An installation of the App (or of ``app_id``, one created from a manifest) on ``account``, an
        organization unless ``kind`` is ``"User"``."""
        self.installations[installation_id] = account
        if app_id is not None and app_id != self.app_id:
            self.installation_apps[installation_id] = app_id
        if kind != "Organization":
            self.installation_kinds[installation_id] = kind

    def add_member(self, org: str, *logins: str) -> None:
        """Make ``logins`` members of the organization ``org``."""
        self.members.setdefault(org.lower(), set()).update(login.lower() for login in logins)

    def remove_member(self, org: str, login: str) -> None:
        """``login`` leaves the organization ``org``."""
        self.members.get(org.lower(), set()).discard(login.lower())

    def add_repository(self, full_name: str, installation_id: int, *, private: bool = True) -> FakeRepository:
        """A repository the installation covers (private unless said otherwise)."""
        repo = FakeRepository(full_name, next(self.ids), installation_id, private=private)
        self.repositories[full_name] = repo
        return repo

    def repository_named(self, full_name: str) -> FakeRepository | None:
        """The repository ``owner/name`` in any case, as GitHub matches names."""
        found = self.repositories.get(full_name)
        if found is not None:
            return found
        wanted = full_name.lower()
        return next((repo for name, repo in self.repositories.items() if name.lower() == wanted), None)

    def add_artifact(
        self,
        full_name: str,
        run_id: int,
        name: str,
        files: Mapping[str, bytes] | None = None,
        *,
        data: bytes | None = None,
        expired: bool = False,
    ) -> FakeArtifact:
        """An artifact of the workflow run ``run_id``: a zip of ``files``, or ``data`` as it is."""
        archive = data if data is not None else zip_of(files or {})
        artifact = FakeArtifact(next(self.ids), full_name, run_id, name, archive, expired)
        self.artifacts[artifact.id] = artifact
        return artifact

    def add_commit(self, full_name: str, sha: str, files: Mapping[str, str | bytes]) -> None:
        """The repository's files at ``sha`` (``"*"``: at every commit not added on its own)."""
        self.repositories[full_name].commits[sha] = {
            path: content.encode() if isinstance(content, str) else content for path, content in files.items()
        }

    def add_pull(
        self,
        full_name: str,
        number: int,
        *,
        head_sha: str,
        base_ref: str = "main",
        head_ref: str = "feature",
        fork: str | None = None,
        at: str = LONG_AGO,
    ) -> dict[str, Any]:
        """A pull request, opened (and its head pushed) ``at``; ``fork`` names the head repository when it is
        another one."""
        base = {"ref": base_ref, "sha": "0" * 40, "repo": {"full_name": full_name}}
        head = {"ref": head_ref, "sha": head_sha, "repo": {"full_name": fork or full_name}}
        pull = {
            "id": next(self.ids),
            "number": number,
            "head": head,
            "base": base,
            "state": "open",
            "created_at": at,
            "updated_at": at,
        }
        self.repositories[full_name].pulls[number] = pull
        self.pushed_at[fork or full_name] = at
        return pull

    def push_to_pull(self, full_name: str, number: int, sha: str, *, at: str | None = None) -> None:
        """Someone pushed ``sha`` to the pull request's head branch ``at`` (default: now): GitHub moves its
        head, and both the pull request's ``updated_at`` and its head repository's ``pushed_at`` to then."""
        pull = self.repositories[full_name].pulls[number]
        when = at or now_iso()
        pull["head"]["sha"] = sha
        pull["updated_at"] = when
        self.pushed_at[pull["head"]["repo"]["full_name"]] = when

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        """A collaborator's permission: admin, maintain, write, triage, read or none."""
        self.repositories[full_name].permissions[login] = permission

    def fail_next(
        self,
        method: str,
        path_pattern: str,
        status: int,
        *,
        headers: Mapping[str, str] | None = None,
        times: int = 1,
    ) -> Fault:
        """Answer the next ``times`` matching requests with ``status`` (and ``headers``): a thin wrapper of
        :meth:`Faults.inject`, whose message says the answer was injected."""
        return self.faults.inject(
            method, path_pattern, status=status, headers=headers, message=f"injected {status}", times=times
        )

    @property
    def limited(self) -> list[LimitedRequest]:
        """The requests refused for a rate limit, in order."""
        return self.limits.limited

    @property
    def validating(self) -> bool:
        """Whether request bodies are checked against GitHub's description."""
        return self.description is not None

    def check_body(self, request: web.Request, body: Any) -> None:
        """Refuse ``body`` with GitHub's 422 where GitHub's description refuses it (when validating)."""
        check_request_body(self.description, request.method, request.path, body)

    def runs_named(self, name: str) -> list[dict[str, Any]]:
        """The check runs with this name, oldest first."""
        return [run for run in self.check_runs.values() if run["name"] == name]

    # -- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> GitHubStandIn:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1 (a free port unless one is given)."""
        app = web.Application(middlewares=[self._middleware])
        for concern in (
            artifacts,
            auth,
            contents,
            checks,
            issues,
            limits,
            manifests,
            organizations,
            repositories,
        ):
            concern.add_routes(app.router, self)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        bound = site._server.sockets[0].getsockname()  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{bound[1]}"

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- plumbing ----------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        status = DROPPED
        try:
            response = await self._limited(request, handler)
            if response is None:
                return _drop(request)
            status = response.status
            return response
        finally:
            self.requests.append(
                RecordedRequest(
                    request.method, request.path, dict(request.query), dict(request.headers), body, status
                )
            )

    async def _limited(self, request: web.Request, handler: Handler) -> web.StreamResponse | None:
        """The answer within the rate limits (``None``: the connection is to be dropped)."""
        installation = installation_of(self, request) if self.limits.enabled else None
        if installation is None or request.path == "/rate_limit":  # asking what is left costs nothing
            return await self._faulty(request, handler)
        try:
            self.limits.admit(installation, request.method, request.path)
        except GitHubError as exc:
            return exc.response()
        response: web.StreamResponse | None = None
        try:
            response = await self._faulty(request, handler)
        finally:
            self.limits.settle(installation, DROPPED if response is None else response.status)
        if response is not None:
            response.headers.update(self.limits.headers(installation))
        return response

    async def _faulty(self, request: web.Request, handler: Handler) -> web.StreamResponse | None:
        """The handler's answer, or what an injected fault makes of it (``None``: dropped)."""
        fault = self.faults.pick(request.method, request.path)
        if fault is not None and fault.delay_s:
            await asyncio.sleep(fault.delay_s)
        if fault is not None and not fault.act_first:
            if fault.drop:
                return None
            answer = fault.answer()
            if answer is not None:
                return answer
        response = conditional(request, await _handle(request, handler))
        if fault is not None and fault.act_first:  # GitHub acted; the answer is lost or an error
            if fault.drop:
                return None
            return fault.answer() or response
        return response


def etag_of(body: bytes, *, weak: bool) -> str:
    """An entity tag for an answer's body, as GitHub makes them (weak for JSON)."""
    return ('W/"%s"' if weak else '"%s"') % hashlib.sha256(body).hexdigest()


def conditional(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """GitHub's conditional requests: a GET's answer carries an ``ETag``, and ``If-None-Match`` naming it is
    answered 304 with no body."""
    if request.method != "GET" or response.status != 200 or not isinstance(response, web.Response):
        return response
    if not isinstance(response.body, bytes):
        return response
    etag = etag_of(response.body, weak=response.content_type == "application/json")
    response.headers["ETag"] = etag
    asked = {tag.strip().removeprefix("W/") for tag in request.headers.get("If-None-Match", "").split(",")}
    if etag.removeprefix("W/") in asked:
        return web.Response(status=304, headers={"ETag": etag})
    return response


async def _handle(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except GitHubError as exc:
        return exc.response()
    except web.HTTPException as exc:  # aiohttp's own: no such route, method not allowed
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return error_response(exc.status, "Not Found" if exc.status == 404 else exc.reason, allow)
    except json.JSONDecodeError:
        return error_response(400, "Problems parsing JSON")


def _drop(request: web.Request) -> web.Response:
    """Close the connection without an answer: the client sees the server disconnect."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=204)  # never sent: the transport is gone
