"""Check-run bodies: pure functions from a session's resolution to what GitHub is sent.

A body and its name are :mod:`~kerrigan.github.checks.body`; the check run before any job runs (a manifest's
errors, a fork's wait for approval, the resolution) is :mod:`~kerrigan.github.checks.resolution`; while and
after the jobs run, :mod:`~kerrigan.github.checks.progress` (its test results
:mod:`~kerrigan.github.checks.results`). GitHub's limits are kept in :mod:`~kerrigan.github.checks.limits`,
where they can be tested without GitHub: a summary of at most 65,535 bytes (cut at a whole row or piece,
saying how much the session page has), at most 50 annotations a request (the rest follow in updates), at
most 3 :mod:`~kerrigan.github.checks.actions`.
"""

from __future__ import annotations

from kerrigan.github.checks.actions import CANCEL_ACTION, HOLD_ACTION, RETRY_ACTION, validate_actions
from kerrigan.github.checks.annotations import hint_annotations, manifest_annotations
from kerrigan.github.checks.body import (
    CheckRunBody,
    SessionContext,
    body_from_json,
    check_run_name,
    workflow_of,
)
from kerrigan.github.checks.limits import ANNOTATIONS_PER_REQUEST, MAX_ACTIONS, SUMMARY_LIMIT
from kerrigan.github.checks.progress import (
    TAIL_LINE_CHARS,
    TAIL_LINES,
    JobFile,
    JobProgress,
    cancel_line,
    fit_summary,
    progress_body,
    progress_title,
    short_body,
)
from kerrigan.github.checks.resolution import (
    awaiting_approval_body,
    invalid_manifest_body,
    render_summary,
    resolution_body,
)

__all__ = [
    "ANNOTATIONS_PER_REQUEST",
    "CANCEL_ACTION",
    "HOLD_ACTION",
    "MAX_ACTIONS",
    "RETRY_ACTION",
    "SUMMARY_LIMIT",
    "TAIL_LINES",
    "TAIL_LINE_CHARS",
    "CheckRunBody",
    "JobFile",
    "JobProgress",
    "SessionContext",
    "awaiting_approval_body",
    "body_from_json",
    "cancel_line",
    "check_run_name",
    "fit_summary",
    "hint_annotations",
    "invalid_manifest_body",
    "manifest_annotations",
    "progress_body",
    "progress_title",
    "render_summary",
    "resolution_body",
    "short_body",
    "validate_actions",
    "workflow_of",
]
