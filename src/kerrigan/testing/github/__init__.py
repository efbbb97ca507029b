"""A GitHub stand-in: an aiohttp server on loopback speaking the parts of GitHub's REST API Kerrigan uses.

It checks the App's JWT, hands out installation tokens (scoped to repositories and permissions when asked)
and revokes them, serves repository contents and tarballs at a commit (through a redirect, as GitHub does;
a file starting ``#!`` is executable in the tarball), keeps check runs, comments and reactions, answers
collaborator permissions and pulls, and refuses what GitHub would refuse. It records every request, and
faults can be injected per route (``stand_in.faults.inject``) to exercise retries; GitHub's rate limits are
enforced when asked (``enforce_limits=True``), and GETs answer conditional requests with 304.
"""

from kerrigan.testing.github.auth import generate_app_key
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.faults import Fault, Faults
from kerrigan.testing.github.limits import LimitedRequest, RateLimits
from kerrigan.testing.github.records import FakeRepository, RecordedRequest
from kerrigan.testing.github.server import DROPPED, GitHubStandIn
from kerrigan.testing.github.webhooks import (
    check_run_action_payload,
    pull_request_payload,
    push_payload,
    signed_headers,
)

__all__ = [
    "DROPPED",
    "FakeRepository",
    "Fault",
    "Faults",
    "GitHubError",
    "GitHubStandIn",
    "LimitedRequest",
    "RateLimits",
    "RecordedRequest",
    "check_run_action_payload",
    "generate_app_key",
    "pull_request_payload",
    "push_payload",
    "signed_headers",
]
