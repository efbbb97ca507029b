"""What GitHub sends to the App: signed deliveries."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any


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


def pull_request_payload(
    repository: str,
    number: int,
    sha: str,
    *,
    action: str = "synchronize",
    installation: int = 1,
    branch: str = "feature",
    base: str = "main",
) -> dict[str, Any]:
    """The parts of a ``pull_request`` delivery Kerrigan reads: pull request ``number`` of ``repository``
    (not a fork) whose head ``branch`` is now at ``sha``, ``opened`` or ``synchronize`` (a push to it)."""
    return {
        "action": action,
        "number": number,
        "installation": {"id": installation},
        "repository": {"full_name": repository},
        "pull_request": {
            "number": number,
            "head": {"sha": sha, "ref": branch, "repo": {"full_name": repository}},
            "base": {"ref": base, "repo": {"full_name": repository}},
        },
        "sender": {"login": "octocat", "type": "User"},
    }


def check_run_action_payload(
    repository: str, check_run: Mapping[str, Any], identifier: str, login: str, *, installation: int = 1
) -> dict[str, Any]:
    """The parts of a ``check_run`` delivery Kerrigan reads when ``login`` clicks the action ``identifier``
    (``retry``, ``cancel``, ``hold``) on ``check_run`` (as the stand-in holds it: ``id``, ``name``,
    ``head_sha``, ``external_id``)."""
    return {
        "action": "requested_action",
        "requested_action": {"identifier": identifier},
        "check_run": {key: check_run[key] for key in ("id", "name", "head_sha", "external_id")},
        "installation": {"id": installation},
        "repository": {"full_name": repository},
        "sender": {"login": login, "type": "User"},
    }
