"""The operation a request to GitHub's API is, as a route template: ``POST /repos/{owner}/{repo}/check-runs``.

Metrics count requests by operation, so the label must not carry ids, names or paths (one series per
check run would grow without end). A request to a route Kerrigan does not know is ``other``.
"""

from __future__ import annotations

import re
from typing import Final

_REPO: Final = r"/repos/[^/]+/[^/]+"
_ROUTES: Final = tuple(
    (re.compile(pattern + r"/?"), template)
    for pattern, template in (
        (_REPO + r"/contents(?:/.*)?", "/repos/{owner}/{repo}/contents/{path}"),
        (_REPO + r"/check-runs", "/repos/{owner}/{repo}/check-runs"),
        (_REPO + r"/check-runs/[^/]+", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
        (_REPO + r"/commits/[^/]+/check-runs", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
        (_REPO + r"/commits/[^/]+/pulls", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls"),
        (
            _REPO + r"/collaborators/[^/]+/permission",
            "/repos/{owner}/{repo}/collaborators/{username}/permission",
        ),
        (_REPO + r"/issues/[^/]+/comments", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
        (
            _REPO + r"/issues/comments/[^/]+/reactions",
            "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
        ),
        (_REPO + r"/pulls/[^/]+", "/repos/{owner}/{repo}/pulls/{pull_number}"),
        (_REPO + r"/installation", "/repos/{owner}/{repo}/installation"),
        (_REPO + r"/tarball/.+", "/repos/{owner}/{repo}/tarball/{ref}"),
        (_REPO + r"/actions/runs/[^/]+/artifacts", "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts"),
        (
            _REPO + r"/actions/artifacts/[^/]+/zip",
            "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip",
        ),
        (r"/app/installations/[^/]+/access_tokens", "/app/installations/{installation_id}/access_tokens"),
        (r"/installation/token", "/installation/token"),
        (r"/app-manifests/[^/]+/conversions", "/app-manifests/{code}/conversions"),
        (r"/app", "/app"),
    )
)
_API_PREFIX: Final = re.compile(r"^/api/v3(?=/)")  # GitHub Enterprise Server serves the API below it
_ORIGIN: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")


def _path(url: str) -> str:
    """The path of an absolute or relative URL, without its query or fragment."""
    return re.split(r"[?#]", _ORIGIN.sub("", url), maxsplit=1)[0] or "/"


def operation(method: str, url: str) -> str:
    """``METHOD /route/{template}`` of a request to GitHub's API, or ``METHOD other``."""
    path = _API_PREFIX.sub("", _path(url))
    verb = method.upper() if method.isascii() and method.isalpha() and len(method) <= 7 else "OTHER"
    for pattern, template in _ROUTES:
        if pattern.fullmatch(path):
            return f"{verb} {template}"
    return f"{verb} other"
