"""Repository contents at a commit (files, directories, raw) and tarballs, served through a redirect to a
one-time download address as GitHub redirects to codeload.github.com."""

from __future__ import annotations

import base64
import hashlib
import io
import secrets
import tarfile
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from kerrigan.testing.github.auth import authorized_repository
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.records import HTML_URL

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn

LARGE_FILE: Final = 1024 * 1024  # GitHub leaves out the content of files over 1 MB (encoding "none")


def blob_sha(content: bytes) -> str:
    """Git's id of a blob: the SHA-1 of its header and content."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()  # noqa: S324 -- git's ids are SHA-1


def tree_sha(files: dict[str, bytes], prefix: str) -> str:
    """Git's id of the tree at ``prefix`` (ending in ``/``, or empty for the root)."""
    entries: dict[str, tuple[bytes, str]] = {}
    for path, content in files.items():
        if not path.startswith(prefix):
            continue
        name, _, rest = path[len(prefix) :].partition("/")
        if rest:
            entries[name] = (b"40000", tree_sha(files, f"{prefix}{name}/"))
        else:
            entries[name] = (b"100755" if content.startswith(b"#!") else b"100644", blob_sha(content))
    # git sorts a tree's entries by name, comparing a folder's name as if it ended in "/"
    order = sorted(entries, key=lambda name: name + "/" if entries[name][0] == b"40000" else name)
    raw = b"".join(
        entries[name][0] + b" " + name.encode() + b"\0" + bytes.fromhex(entries[name][1]) for name in order
    )
    return hashlib.sha1(b"tree %d\0" % len(raw) + raw).hexdigest()  # noqa: S324 -- git's ids are SHA-1


def files_at(github: GitHubStandIn, full_name: str, ref: str | None) -> dict[str, bytes] | None:
    """The repository's files at ``ref`` (the ``"*"`` commit stands for every commit not added on its own)."""
    commits = github.repositories[full_name].commits
    return commits.get(ref or "", commits.get("*"))


def _entry(
    github: GitHubStandIn, full_name: str, ref: str, path: str, *, kind: str, sha: str, size: int
) -> dict[str, Any]:
    url = f"{github.url}/repos/{full_name}/contents/{path}?ref={ref}"
    git_url = f"{github.url}/repos/{full_name}/git/{'trees' if kind == 'dir' else 'blobs'}/{sha}"
    html_url = f"{HTML_URL}/{full_name}/{'tree' if kind == 'dir' else 'blob'}/{ref}/{path}"
    download = f"{github.url}/_raw/{full_name}/{ref}/{path}" if kind == "file" else None
    return {
        "type": kind,
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "sha": sha,
        "size": size,
        "url": url,
        "git_url": git_url,
        "html_url": html_url,
        "download_url": download,
        "_links": {"self": url, "git": git_url, "html": html_url},
    }


async def get_contents(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/contents/{path}``: a file (JSON or raw) or a directory listing."""
    repo = authorized_repository(github, request)
    ref = request.query.get("ref")
    files = files_at(github, repo.full_name, ref)
    if files is None:
        raise GitHubError(404, f"No commit found for the ref {ref}")
    shown_ref = ref or "main"
    path = request.match_info["path"].strip("/")
    if path in files:
        content = files[path]
        if "raw" in request.headers.get("Accept", ""):
            return web.Response(body=content, content_type="application/vnd.github.raw")
        large = len(content) > LARGE_FILE
        body = _entry(
            github, repo.full_name, shown_ref, path, kind="file", sha=blob_sha(content), size=len(content)
        )
        body |= {
            "encoding": "none" if large else "base64",
            "content": "" if large else base64.b64encode(content).decode(),
        }
        return web.json_response(body)
    prefix = path + "/" if path else ""
    entries: dict[str, dict[str, Any]] = {}
    for file_path, content in files.items():
        if not file_path.startswith(prefix):
            continue
        name, _, rest = file_path[len(prefix) :].partition("/")
        if name in entries:
            continue
        if rest:
            sha = tree_sha(files, f"{prefix}{name}/")
            entries[name] = _entry(
                github, repo.full_name, shown_ref, prefix + name, kind="dir", sha=sha, size=0
            )
        else:
            entries[name] = _entry(
                github,
                repo.full_name,
                shown_ref,
                prefix + name,
                kind="file",
                sha=blob_sha(content),
                size=len(content),
            )
    if not entries:
        raise GitHubError(404, "Not Found")
    return web.json_response([entries[name] for name in sorted(entries)])


async def tarball(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/tarball/{ref}``: a redirect to a one-time download."""
    repo = authorized_repository(github, request)
    ref = request.match_info["ref"]
    if ref not in repo.commits and "*" not in repo.commits:
        raise GitHubError(404, "Not Found")
    key = secrets.token_urlsafe(16)
    github.downloads[key] = (repo.full_name, ref)
    return web.Response(status=302, headers={"Location": f"{github.url}/_codeload/{key}"})


async def codeload(github: GitHubStandIn, request: web.Request) -> web.Response:
    """The download a tarball redirect points to; a file starting ``#!`` is executable in it."""
    found = github.downloads.pop(request.match_info["key"], None)
    if found is None:
        raise GitHubError(404, "Not Found")
    full_name, ref = found
    files = files_at(github, full_name, ref) or {}
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


async def raw_file(github: GitHubStandIn, request: web.Request) -> web.Response:
    """A file's ``download_url`` (raw.githubusercontent.com on GitHub)."""
    full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
    files = (
        files_at(github, full_name, request.match_info["ref"]) if full_name in github.repositories else None
    )
    content = (files or {}).get(request.match_info["path"])
    if content is None:
        raise GitHubError(404, "Not Found")
    return web.Response(body=content, content_type="text/plain")


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Contents and tarballs."""
    router.add_get("/repos/{owner}/{repo}/contents/{path:.*}", partial(get_contents, github))
    router.add_get("/repos/{owner}/{repo}/tarball/{ref}", partial(tarball, github))
    router.add_get("/_codeload/{key}", partial(codeload, github))
    router.add_get("/_raw/{owner}/{repo}/{ref}/{path:.*}", partial(raw_file, github))
