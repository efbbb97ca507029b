"""One repository as one installation sees it: manifests at a commit, check runs, comments, permissions."""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import dataclass
from typing import Any, Final

from gidgethub import BadRequest

from kerrigan.github.checks import ANNOTATIONS_PER_REQUEST, CheckRunBody, validate_actions
from kerrigan.github.client import GitHubClient, InstallationTokens

log = logging.getLogger(__name__)

WORKFLOWS_DIR: Final = ".kerrigan/workflows"
RAW: Final = "application/vnd.github.raw+json"
WRITE_PERMISSIONS: Final = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """A manifest's path in the repository and its text at one commit."""

    path: str
    text: str


class ManifestFetchError(Exception):
    """A manifest could not be read (not UTF-8, say); the message names the file."""


class Repository:
    """The calls Kerrigan makes for one repository, authenticated as its installation."""

    def __init__(
        self, client: GitHubClient, tokens: InstallationTokens, installation_id: int, full_name: str
    ) -> None:
        self.client = client
        self.tokens = tokens
        self.installation_id = installation_id
        self.full_name = full_name
        self.owner, _, self.name = full_name.partition("/")

    async def _token(self) -> str:
        return await self.tokens.token(self.installation_id)

    def _url(self, path: str) -> str:
        return f"/repos/{self.owner}/{self.name}{path}"

    async def manifests(self, sha: str) -> list[ManifestFile]:
        """Every ``.kerrigan/workflows/*.yml`` (and ``*.yaml``) at ``sha``; none when there is no folder."""
        token = await self._token()
        try:
            listing = await self.client.getitem(
                self._url("/contents/{+path}{?ref}"), {"path": WORKFLOWS_DIR, "ref": sha}, oauth_token=token
            )
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                return []
            raise
        if not isinstance(listing, list):
            return []
        files = sorted(
            (
                entry
                for entry in listing
                if entry.get("type") == "file" and str(entry.get("name", "")).endswith((".yml", ".yaml"))
            ),
            key=lambda entry: str(entry["path"]),
        )
        return [await self._file(str(entry["path"]), sha, token) for entry in files]

    async def _file(self, path: str, sha: str, token: str) -> ManifestFile:
        data = await self.client.getitem(
            self._url("/contents/{+path}{?ref}"), {"path": path, "ref": sha}, oauth_token=token
        )
        if isinstance(data, dict) and data.get("encoding") == "base64" and data.get("content"):
            try:
                text = base64.b64decode(str(data["content"])).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise ManifestFetchError(f"{path}: not UTF-8 text") from exc
            return ManifestFile(path, text)
        # Files over 1 MB come without content: ask again for the raw bytes.
        raw = await self.client.getitem(
            self._url("/contents/{+path}{?ref}"), {"path": path, "ref": sha}, accept=RAW, oauth_token=token
        )
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ManifestFetchError(f"{path}: not UTF-8 text") from exc
        return ManifestFile(path, str(raw))

    async def create_check_run(self, body: CheckRunBody) -> int:
        """Create a check run; annotations beyond the first 50 follow in updates. Returns its id."""
        validate_actions(body.fields.get("actions", []))
        token = await self._token()
        created = await self.client.post(self._url("/check-runs"), data=body.fields, oauth_token=token)
        check_run_id = int(created["id"])
        await self._more_annotations(check_run_id, body, token)
        return check_run_id

    async def update_check_run(self, check_run_id: int, body: CheckRunBody) -> None:
        """Update a check run with a new body (status, conclusion, output, actions)."""
        validate_actions(body.fields.get("actions", []))
        token = await self._token()
        fields = {key: value for key, value in body.fields.items() if key != "head_sha"}
        await self.client.patch(
            self._url("/check-runs/{check_run_id}"),
            {"check_run_id": check_run_id},
            data=fields,
            oauth_token=token,
        )
        await self._more_annotations(check_run_id, body, token)

    async def _more_annotations(self, check_run_id: int, body: CheckRunBody, token: str) -> None:
        output = body.fields["output"]
        for batch in body.more_annotations:
            assert len(batch) <= ANNOTATIONS_PER_REQUEST
            await self.client.patch(
                self._url("/check-runs/{check_run_id}"),
                {"check_run_id": check_run_id},
                data={
                    "output": {
                        "title": output["title"],
                        "summary": output["summary"],
                        "annotations": list(batch),
                    }
                },
                oauth_token=token,
            )

    async def permission(self, login: str) -> str:
        """The login's permission on the repository: admin, maintain, write, triage, read or none."""
        token = await self._token()
        try:
            data = await self.client.getitem(
                self._url("/collaborators/{username}/permission"), {"username": login}, oauth_token=token
            )
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                return "none"
            raise
        role = str(data.get("role_name") or data.get("permission") or "none")
        return role if role in WRITE_PERMISSIONS else str(data.get("permission") or "none")

    async def comment(self, number: int, body: str) -> None:
        """Reply on an issue or pull request."""
        await self.client.post(
            self._url("/issues/{number}/comments"),
            {"number": number},
            data={"body": body},
            oauth_token=await self._token(),
        )

    async def react(self, comment_id: int, content: str) -> None:
        """Add a reaction to an issue comment."""
        await self.client.post(
            self._url("/issues/comments/{comment_id}/reactions"),
            {"comment_id": comment_id},
            data={"content": content},
            oauth_token=await self._token(),
        )

    async def pull_request(self, number: int) -> dict[str, Any]:
        """One pull request."""
        data: dict[str, Any] = await self.client.getitem(
            self._url("/pulls/{number}"), {"number": number}, oauth_token=await self._token()
        )
        return data

    async def pulls_for_commit(self, sha: str) -> list[dict[str, Any]]:
        """The pull requests whose head is ``sha`` (how a fork's check run finds its pull request)."""
        token = await self._token()
        return [
            pull
            async for pull in self.client.getiter(
                self._url("/commits/{sha}/pulls"), {"sha": sha}, oauth_token=token
            )
        ]
