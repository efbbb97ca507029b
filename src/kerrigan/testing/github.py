"""A GitHub stand-in: an aiohttp server on loopback speaking the parts of GitHub's REST API Kerrigan uses.

It checks the App's JWT, hands out installation tokens (scoped to repositories when asked), serves repository
contents and tarballs at a commit (through a redirect, as GitHub does; a file starting ``#!`` is
executable in the tarball), keeps check
runs, comments and reactions, answers collaborator permissions and pulls by commit, and rejects what GitHub
would reject (over-long summaries, more than 50 annotations or 3 actions in a request, unknown enums). It
records every request, and can be told to fail the next requests (``fail_next``) to exercise retries.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import html
import io
import itertools
import json
import re
import secrets
import sys
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SUMMARY_LIMIT: Final = 65_535
STATUSES: Final = frozenset({"queued", "in_progress", "completed", "waiting", "requested", "pending"})
CONCLUSIONS: Final = frozenset(
    {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"}
)
ANNOTATION_LEVELS: Final = frozenset({"notice", "warning", "failure"})
REACTIONS: Final = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})
LARGE_FILE: Final = 1024 * 1024


def generate_app_key() -> tuple[str, str]:
    """A fresh RSA key pair for a test GitHub App: (private PEM, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def signed_headers(secret: str, event: str, body: bytes, delivery_id: str | None = None) -> dict[str, str]:
    """The headers GitHub sends with a delivery of ``body``."""
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or secrets.token_hex(16),
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


def push_payload(
    repository: str, sha: str, *, installation: int = 1, ref: str = "refs/heads/main"
) -> dict[str, Any]:
    """The parts of a ``push`` delivery Kerrigan reads, for a push of ``sha`` to ``ref``."""
    return {
        "ref": ref,
        "after": sha,
        "deleted": False,
        "installation": {"id": installation},
        "repository": {"full_name": repository},
        "sender": {"login": "octocat", "type": "User"},
    }


@dataclass
class FakeRepository:
    """A repository: files per commit, pull requests and collaborators' permissions."""

    full_name: str
    id: int
    installation_id: int
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the stand-in received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    times: int


class GitHubError(Exception):
    """An answer GitHub would give instead of doing what was asked."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class GitHubStandIn:
    """The stand-in server; ``async with GitHubStandIn(...) as github:`` starts it on a free loopback port."""

    def __init__(
        self, app_id: str = "4242", public_key: str | None = None, private_key: str | None = None
    ) -> None:
        if public_key is None:
            private_key, public_key = generate_app_key()
        self.app_id = app_id
        self.public_key = public_key
        self.private_key = private_key
        self.installations: dict[int, str] = {}
        self.repositories: dict[str, FakeRepository] = {}
        self.tokens: dict[str, tuple[int, datetime]] = {}
        self.token_scopes: dict[str, frozenset[str]] = {}  # token -> the repository names it is limited to
        # OAuth web flow (sign-in to Kerrigan's pages): the app's client credentials, codes, user tokens.
        self.oauth_client_id = "Iv1.standin"
        self.oauth_client_secret = secrets.token_hex(20)
        self._oauth_codes: dict[str, tuple[str, str]] = {}  # code -> (login, redirect_uri)
        self.user_tokens: dict[str, str] = {}  # token -> login
        self._downloads: dict[str, tuple[str, str]] = {}  # one-time tarball keys -> (repository, ref)
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.comments: list[dict[str, Any]] = []
        self.reactions: list[dict[str, Any]] = []
        self.requests: list[RecordedRequest] = []
        self.token_lifetime = timedelta(hours=1)
        self._failures: list[_Failure] = []
        self._ids = itertools.count(1000)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- set-up ------------------------------------------------------------------------------------

    def add_installation(self, installation_id: int, account: str) -> None:
        """An installation of the App on ``account``."""
        self.installations[installation_id] = account

    def add_repository(self, full_name: str, installation_id: int) -> FakeRepository:
        """A repository the installation covers."""
        repo = FakeRepository(full_name, next(self._ids), installation_id)
        self.repositories[full_name] = repo
        return repo

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
    ) -> dict[str, Any]:
        """A pull request; ``fork`` names the head repository when it is another one."""
        base = {"ref": base_ref, "repo": {"full_name": full_name}}
        head = {"ref": head_ref, "sha": head_sha, "repo": {"full_name": fork or full_name}}
        pull = {"number": number, "head": head, "base": base, "state": "open"}
        self.repositories[full_name].pulls[number] = pull
        return pull

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
    ) -> None:
        """Answer the next ``times`` matching requests with ``status`` (and ``headers``)."""
        self._failures.append(
            _Failure(method.upper(), re.compile(path_pattern), status, dict(headers or {}), times)
        )

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
        app.router.add_post("/app/installations/{installation_id}/access_tokens", self._access_token)
        app.router.add_get("/repos/{owner}/{repo}/contents/{path:.*}", self._contents)
        app.router.add_get("/repos/{owner}/{repo}/tarball/{ref}", self._tarball)
        app.router.add_get("/_codeload/{key}", self._codeload)
        app.router.add_get("/login/oauth/authorize", self._authorize_page)
        app.router.add_post("/login/oauth/authorize", self._authorize)
        app.router.add_post("/login/oauth/access_token", self._oauth_token)
        app.router.add_get("/user", self._user)
        app.router.add_post("/repos/{owner}/{repo}/check-runs", self._create_check_run)
        app.router.add_patch("/repos/{owner}/{repo}/check-runs/{check_run_id}", self._update_check_run)
        app.router.add_get("/repos/{owner}/{repo}/check-runs/{check_run_id}", self._get_check_run)
        app.router.add_get("/repos/{owner}/{repo}/commits/{sha}/pulls", self._pulls_for_commit)
        app.router.add_get("/repos/{owner}/{repo}/pulls/{number}", self._pull)
        app.router.add_post("/repos/{owner}/{repo}/issues/{number}/comments", self._comment)
        app.router.add_post("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", self._reaction)
        app.router.add_get("/repos/{owner}/{repo}/collaborators/{login}/permission", self._permission)
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
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        status = 500
        try:
            for failure in self._failures:
                if (
                    failure.times
                    and failure.method == request.method
                    and failure.pattern.search(request.path)
                ):
                    failure.times -= 1
                    status = failure.status
                    return web.json_response(
                        {"message": f"injected {failure.status}"},
                        status=failure.status,
                        headers=failure.headers,
                    )
            response: web.StreamResponse = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:  # a redirect, raised as aiohttp does
            status = exc.status
            raise
        except GitHubError as exc:
            status = exc.status
            return web.json_response(
                {"message": exc.message, "documentation_url": "stand-in"}, status=exc.status
            )
        finally:
            self.requests.append(
                RecordedRequest(
                    request.method, request.path, dict(request.query), dict(request.headers), body, status
                )
            )

    def _app_jwt(self, request: web.Request) -> None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            raise GitHubError(401, "A JSON web token could not be decoded")
        try:
            claims = jwt.decode(
                token,
                self.public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=0,
            )
        except jwt.PyJWTError as exc:
            raise GitHubError(401, f"A JSON web token could not be decoded: {exc}") from None
        now = time.time()
        if str(claims["iss"]) != self.app_id:
            raise GitHubError(401, "'Issuer' claim ('iss') must be the App's id")
        if claims["exp"] - claims["iat"] > 600 or claims["exp"] > now + 600:
            raise GitHubError(401, "'Expiration time' claim ('exp') is too far in the future")
        if claims["iat"] > now + 60:
            raise GitHubError(
                401, "'Issued at' claim ('iat') must be an Integer representing a time in the past"
            )

    def _repo(self, request: web.Request) -> FakeRepository:
        full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        repo = self.repositories.get(full_name)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() not in ("token", "bearer") or token not in self.tokens:
            raise GitHubError(401, "Bad credentials")
        installation, expires = self.tokens[token]
        if expires < datetime.now(UTC):
            raise GitHubError(401, "Bad credentials (expired)")
        if repo is None or repo.installation_id != installation:
            raise GitHubError(404, "Not Found")
        scope = self.token_scopes.get(token)
        if scope is not None and full_name.split("/", 1)[1] not in scope:
            raise GitHubError(404, "Not Found")  # GitHub hides repositories a token may not see
        return repo

    # -- endpoints ---------------------------------------------------------------------------------

    async def _access_token(self, request: web.Request) -> web.Response:
        self._app_jwt(request)
        installation = int(request.match_info["installation_id"])
        if installation not in self.installations:
            raise GitHubError(404, "Not Found")
        token = "ghs_" + secrets.token_urlsafe(24)
        expires = datetime.now(UTC) + self.token_lifetime
        self.tokens[token] = (installation, expires)
        raw = await request.read()  # read once already by the middleware; aiohttp keeps it
        body = json.loads(raw) if raw else None
        if isinstance(body, dict) and isinstance(body.get("repositories"), list):
            self.token_scopes[token] = frozenset(str(name) for name in body["repositories"])
        return web.json_response(
            {"token": token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "permissions": {}},
            status=201,
        )

    async def _contents(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        ref = request.query.get("ref")
        files = repo.commits.get(ref or "", repo.commits.get("*"))
        if files is None:
            raise GitHubError(404, f"No commit found for the ref {ref}")
        path = request.match_info["path"].strip("/")
        if path in files:
            content = files[path]
            if "raw" in request.headers.get("Accept", ""):
                return web.Response(body=content, content_type="application/vnd.github.raw")
            large = len(content) > LARGE_FILE
            return web.json_response(
                {
                    "type": "file",
                    "name": path.rsplit("/", 1)[-1],
                    "path": path,
                    "size": len(content),
                    "encoding": "none" if large else "base64",
                    "content": "" if large else base64.b64encode(content).decode(),
                    "sha": hashlib.sha1(content).hexdigest(),  # noqa: S324 -- git's blob ids are SHA-1
                }
            )
        prefix = path + "/"
        entries = {}
        for file_path in files:
            if file_path.startswith(prefix):
                rest = file_path[len(prefix) :]
                name = rest.split("/", 1)[0]
                kind = "dir" if "/" in rest else "file"
                entries[name] = {
                    "type": kind,
                    "name": name,
                    "path": prefix + name,
                    "size": len(files[file_path]) if kind == "file" else 0,
                }
        if not entries:
            raise GitHubError(404, "Not Found")
        return web.json_response([entries[name] for name in sorted(entries)])

    async def _tarball(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        ref = request.match_info["ref"]
        if ref not in repo.commits and "*" not in repo.commits:
            raise GitHubError(404, "Not Found")
        key = secrets.token_urlsafe(16)
        self._downloads[key] = (repo.full_name, ref)
        raise web.HTTPFound(f"{self.url}/_codeload/{key}")  # GitHub redirects to codeload.github.com

    async def _codeload(self, request: web.Request) -> web.Response:
        found = self._downloads.pop(request.match_info["key"], None)
        if found is None:
            raise GitHubError(404, "Not Found")
        full_name, ref = found
        repo = self.repositories[full_name]
        files = repo.commits.get(ref, repo.commits.get("*", {}))
        top = f"{full_name.replace('/', '-')}-{ref[:7]}"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            folder = tarfile.TarInfo(top)
            folder.type, folder.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(folder)
            for path, content in sorted(files.items()):
                member = tarfile.TarInfo(f"{top}/{path}")
                member.size = len(content)
                member.mode = 0o755 if content.startswith(b"#!") else 0o644
                archive.addfile(member, io.BytesIO(content))
        return web.Response(body=buffer.getvalue(), content_type="application/x-gzip")

    async def _authorize_page(self, request: web.Request) -> web.Response:
        """GitHub's "Authorize" page, reduced to a form: which login signs in (tests and the demo type it)."""
        if request.query.get("client_id") != self.oauth_client_id:
            raise GitHubError(404, "unknown OAuth client_id")
        hidden = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(request.query.get(name, ""))}">'
            for name in ("client_id", "redirect_uri", "state")
        )
        page = (
            "<!doctype html><title>Authorize Kerrigan</title><h1>Sign in to GitHub (stand-in)</h1>"
            f'<form method="post" action="/login/oauth/authorize">{hidden}'
            '<label>Login <input name="login" autofocus></label> '
            '<button type="submit">Authorize</button></form>'
        )
        return web.Response(text=page, content_type="text/html")

    async def _authorize(self, request: web.Request) -> web.Response:
        form = await request.post()
        login, redirect_uri, state = (str(form.get(name, "")) for name in ("login", "redirect_uri", "state"))
        if form.get("client_id") != self.oauth_client_id or not login or not redirect_uri:
            raise GitHubError(400, "client_id, redirect_uri and login are required")
        code = secrets.token_urlsafe(16)
        self._oauth_codes[code] = (login, redirect_uri)
        separator = "&" if "?" in redirect_uri else "?"
        raise web.HTTPFound(f"{redirect_uri}{separator}{urlencode({'code': code, 'state': state})}")

    async def _oauth_token(self, request: web.Request) -> web.Response:
        form = await request.post()
        if (
            form.get("client_id") != self.oauth_client_id
            or form.get("client_secret") != self.oauth_client_secret
        ):
            return web.json_response({"error": "incorrect_client_credentials"})
        found = self._oauth_codes.pop(str(form.get("code", "")), None)
        if found is None or ("redirect_uri" in form and form["redirect_uri"] != found[1]):
            return web.json_response({"error": "bad_verification_code", "error_description": "bad code"})
        token = "gho_" + secrets.token_urlsafe(24)
        self.user_tokens[token] = found[0]
        return web.json_response({"access_token": token, "token_type": "bearer", "scope": ""})

    async def _user(self, request: web.Request) -> web.Response:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        login = self.user_tokens.get(token) if scheme.lower() in ("bearer", "token") else None
        if login is None:
            raise GitHubError(401, "Requires authentication")
        return web.json_response({"login": login, "id": abs(hash(login)) % 10**8, "type": "User"})

    def _validate_check_run(self, body: Any, *, creating: bool) -> None:
        if not isinstance(body, dict):
            raise GitHubError(400, "Problems parsing JSON")
        if creating:
            if not body.get("name"):
                raise GitHubError(422, "name wasn't supplied.")
            if not re.fullmatch(r"[0-9a-f]{40}", str(body.get("head_sha", ""))):
                raise GitHubError(422, "head_sha is not a valid SHA")
        status = body.get("status")
        if status is not None and status not in STATUSES:
            raise GitHubError(422, f"status {status!r} is not a member of {sorted(STATUSES)}")
        conclusion = body.get("conclusion")
        if conclusion is not None and conclusion not in CONCLUSIONS:
            raise GitHubError(422, f"conclusion {conclusion!r} is not a member of {sorted(CONCLUSIONS)}")
        if status == "completed" and conclusion is None:
            raise GitHubError(422, "conclusion is required when status is completed")
        output = body.get("output")
        if output is not None:
            if not output.get("title") or output.get("summary") is None:
                raise GitHubError(422, "output needs a title and a summary")
            if len(str(output["summary"]).encode()) > SUMMARY_LIMIT:
                raise GitHubError(422, f"output.summary is too long (maximum is {SUMMARY_LIMIT})")
            annotations = output.get("annotations") or []
            if len(annotations) > 50:
                raise GitHubError(422, "only 50 annotations are allowed per request")
            for annotation in annotations:
                missing = {"path", "start_line", "end_line", "annotation_level", "message"} - set(annotation)
                if missing or annotation["annotation_level"] not in ANNOTATION_LEVELS:
                    raise GitHubError(422, f"invalid annotation {annotation!r}")
        actions = body.get("actions") or []
        if len(actions) > 3:
            raise GitHubError(422, "only 3 actions are allowed")
        for action in actions:
            if (
                len(action.get("label", "")) > 20
                or len(action.get("description", "")) > 40
                or len(action.get("identifier", "")) > 20
                or not action.get("identifier")
            ):
                raise GitHubError(422, f"invalid action {action!r}")

    async def _create_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        body = await request.json()
        self._validate_check_run(body, creating=True)
        check_run_id = next(self._ids)
        output = dict(body.get("output") or {})
        run = {
            "id": check_run_id,
            "repository": repo.full_name,
            "name": body["name"],
            "head_sha": body["head_sha"],
            "status": body.get("status", "queued"),
            "conclusion": body.get("conclusion"),
            "details_url": body.get("details_url"),
            "external_id": body.get("external_id"),
            "output": {**output, "annotations": list(output.get("annotations") or [])},
            "actions": body.get("actions") or [],
            "updates": 0,
        }
        self.check_runs[check_run_id] = run
        return web.json_response(run, status=201)

    async def _update_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        run = self.check_runs.get(int(request.match_info["check_run_id"]))
        if run is None or run["repository"] != repo.full_name:
            raise GitHubError(404, "Not Found")
        body = await request.json()
        self._validate_check_run(body, creating=False)
        for key in ("name", "status", "conclusion", "details_url", "external_id", "actions"):
            if key in body:
                run[key] = body[key]
        if "output" in body:
            annotations = run["output"]["annotations"] + list(body["output"].get("annotations") or [])
            run["output"] = {**body["output"], "annotations": annotations}
        run["updates"] += 1
        return web.json_response(run)

    async def _get_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        run = self.check_runs.get(int(request.match_info["check_run_id"]))
        if run is None or run["repository"] != repo.full_name:
            raise GitHubError(404, "Not Found")
        return web.json_response(run)

    async def _pulls_for_commit(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        sha = request.match_info["sha"]
        return web.json_response([pull for pull in repo.pulls.values() if pull["head"]["sha"] == sha])

    async def _pull(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        pull = repo.pulls.get(int(request.match_info["number"]))
        if pull is None:
            raise GitHubError(404, "Not Found")
        return web.json_response(pull)

    async def _comment(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        body = await request.json()
        if not isinstance(body, dict) or not body.get("body"):
            raise GitHubError(422, "body wasn't supplied.")
        comment = {
            "id": next(self._ids),
            "repository": repo.full_name,
            "issue": int(request.match_info["number"]),
            "body": body["body"],
        }
        self.comments.append(comment)
        return web.json_response(comment, status=201)

    async def _reaction(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        body = await request.json()
        if not isinstance(body, dict) or body.get("content") not in REACTIONS:
            raise GitHubError(422, f"content must be one of {sorted(REACTIONS)}")
        reaction = {
            "id": next(self._ids),
            "repository": repo.full_name,
            "comment": int(request.match_info["comment_id"]),
            "content": body["content"],
        }
        self.reactions.append(reaction)
        return web.json_response(reaction, status=201)

    async def _permission(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        login = request.match_info["login"]
        permission = repo.permissions.get(login)
        if permission is None:
            raise GitHubError(404, f"{login} is not a user")
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        return web.json_response({"permission": legacy, "role_name": permission, "user": {"login": login}})


async def _serve(arguments: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m kerrigan.testing.github",
        description="Run the GitHub stand-in on loopback until stopped.",
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--app-id", default="4242")
    parser.add_argument("--public-key", type=Path, required=True, help="the App's public key (PEM file)")
    parser.add_argument("--repository", default="octo/firmware")
    parser.add_argument("--installation", type=int, default=1)
    parser.add_argument("--workflows", type=Path, help="a folder of manifests served at every commit")
    parser.add_argument(
        "--files", type=Path, help="a folder whose files (all of them, by relative path) are every commit's"
    )
    args = parser.parse_args(arguments)
    stand_in = GitHubStandIn(args.app_id, public_key=args.public_key.read_text(encoding="utf-8"))
    stand_in.add_installation(args.installation, args.repository.split("/")[0])
    stand_in.add_repository(args.repository, args.installation)
    files: dict[str, str | bytes] = {}
    if args.files:
        files |= {
            path.relative_to(args.files).as_posix(): path.read_bytes()
            for path in sorted(args.files.rglob("*"))
            if path.is_file()
        }
    if args.workflows:
        files |= {
            f".kerrigan/workflows/{path.name}": path.read_bytes()
            for path in sorted(args.workflows.glob("*.yml"))
        }
    if files:
        stand_in.add_commit(args.repository, "*", files)
    await stand_in.start(args.port)
    print(stand_in.url, flush=True)  # noqa: T201 -- the caller reads the address from here
    await asyncio.Event().wait()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(sys.argv[1:]))
