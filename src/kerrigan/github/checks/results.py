"""The test results on a session's check run: a section per job that sent any, and the failure annotations
of the completed check run.

Annotations add up on GitHub (each update appends those it carries), so they go with the one update that
completes the check run, never with the updates while jobs run. A job's section uses
``kerrigan.core.results``: counts, the files' problems, then a row per test, failures first, within its
share of the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from kerrigan.core.matrix import shown_name
from kerrigan.core.results import ResultsSummary, failure_annotations, render_markdown

RESULTS_BUDGET: Final = 24_000  # bytes of the summary (65,535 in all) the test tables share
MAX_ANNOTATIONS: Final = 200  # failures annotated on one check run (four requests of 50)


class WithResults(Protocol):
    """A job as the check run shows it (:class:`~kerrigan.github.checks.progress.JobProgress`)."""

    @property
    def task_id(self) -> str: ...

    @property
    def results(self) -> ResultsSummary | None: ...

    @property
    def current(self) -> bool: ...


def results_sections(jobs: Sequence[WithResults], details_url: str) -> list[str]:
    """The markdown of each current job's results, each within its share of :data:`RESULTS_BUDGET`."""
    shown = [job for job in jobs if job.current and job.results is not None]
    if not shown:
        return []
    share = RESULTS_BUDGET // len(shown)
    sections = []
    for job in shown:
        assert job.results is not None
        heading = f"### Test results: {shown_name(job.task_id)}" if len(shown) > 1 else "### Test results"
        text = render_markdown(job.results, share, details_url=details_url, heading=heading)
        if text:
            sections.append(text)
    return sections


def results_annotations(jobs: Sequence[WithResults]) -> list[dict[str, Any]]:
    """A ``failure`` annotation for each failed test that names a line of the repository, at most
    :data:`MAX_ANNOTATIONS` in all."""
    found: list[dict[str, Any]] = []
    for job in jobs:
        if not job.current or job.results is None or len(found) >= MAX_ANNOTATIONS:
            continue
        room = min(50, MAX_ANNOTATIONS - len(found))
        found += [annotation.as_json() for annotation in failure_annotations(job.results, limit=room)]
    return found
