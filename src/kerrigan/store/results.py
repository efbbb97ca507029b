"""Test results a job's runner sent: stored per file as parsed, read back for check runs and pages.

A file is stored whole as parsed (within the parser's limits); read back, a job's files are read one at a
time and cut to the tests a page or a check run lists, so that a job of twenty big files is never held in
memory at once.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Final

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import ENDED
from kerrigan.core.results import JUnitReport
from kerrigan.core.results.stored import report_from_json, report_json
from kerrigan.core.results.summary import listed_first
from kerrigan.store.jobs.holders import owned_job
from kerrigan.store.models import JobResultRow
from kerrigan.store.signals import ResultsReceived, note
from kerrigan.store.transitions import settle_session


async def store_results(
    session: AsyncSession, job_id: str, host: str, report: JUnitReport, at: datetime
) -> int:
    """Keep one results file of the job ``host`` runs (or ran), under ``report.file``; a file sent again
    replaces the one of the same path. The job's primary key; ``NotYoursError`` for another host's job."""
    job = await owned_job(session, job_id, host)
    path = report.file
    same = (JobResultRow.job_pk == job.pk) & (JobResultRow.path == path)
    await session.execute(delete(JobResultRow).where(same))
    session.add(JobResultRow(job_pk=job.pk, path=path, report=report_json(report), received_at=at))
    await session.flush()
    counts = report.counts
    note(session, ResultsReceived(counts.passed, counts.failed, counts.errors, counts.skipped))
    if job.state in ENDED:  # sent after the end (a runner that restarted): a check run still under way
        await settle_session(session, job.session_pk, at, news=True)  # shows it; a completed one is left
    return job.pk


# What of a job's tests a page or a check run lists: failures first, the rest counted.
LISTED: Final = 5_000
LISTED_CHARS: Final = 2_000_000  # of their names and text


async def results_of(session: AsyncSession, job_pks: Collection[int]) -> dict[int, list[JUnitReport]]:
    """Each job's results files, in the order they arrived, keeping of each job the tests shown first
    (failures, errors, skipped, passed), :data:`LISTED` and :data:`LISTED_CHARS` at most; every count
    is kept. A job without any is missing."""
    if not job_pks:
        return {}
    files = await session.execute(
        select(JobResultRow.pk, JobResultRow.job_pk)
        .where(JobResultRow.job_pk.in_(job_pks))
        .order_by(JobResultRow.pk)
    )
    found: dict[int, list[JUnitReport]] = {}
    for pk, job_pk in files.all():
        row = (
            await session.execute(select(JobResultRow.path, JobResultRow.report).where(JobResultRow.pk == pk))
        ).one_or_none()
        if row is None:  # replaced by a resend meanwhile: its successor comes later in the list
            continue
        path, report = row
        reports = found.setdefault(int(job_pk), [])
        reports.append(report_from_json(report or {}, path))
        found[int(job_pk)] = listed_first(reports, LISTED, LISTED_CHARS)
    return found


async def result_count(session: AsyncSession, job_id: str, *, excluding: str = "") -> int:
    """How many results files the job keeps, not counting one of path ``excluding`` (a resend)."""
    if not (job_id.isascii() and job_id.isdigit()):
        return 0
    found = await session.scalar(
        select(func.count())
        .select_from(JobResultRow)
        .where(JobResultRow.job_pk == int(job_id), JobResultRow.path != excluding)
    )
    return int(found or 0)
