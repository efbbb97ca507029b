"""One repository as one installation sees it: manifests at a commit, check runs, comments, permissions.

Every call is made as the installation (:func:`~kerrigan.github.client.acting_for`), so it is counted
against that installation's budget. Creating a check run and completing one are essential: they may use
the budget's reserve; everything else waits once only the reserve is left.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar
from urllib.parse import quote

from gidgethub import BadRequest

from kerrigan.core.manifest.files import too_large, too_many, utf8_size
from kerrigan.github.budget import Budget
from kerrigan.github.checks import ANNOTATIONS_PER_REQUEST, CheckRunBody, validate_actions
from kerrigan.github.client import GitHubClient, InstallationTokens, acting_for

log = logging.getLogger(__name__)
T = TypeVar("T")

WORKFLOWS_DIR: Final = ".kerrigan/workflows"
RAW: Final = "application/vnd.github.raw+json"
WRITE_PERMISSIONS: Final = frozenset({"admin", "maintain", "write"})
COMMENT_LIMIT: Final = 65_536  # characters of an issue comment's body, as GitHub documents


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """A manifest's path in the repository and its text at one commit (or why it could not be read)."""

    path: str
    text: str
    error: str | None = None


class Repository:
    """The calls Kerrigan makes for one repository, authenticated as its installation.

    A token GitHub refuses (401) is dropped from the cache and the call made once more with a new one.
    """

    def __init__(
        self, client: GitHubClient, tokens: InstallationTokens, installation_id: int, full_name: str
    ) -> None:
        self.client = client
        self.tokens = tokens
        self.installation_id = installation_id
        self.full_name = full_name
        self.owner, _, self.name = full_name.partition("/")

    @property
    def budget(self) -> Budget:
        """The request budget of every installation (this one's is ``installation_id``)."""
        return self.client.budget

    async def _authorized(self, call: Callable[[str], Awaitable[T]], *, essential: bool = False) -> T:
        with acting_for(self.installation_id, essential=essential):
            try:
                return await call(await self.tokens.token(self.installation_id))
            except BadRequest as exc:
                if int(exc.status_code) != 401:
                    raise
                log.warning(
                    "GitHub refused the installation token of %s; asking for a new one", self.full_name
                )
                self.tokens.forget(self.installation_id)
                return await call(await self.tokens.token(self.installation_id))

    def _url(self, path: str) -> str:
        return f"/repos/{self.owner}/{self.name}{path}"

    async def manifests(self, sha: str) -> list[ManifestFile]:
        """Every ``.kerrigan/workflows/*.yml`` (and ``*.yaml``) at ``sha``; none when there is no folder.

        The folder's listing names each file's blob SHA; a file already read at any commit (the same blob)
        is taken from the client's cache, so a commit whose manifests did not change costs one request, and
        none when its listing is asked again (a conditional request answered ``304``).

        The listing also gives each file's size: a file over the limit is a file with that error, never
        read; a folder of more manifests than the limit is one file with that error, the folder's, and none
        of them is read (:mod:`kerrigan.core.manifest.files`).
        """

        async def listing(token: str) -> Any:
            return await self.client.getitem(
                self._url("/contents/{+path}{?ref}"), {"path": WORKFLOWS_DIR, "ref": sha}, oauth_token=token
            )

        try:
            entries = await self._authorized(listing)
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                return []
            raise
        if not isinstance(entries, list):
            return []
        manifests = sorted(
            (entry for entry in entries if isinstance(entry, dict) and _is_manifest(entry)),
            key=lambda entry: str(entry["path"]),
        )
        crowded = too_many(len(manifests), WORKFLOWS_DIR)
        if crowded is not None:
            return [ManifestFile(WORKFLOWS_DIR, "", error=crowded)]
        return [await self._file(entry, sha) for entry in manifests]

    async def _file(self, entry: Mapping[str, Any], sha: str) -> ManifestFile:
        path = str(entry["path"])
        blob = entry.get("sha")
        if isinstance(blob, str) and (text := self.client.blobs.get(blob)) is not None:
            return ManifestFile(path, text)
        oversize = too_large(_size(entry))
        if oversize is not None:  # known before a byte of it is read
            return ManifestFile(path, "", error=oversize)
        file = await self._read(path, sha)
        if isinstance(blob, str) and file.error is None:
            self.client.blobs[blob] = file.text
        return file

    async def _read(self, path: str, sha: str) -> ManifestFile:
        # The path goes into the URL encoded ('#', '?' and '%' are legal in file names); only '/' stays.
        url = self._url("/contents/" + quote(path, safe="/") + "{?ref}")

        async def fetch(token: str) -> Any:
            return await self.client.getitem(url, {"ref": sha}, oauth_token=token)

        async def fetch_raw(token: str) -> Any:
            return await self.client.getitem(url, {"ref": sha}, accept=RAW, oauth_token=token)

        try:
            data = await self._authorized(fetch)
            if isinstance(data, dict) and (oversize := too_large(_size(data))) is not None:
                return ManifestFile(path, "", error=oversize)  # the file's own answer names its size too
            if isinstance(data, dict) and data.get("encoding") == "base64" and data.get("content"):
                try:
                    raw: Any = base64.b64decode(str(data["content"]))
                except binascii.Error:
                    return ManifestFile(path, "", error="GitHub sent content that is not valid base64")
            else:  # files over 1 MB come without content (none within the limit does): ask for the raw bytes
                raw = await self._authorized(fetch_raw)
        except BadRequest as exc:
            return ManifestFile(path, "", error=f"GitHub would not give the file ({int(exc.status_code)})")
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return ManifestFile(path, "", error=f"the file is not UTF-8 text (byte {exc.start})")
        text = str(raw)
        if (oversize := too_large(utf8_size(text))) is not None:  # a size GitHub understated
            return ManifestFile(path, "", error=oversize)
        return ManifestFile(path, text)

    async def create_check_run(self, body: CheckRunBody) -> int:
        """Create a check run; annotations beyond the first 50 follow in updates. Returns its id."""
        validate_actions(body.fields.get("actions", []))

        async def create(token: str) -> Any:
            return await self.client.post(self._url("/check-runs"), data=body.fields, oauth_token=token)

        check_run_id = int((await self._authorized(create, essential=True))["id"])
        await self._more_annotations(check_run_id, body, essential=True)
        return check_run_id

    async def update_check_run(self, check_run_id: int, body: CheckRunBody) -> None:
        """Update a check run with a new body (status, conclusion, output, actions).

        Completing one is essential (it may use the budget's reserve); a progress update is not.
        """
        validate_actions(body.fields.get("actions", []))
        completes = body.fields.get("status") == "completed" or body.conclusion is not None
        fields = {k: v for k, v in body.fields.items() if k != "head_sha"}
        await self._patch_check_run(check_run_id, fields, essential=completes)
        await self._more_annotations(check_run_id, body, essential=completes)

    async def _patch_check_run(self, check_run_id: int, fields: dict[str, Any], *, essential: bool) -> None:
        async def patch(token: str) -> Any:
            return await self.client.patch(
                self._url("/check-runs/{check_run_id}"),
                {"check_run_id": check_run_id},
                data=fields,
                oauth_token=token,
            )

        await self._authorized(patch, essential=essential)

    async def _more_annotations(self, check_run_id: int, body: CheckRunBody, *, essential: bool) -> None:
        output = body.fields["output"]
        for batch in body.more_annotations:
            assert len(batch) <= ANNOTATIONS_PER_REQUEST
            more = {"title": output["title"], "summary": output["summary"], "annotations": list(batch)}
            await self._patch_check_run(check_run_id, {"output": more}, essential=essential)

    async def check_run(self, check_run_id: int) -> dict[str, Any]:
        """The check run as GitHub shows it (its ``output`` with ``annotations_count``, not the annotations);
        read before completing one whose last update may have been done without its answer arriving."""

        async def fetch(token: str) -> Any:
            return await self.client.getitem(
                self._url("/check-runs/{check_run_id}"), {"check_run_id": check_run_id}, oauth_token=token
            )

        found: dict[str, Any] = await self._authorized(fetch, essential=True)
        return found

    async def check_runs_for_ref(self, ref: str, name: str) -> list[dict[str, Any]]:
        """The check runs named ``name`` on the commit ``ref`` (a SHA, branch or tag), every page, of every
        check suite (``filter=all``): how the reconciler finds a check run whose creation it did not see
        confirmed (by its ``external_id``)."""

        async def fetch(token: str) -> list[dict[str, Any]]:
            return [
                run
                async for run in self.client.getiter(
                    self._url("/commits/{ref}/check-runs{?check_name,filter}"),
                    {"ref": ref, "check_name": name, "filter": "all"},
                    oauth_token=token,
                    iterable_key="check_runs",
                )
            ]

        return await self._authorized(fetch)

    async def permission(self, login: str) -> tuple[bool, str]:
        """Whether the login may write to the repository, and the name of its role (for replies).

        GitHub's own ``permission`` (admin, write, read, none) decides, so custom roles built on write count
        and maintain (reported there as write) does too.
        """
        permission, role = await self.access(login)
        return permission in WRITE_PERMISSIONS, role

    async def access(self, login: str) -> tuple[str, str]:
        """The login's base permission on the repository as GitHub reports it (``admin``, ``write``,
        ``read`` or ``none``: maintain reads as write, triage as read) and its role's name; ``none`` for
        a login GitHub says is no collaborator."""

        async def fetch(token: str) -> Any:
            return await self.client.getitem(
                self._url("/collaborators/{username}/permission"), {"username": login}, oauth_token=token
            )

        try:
            data = await self._authorized(fetch)
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                return "none", "none"
            raise
        permission = str(data.get("permission") or "none")
        return permission, str(data.get("role_name") or permission)

    async def private(self) -> bool | None:
        """Whether the repository is private (an internal one counts as private); ``None`` when the
        installation cannot see it (GitHub answers 404)."""

        async def fetch(token: str) -> Any:
            return await self.client.getitem(self._url(""), oauth_token=token)

        try:
            data = await self._authorized(fetch)
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                return None
            raise
        return not (data.get("private") is False and data.get("visibility", "public") == "public")

    async def comment(self, number: int, body: str) -> None:
        """Reply on an issue or pull request; a body over GitHub's limit is cut to it (GitHub would refuse
        it, and the reply would be lost)."""
        if len(body) > COMMENT_LIMIT:
            note = "\n\n(cut: the reply was longer than GitHub allows)"
            body = body[: COMMENT_LIMIT - len(note)] + note

        async def post(token: str) -> Any:
            return await self.client.post(
                self._url("/issues/{number}/comments"),
                {"number": number},
                data={"body": body},
                oauth_token=token,
            )

        await self._authorized(post)

    async def react(self, comment_id: int, content: str) -> None:
        """Add a reaction to an issue comment."""

        async def post(token: str) -> Any:
            return await self.client.post(
                self._url("/issues/comments/{comment_id}/reactions"),
                {"comment_id": comment_id},
                data={"content": content},
                oauth_token=token,
            )

        await self._authorized(post)

    async def pull_request(self, number: int) -> dict[str, Any]:
        """One pull request."""

        async def fetch(token: str) -> Any:
            return await self.client.getitem(
                self._url("/pulls/{number}"), {"number": number}, oauth_token=token
            )

        data: dict[str, Any] = await self._authorized(fetch)
        return data

    async def pulls_for_commit(self, sha: str) -> list[dict[str, Any]]:
        """The pull requests whose head is ``sha`` (how a fork's check run finds its pull request)."""

        async def fetch(token: str) -> list[dict[str, Any]]:
            return [
                pull
                async for pull in self.client.getiter(
                    self._url("/commits/{sha}/pulls"), {"sha": sha}, oauth_token=token
                )
            ]

        return await self._authorized(fetch)


def _size(entry: Mapping[str, Any]) -> int:
    """The size a contents answer gives a file (0 when it gives none, or nonsense)."""
    size = entry.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def _is_manifest(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") == "file" and str(entry.get("name", "")).endswith((".yml", ".yaml"))
