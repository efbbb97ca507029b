"""Requests to GitHub counted by route template: never an id, a name or a path in the label."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kerrigan.core.github_operations import _ROUTES, operation

TEMPLATES = frozenset(template for _, template in _ROUTES) | {"other"}

API = "https://api.github.com"


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("POST", f"{API}/repos/octo/fw/check-runs", "POST /repos/{owner}/{repo}/check-runs"),
        (
            "PATCH",
            f"{API}/repos/octo/fw/check-runs/991",
            "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
        ),
        (
            "GET",
            f"{API}/repos/octo/fw/contents/.kerrigan/workflows/smoke.yml?ref=abc123",
            "GET /repos/{owner}/{repo}/contents/{path}",
        ),
        (
            "GET",
            f"{API}/repos/octo/fw/contents/.kerrigan/workflows",
            "GET /repos/{owner}/{repo}/contents/{path}",
        ),
        (
            "GET",
            f"{API}/repos/octo/fw/commits/abc/check-runs?check_name=x",
            "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
        ),
        (
            "GET",
            f"{API}/repos/octo/fw/commits/abc/pulls",
            "GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls",
        ),
        (
            "GET",
            f"{API}/repos/octo/fw/collaborators/hubot/permission",
            "GET /repos/{owner}/{repo}/collaborators/{username}/permission",
        ),
        (
            "POST",
            f"{API}/repos/octo/fw/issues/12/comments",
            "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
        ),
        (
            "POST",
            f"{API}/repos/octo/fw/issues/comments/77/reactions",
            "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
        ),
        ("GET", f"{API}/repos/octo/fw/pulls/5", "GET /repos/{owner}/{repo}/pulls/{pull_number}"),
        ("GET", f"{API}/repos/octo/fw/tarball/abc", "GET /repos/{owner}/{repo}/tarball/{ref}"),
        ("GET", f"{API}/repos/octo/fw/installation", "GET /repos/{owner}/{repo}/installation"),
        (
            "POST",
            f"{API}/app/installations/42/access_tokens",
            "POST /app/installations/{installation_id}/access_tokens",
        ),
        ("DELETE", f"{API}/installation/token", "DELETE /installation/token"),
        ("POST", f"{API}/app-manifests/abc/conversions", "POST /app-manifests/{code}/conversions"),
        # GitHub Enterprise Server serves the API under /api/v3.
        ("POST", "https://ghe.example/api/v3/repos/o/r/check-runs", "POST /repos/{owner}/{repo}/check-runs"),
        ("POST", "/repos/o/r/check-runs", "POST /repos/{owner}/{repo}/check-runs"),
        ("GET", f"{API}/repos/octo/fw/secret-scanning/alerts", "GET other"),
        ("GET", f"{API}/users/octocat", "GET other"),
        ("BREW", f"{API}/app", "BREW /app"),
        ("GET / HTTP", f"{API}/app", "OTHER /app"),
    ],
)
def test_a_request_is_named_by_its_route(method: str, url: str, expected: str) -> None:
    assert operation(method, url) == expected


@given(st.text(max_size=200), st.text(max_size=20))
def test_no_label_carries_what_the_url_carried(path: str, method: str) -> None:
    found = operation(method, f"{API}/repos/{path}")
    verb, _, route = found.partition(" ")
    assert verb == "OTHER" or (verb.isascii() and verb.isalpha() and len(verb) <= 7)
    assert route in TEMPLATES  # one of a fixed few, whatever the URL held
