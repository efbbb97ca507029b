"""GitHub Actions artifacts of workflow runs: listed by run (``?name=`` narrows, pages of ``per_page``) and
downloaded as a zip through a redirect to a one-time URL, as GitHub does (an expired one answers 410)."""

from __future__ import annotations

import io
import secrets
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kerrigan.testing.github.auth import authorized_repository
from kerrigan.testing.github.errors import GitHubError

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn


@dataclass
class FakeArtifact:
    """One artifact of a workflow run: its zip's bytes."""

    id: int
    repository: str
    run_id: int
    name: str
    data: bytes
    expired: bool = False


def zip_of(files: Mapping[str, bytes]) -> bytes:
    """A zip holding ``files`` (path to contents), as ``actions/upload-artifact`` makes one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            archive.writestr(path, content)
    return buffer.getvalue()


def _json(github: GitHubStandIn, artifact: FakeArtifact) -> dict[str, Any]:
    base = f"{github.url}/repos/{artifact.repository}/actions/artifacts/{artifact.id}"
    return {
        "id": artifact.id,
        "node_id": f"MDg6QXJ0aWZhY3Q{artifact.id}",
        "name": artifact.name,
        "size_in_bytes": len(artifact.data),
        "url": base,
        "archive_download_url": f"{base}/zip",
        "expired": artifact.expired,
        "created_at": "2026-12-01T09:00:00Z",
        "expires_at": "2027-03-01T09:00:00Z",
        "updated_at": "2026-12-01T09:00:00Z",
        "workflow_run": {"id": artifact.run_id},
    }


async def list_run_artifacts(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/actions/runs/{run_id}/artifacts``."""
    repo = authorized_repository(github, request)
    run_id = int(request.match_info["run_id"])
    name = request.query.get("name")
    found = [
        artifact
        for artifact in github.artifacts.values()
        if artifact.repository == repo.full_name
        and artifact.run_id == run_id
        and (name is None or artifact.name == name)
    ]
    per_page = min(int(request.query.get("per_page", "30")), 100)
    page = int(request.query.get("page", "1"))
    shown = found[(page - 1) * per_page : page * per_page]
    return web.json_response({"total_count": len(found), "artifacts": [_json(github, a) for a in shown]})


async def download_artifact(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip``: a redirect to a one-time URL."""
    repo = authorized_repository(github, request)
    artifact = github.artifacts.get(int(request.match_info["artifact_id"]))
    if artifact is None or artifact.repository != repo.full_name or request.match_info["format"] != "zip":
        raise GitHubError(404, "Not Found")
    if artifact.expired:
        raise GitHubError(410, "Artifact has expired")
    key = secrets.token_urlsafe(16)
    github.artifact_downloads[key] = artifact.id
    return web.Response(status=302, headers={"Location": f"{github.url}/_blobs/{key}"})


async def blob(github: GitHubStandIn, request: web.Request) -> web.Response:
    """The one-time download an artifact's redirect points to (blob storage on GitHub: no token)."""
    found = github.artifact_downloads.pop(request.match_info["key"], None)
    if found is None:
        raise GitHubError(404, "Not Found")
    return web.Response(body=github.artifacts[found].data, content_type="application/zip")


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Workflow runs' artifacts."""
    runs = "/repos/{owner}/{repo}/actions/runs/{run_id:\\d+}/artifacts"
    router.add_get(runs, partial(list_run_artifacts, github))
    downloads = "/repos/{owner}/{repo}/actions/artifacts/{artifact_id:\\d+}/{format}"
    router.add_get(downloads, partial(download_artifact, github))
    router.add_get("/_blobs/{key}", partial(blob, github))
