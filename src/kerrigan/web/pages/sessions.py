"""``/sessions/{id}``: the check run's details page.

The resolution shown is the one stored with the session (the ``kerrigan explain`` JSON of DESIGN.md, as it was
when the session was resolved), task by task: what was requested, which pools and devices were eligible, the
histogram of reasons marked never or not yet, the nearest misses, and the rejected devices (a task's first
``REJECTED_SHOWN``, then how many more) with every reason in a table that sorts and filters (``?q=`` filters
on the server over them all, so it works without JavaScript). Then the jobs, each with the end of its output
(at most ``TAIL_BYTES``, less when a session has many jobs, so the page stays small whatever they printed) and
a link to its output a page at a time (``/sessions/{id}/jobs/{job}/output?page=<n>``, each page at most
``CHUNKS_PER_PAGE`` chunks) and its whole log as plain text (``/sessions/{id}/jobs/{job}/output.txt``). A
finished session's page starts with its jobs; the resolution comes below them in a ``<details>``, one click
away.

While a job runs, its output streams into the page: ``/sessions/{id}/jobs/{job}/output/stream`` is a stream
of server-sent events, each a chunk stored after the last one the page has, read from the store every
``STREAM_POLL_S`` (no signal fires for output), and an ``end`` event once the job has ended;
``static/session.js`` appends them. A connection sends at most ``STREAM_BYTES`` and lasts at most
``STREAM_S``, then closes: the browser reconnects from the last chunk it got (``Last-Event-ID``). Without
JavaScript the page shows the tail and reloads itself every few seconds (a ``<meta>`` refresh inside
``<noscript>``).

Those who may cancel from the web (:mod:`kerrigan.web.api.cancel`: System Admins and the owners of a pool
the session uses) see a *Cancel* button while it has not ended: a form posting to
``/sessions/{id}/cancel`` with the CSRF token, which redirects back to the page, now saying who cancelled.

The view models here are built from the JSON shape, so the explain page renders its live resolution with
the same partial (``session_task.html``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final
from urllib.parse import quote, urlencode

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import JobState, RetryPolicy, describe_attempt, reason_words, retry_cause
from kerrigan.core.results import ResultsSummary, summarise
from kerrigan.core.results.summary import headline
from kerrigan.core.roles import Principal
from kerrigan.core.runner_fields import MAX_CHUNK_BYTES, size_text
from kerrigan.core.sessions import Session, SessionState
from kerrigan.store.artifacts import ArtifactInfo, artifacts_of
from kerrigan.store.inventory import NotFoundError
from kerrigan.store.models import SessionRow
from kerrigan.store.results import results_of
from kerrigan.store.session_pages import (
    DeviceFacts,
    JobDetails,
    OutputTail,
    device_facts,
    output_page,
    output_since,
    output_tail,
    page_count,
    session_job_pk,
    session_jobs,
    session_repository,
)
from kerrigan.store.sessions import get_session, queue_position
from kerrigan.store.short_ids import FULL_LENGTH
from kerrigan.web import short_ids
from kerrigan.web.api.cancel import cancel_from_web, web_may_cancel
from kerrigan.web.api.history import stream_log
from kerrigan.web.editing import PostedForm
from kerrigan.web.errors import ApiError
from kerrigan.web.pages.rendering import render
from kerrigan.web.reading import read_access
from kerrigan.web.signin import page_reader, redirect
from kerrigan.web.state import DATABASE, SETTINGS
from kerrigan.web.writers import WritersUnknownError

routes = web.RouteTableDef()

CHUNKS_PER_PAGE: Final = 4  # a chunk is at most MAX_CHUNK_BYTES: a page of output is at most 1 MiB
PAGE_BYTES_AT_MOST: Final = CHUNKS_PER_PAGE * MAX_CHUNK_BYTES
TAIL_BYTES: Final = 64 * 1024  # of each job's output on the session page
SESSION_TAIL_BYTES: Final = 512 * 1024  # of all its jobs' output: many jobs show less each
LEAST_TAIL_BYTES: Final = 4 * 1024
REFRESH_S: Final = 5
STREAM_POLL_S: Final = 1.0
STREAM_BATCH: Final = 8  # chunks read at a time
STREAM_BYTES: Final = 4 * 1024 * 1024  # a connection's output at most; the browser reconnects for more
STREAM_S: Final = 600.0
MAX_QUERY: Final = 200

OUTCOME_WORDS: Final = {
    "eligible": "schedulable: eligible devices exist",
    "waiting": "waiting: matching devices are busy or offline",
    "unschedulable": "unschedulable: no device can ever match",
}
HOST_OUTCOME_WORDS: Final = {  # a task with board: none
    "eligible": "schedulable: eligible runner hosts exist (no board)",
    "waiting": "waiting: matching runner hosts are offline or paused",
    "unschedulable": "unschedulable: no runner host can ever run it",
}


# -- the resolution, as the pages show it ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReasonView:
    """One reason a device was rejected; ``never`` unless the reason can clear by itself."""

    text: str
    never: bool


@dataclass(frozen=True, slots=True)
class VerdictView:
    """A rejected device with every reason."""

    device: str
    pool: str
    reasons: tuple[ReasonView, ...]
    never: bool

    @property
    def when(self) -> str:
        """``never`` or ``not yet``, in words."""
        return "never" if self.never else "not yet"

    def matches(self, needle: str) -> bool:
        """Whether ``needle`` (lowercase) is in the row's text, as the in-page filter reads it."""
        texts = (self.device, self.pool, self.when, *(reason.text for reason in self.reasons))
        return any(needle in text.lower() for text in texts)


@dataclass(frozen=True, slots=True)
class HostVerdictView:
    """A runner host a task with ``board: none`` may not run on, with every reason."""

    host: str
    reasons: tuple[ReasonView, ...]
    never: bool

    @property
    def when(self) -> str:
        """``never`` or ``not yet``, in words."""
        return "never" if self.never else "not yet"


@dataclass(frozen=True, slots=True)
class HistogramRow:
    """How many devices failed one rule, never or not yet, and the values they had instead."""

    reason: str
    kind: str
    count: int
    permanent: bool
    got: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Requested:
    """One requested label, written as the explain text writes it, with its key's description."""

    key: str
    text: str
    description: str | None


@dataclass(frozen=True, slots=True)
class PoolView:
    """An eligible pool and how many of its devices are eligible (None when not known)."""

    id: str
    eligible: int | None


@dataclass(frozen=True, slots=True)
class Hint:
    """Did-you-mean advice on a requested key, value or tag, at its manifest line."""

    field: str
    line: int | None
    message: str


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task's resolution, ready to render."""

    id: str
    line: int | None
    outcome: str
    summary: str
    labels: tuple[Requested, ...]
    tags: tuple[str, ...]
    eligible_pools: tuple[PoolView, ...]
    rejected_pools: tuple[tuple[str, tuple[str, ...]], ...]
    selected: tuple[str, ...]
    eligible_devices: tuple[str, ...]
    histogram: tuple[HistogramRow, ...]
    nearest_misses: tuple[VerdictView, ...]
    hints: tuple[Hint, ...]
    rejected: tuple[VerdictView, ...]  # after the filter
    rejected_total: int
    query: str  # the filter applied to ``rejected`` ("" for none)
    rejected_more: int = 0  # rejected devices (after the filter) left off the page: :func:`bounded`
    # A gang task: each role's resolution (a view of its own, ``role`` set), the runner hosts with a
    # device for every role, and why it can never run when no host has.
    roles: tuple[TaskView, ...] = ()
    role: str | None = None
    gang_hosts: tuple[str, ...] = ()
    gang_host_count: int = 0
    gang_never: str | None = None
    # A task with board: none: the runner hosts it may run on, the one it would run on now, and each other
    # host with every reason; ``histogram`` is then the hosts'.
    boardless: bool = False
    hosts_total: int = 0
    hosts_eligible: tuple[str, ...] = ()
    host_selected: str | None = None
    hosts_rejected: tuple[HostVerdictView, ...] = ()

    @property
    def outcome_words(self) -> str:
        """The outcome in words."""
        if self.boardless:
            return HOST_OUTCOME_WORDS.get(self.outcome, self.outcome)
        if self.gang_never:
            return f"unschedulable: {self.gang_never}"
        return OUTCOME_WORDS.get(self.outcome, self.outcome)

    @property
    def total_devices(self) -> int:
        """How many devices were considered."""
        return len(self.eligible_devices) + self.rejected_total


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def label_text(key: str, values: Sequence[str]) -> str:
    """``key=value``, or ``key in [a, b]`` for a list (as ``kerrigan explain`` writes them)."""
    return f"{key}={values[0]}" if len(values) == 1 else f"{key} in [{', '.join(values)}]"


def _verdict(raw: Any, transient: frozenset[str]) -> VerdictView:
    body = _dict(raw)
    reasons = tuple(
        # A reason that can clear by itself (maintenance, offline, busy) reads the same as its rule; every
        # other reason is a label, a tag or a retired device, which never change without an edit.
        ReasonView(str(text), str(text) not in transient)
        for text in _list(body.get("reasons"))
    )
    never = body.get("never")
    return VerdictView(
        str(body.get("device", "")),
        str(body.get("pool", "")),
        reasons,
        bool(never) if isinstance(never, bool) else any(reason.never for reason in reasons),
    )


def task_view(
    raw: Mapping[str, Any], facts: Mapping[str, DeviceFacts] | None = None, query: str = ""
) -> TaskView:
    """A task of a resolution document; ``query`` keeps only the rejected devices whose row contains it."""
    requested = _dict(raw.get("requested"))
    descriptions = _dict(raw.get("descriptions"))
    labels = tuple(
        Requested(
            str(key),
            label_text(str(key), [str(v) for v in _list(values)] or [""]),
            str(descriptions[key]) if key in descriptions else None,
        )
        for key, values in _dict(requested.get("labels")).items()
    )
    histogram = tuple(
        HistogramRow(
            str(row.get("reason", "")),
            str(row.get("kind", "")),
            _int(row.get("count")) or 0,
            bool(row.get("permanent")),
            tuple((str(value), _int(count) or 0) for value, count in _dict(row.get("got")).items()),
        )
        for row in map(_dict, _list(raw.get("histogram")))
    )
    transient = frozenset(row.reason for row in histogram if not row.permanent)
    eligible = tuple(str(device) for device in _list(raw.get("eligible_devices")))
    per_pool = Counter(facts[device].pool for device in eligible if facts and device in facts)
    known = facts is not None and all(device in facts for device in eligible)
    rejected = tuple(_verdict(verdict, transient) for verdict in _list(raw.get("rejected_devices")))
    needle = query.strip().lower()
    gang = _dict(raw.get("gang"))
    hosts = _dict(raw.get("hosts"))
    if raw.get("board") == "none":
        histogram = tuple(
            HistogramRow(
                str(row.get("reason", "")),
                str(row.get("kind", "")),
                _int(row.get("count")) or 0,
                bool(row.get("permanent")),
                (),
            )
            for row in map(_dict, _list(hosts.get("histogram")))
        )
    roles = tuple(
        replace(
            task_view({**role, "id": raw.get("id", ""), "line": None}, facts, query),
            role=str(role.get("role", "")),
        )
        for role in map(_dict, _list(raw.get("roles")))
    )
    return TaskView(
        id=str(raw.get("id", "")),
        line=_int(raw.get("line")),
        outcome=str(raw.get("outcome", "")),
        summary=str(raw.get("summary", "")),
        labels=labels,
        tags=tuple(str(tag) for tag in _list(requested.get("tags"))),
        eligible_pools=tuple(
            PoolView(str(pool), per_pool.get(str(pool), 0) if known else None)
            for pool in _list(raw.get("eligible_pools"))
        ),
        rejected_pools=tuple(
            (str(verdict.get("pool", "")), tuple(str(text) for text in _list(verdict.get("reasons"))))
            for verdict in map(_dict, _list(raw.get("rejected_pools")))
        ),
        selected=tuple(str(device) for device in _list(raw.get("selected"))),
        eligible_devices=eligible,
        histogram=histogram,
        nearest_misses=tuple(_verdict(verdict, transient) for verdict in _list(raw.get("nearest_misses"))),
        hints=tuple(
            Hint(str(hint.get("field", "")), _int(hint.get("line")), str(hint.get("message", "")))
            for hint in map(_dict, _list(raw.get("hints")))
        ),
        rejected=tuple(verdict for verdict in rejected if verdict.matches(needle)) if needle else rejected,
        rejected_total=len(rejected),
        query=query.strip(),
        roles=roles,
        gang_hosts=tuple(str(host) for host in _list(gang.get("hosts"))),
        gang_host_count=_int(gang.get("host_count")) or 0,
        gang_never=str(gang["never"]) if gang.get("never") else None,
        boardless=raw.get("board") == "none",
        hosts_total=_int(hosts.get("total")) or 0,
        hosts_eligible=tuple(str(host) for host in _list(hosts.get("eligible"))),
        host_selected=str(hosts["selected"]) if hosts.get("selected") else None,
        hosts_rejected=tuple(_host_verdict(verdict) for verdict in _list(hosts.get("rejected"))),
    )


def _host_verdict(raw: Any) -> HostVerdictView:
    body = _dict(raw)
    never = bool(body.get("never"))
    # The host's reasons are one host's: a verdict that can clear by itself has none that cannot.
    reasons = tuple(ReasonView(str(text), never) for text in _list(body.get("reasons")))
    return HostVerdictView(str(body.get("host", "")), reasons, never)


REJECTED_SHOWN: Final = 1000  # rows of rejected devices a task shows; the filter reaches the others


def bounded(view: TaskView, limit: int = REJECTED_SHOWN) -> TaskView:
    """``view`` with at most ``limit`` rejected devices, the first ones, and how many more there are: a lab
    of 10,000 devices would otherwise make a page of 4 MB. The filter (``?q=``) searches them all."""
    if view.roles:
        view = replace(view, roles=tuple(bounded(role, limit) for role in view.roles))
    if len(view.rejected) <= limit:
        return view
    return replace(view, rejected=view.rejected[:limit], rejected_more=len(view.rejected) - limit)


def named_devices(resolution: Mapping[str, Any]) -> set[str]:
    """The devices whose facts the page shows: the selected and the eligible ones."""
    named: set[str] = set()
    for task in map(_dict, _list(resolution.get("tasks"))):
        for part in (task, *map(_dict, _list(task.get("roles")))):  # a gang's roles too
            named.update(str(device) for device in _list(part.get("selected")))
            named.update(str(device) for device in _list(part.get("eligible_devices")))
    return named


@dataclass(frozen=True, slots=True)
class ProblemView:
    """A manifest error or warning, in its file at its line."""

    path: str
    line: int | None
    column: int | None
    field: str
    message: str


def problems(raw: Iterable[Any]) -> tuple[ProblemView, ...]:
    """Errors or warnings of a resolution document."""
    return tuple(
        ProblemView(
            str(problem.get("path", "")),
            _int(problem.get("line")),
            _int(problem.get("column")),
            str(problem.get("field", "")),
            str(problem.get("message", "")),
        )
        for problem in map(_dict, raw)
    )


# -- jobs ------------------------------------------------------------------------------------------


def duration_text(seconds: float) -> str:
    """A duration for people: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 07 min``."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass(frozen=True, slots=True)
class AccountingView:
    """A finished job's ``reservation_use``: the CPU time it used of what it reserved."""

    cpu_s: float | None
    wall_s: float | None
    vcpus: int | None
    use_percent: str | None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def accounting_view(accounting: Mapping[str, Any] | None) -> AccountingView | None:
    """The accounting a runner reported, or None when it had none (absent, never zero)."""
    use = _dict((accounting or {}).get("reservation_use"))
    if not use:
        return None
    ppm = _number(use.get("average_use_ppm"))
    return AccountingView(
        _number(use.get("cpu_s")),
        _number(use.get("wall_s")),
        _int(use.get("vcpus")),
        f"{ppm / 10_000:.1f}%" if ppm is not None else None,
    )


NOT_RUN: Final = "not_run"
_WAITING_STATES: Final = frozenset({"queued", "leased"})


def _attempt_text(job: JobDetails, jobs: Sequence[JobDetails], resolution: Mapping[str, Any]) -> str | None:
    """The attempt in the check run's words, for a job that is a retry or was retried; else None."""
    if job.attempt <= 1 and job.state != JobState.RETRIED:
        return None
    attempts = RetryPolicy.from_dict(resolution.get("retry")).max_attempts
    before = next((other for other in jobs if other.pk == job.retry_of), None)
    after = retry_cause(before.reason, before.exit_status, before.ran_on) if before else None
    return describe_attempt(job.attempt, attempts, job.ran_on, after)


@dataclass(frozen=True, slots=True)
class JobView:
    """A job with the end of its output; ``session_ended`` when its session is completed."""

    job: JobDetails
    duration: str | None
    accounting: AccountingView | None
    output: OutputTail
    session_ended: bool = False
    tail_bytes: int = TAIL_BYTES
    attempt_text: str | None = None  # "attempt 2 of 3 on modalix-redbox after runner_lost on ..."
    results: ResultsSummary | None = None  # every test of the JUnit XML files its runner sent
    files: tuple[ArtifactInfo, ...] = ()  # what it uploaded (artifacts.upload), and notes of what not

    @property
    def results_headline(self) -> str:
        """``**1 failed**, 2 passed`` without the markdown: the counts of its tests."""
        return headline(self.results.counts).replace("**", "") if self.results else ""

    @property
    def pages(self) -> int:
        """How many pages its whole output fills."""
        return page_count(self.job.chunks, CHUNKS_PER_PAGE)

    @property
    def output_size(self) -> str:
        """How much output the runner host sent, for people."""
        return size_text(self.job.output_bytes)

    @property
    def tail_size(self) -> str:
        """How much of the end of it the session page shows, for people."""
        return size_text(self.tail_bytes)

    @property
    def state(self) -> str:
        """The job's state; ``not_run`` for a job its session ended without (the dispatcher skips it)."""
        if self.session_ended and self.job.state in _WAITING_STATES:
            return NOT_RUN
        return self.job.state

    @property
    def reason_text(self) -> str | None:
        """Why the job ended as it did, in words, with the runner's detail."""
        if self.state == NOT_RUN:
            return "the session ended before it was dispatched"
        reason = self.job.reason
        words = reason_words(reason) if reason else None
        detail = self.job.detail
        if words and detail:
            return f"{words} ({detail})"
        return words or detail

    @property
    def requested(self) -> str | None:
        """A stop Kerrigan asked for and the runner has not answered yet."""
        if self.job.cancel_requested and self.job.finished_at is None:
            return "cancel requested"
        if self.job.withdraw_requested and self.job.finished_at is None:
            return "withdraw requested"
        return None


def _duration(started: datetime | None, finished: datetime | None, now: datetime) -> str | None:
    if started is None:
        return None
    return duration_text(((finished or now) - started).total_seconds())


def _page_number(value: str | None) -> int | None:
    return (
        int(value) if value is not None and value.isascii() and value.isdigit() and len(value) < 10 else None
    )


def cut_text(notice: str | None) -> str | None:
    """The cut notice as the start of a sentence: ``Output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)``."""
    words = notice.strip().strip("[]") if notice else ""
    return words[:1].upper() + words[1:] if words else None


def tail_bytes(jobs: int) -> int:
    """How much of each job's output the session page shows: a session's page stays small however many."""
    return max(LEAST_TAIL_BYTES, min(TAIL_BYTES, SESSION_TAIL_BYTES // max(jobs, 1)))


def output_path(session_id: str, job_pk: int, page: int | None = None) -> str:
    """Where a job's output is, a page at a time (the newest without ``page``)."""
    path = f"/sessions/{quote(session_id)}/jobs/{job_pk}/output"
    return path + (f"?page={page}" if page is not None else "")


def raw_log_path(session_id: str, job_pk: int) -> str:
    """Where a job's whole log is, as plain text."""
    return f"/sessions/{quote(session_id)}/jobs/{job_pk}/output.txt"


def file_path(session_id: str, job_pk: int, file_pk: int) -> str:
    """Where a job's uploaded file (``artifacts.upload``) is downloaded (:mod:`.job_files`)."""
    return f"/sessions/{quote(session_id)}/jobs/{job_pk}/files/{file_pk}"


def stream_path(session_id: str, job_pk: int) -> str:
    """Where a running job's new output streams from (server-sent events)."""
    return f"/sessions/{quote(session_id)}/jobs/{job_pk}/output/stream"


def sse_event(data: Mapping[str, Any], *, event: str | None = None, event_id: int | None = None) -> bytes:
    """One server-sent event whose data is ``data`` as JSON: one line, whatever the output holds (a raw
    newline or carriage return in it would end the event's field)."""
    lines = [f"event: {event}"] if event else []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, ensure_ascii=True))
    return ("\n".join(lines) + "\n\n").encode()


# -- the page --------------------------------------------------------------------------------------


def _link(path: str, query: Mapping[str, str], fragment: str = "", **changes: str | None) -> str:
    """``path`` with the current query changed (None removes a parameter)."""
    merged = {key: value for key, value in query.items() if key in ("q", "task", "job", "page", "refresh")}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    search = urlencode(merged)
    return path + (f"?{search}" if search else "") + (f"#{fragment}" if fragment else "")


def _diagnostics_open(session: Session, tasks: Sequence[TaskView], query: str) -> bool:
    """Whether the scheduling diagnostics start open: for a session that has not ended, a filter asked
    for, or a task no device can run (then they are the news). A finished session opens on its jobs."""
    return (
        session.state is not SessionState.COMPLETED
        or bool(query.strip())
        or any(task.outcome != "eligible" for task in tasks)
    )


def _refresh(session: Session, query: Mapping[str, str]) -> int | None:
    if query.get("refresh") == "0" or session.awaiting_approval:
        return None
    return REFRESH_S if session.state is not SessionState.COMPLETED else None


def _no_session(session_id: str) -> ApiError:
    return ApiError(404, "not_found", f"There is no session {session_id}.")


async def readable_session(request: web.Request, principal: Principal | None, session_id: str) -> None:
    """The 404 page naming the session, unless it exists and the reader may read its repository
    (:mod:`kerrigan.web.reading`: one they may not read is not there for them, in the same words)."""
    async with request.config_dict[DATABASE].sessions() as db:
        repository = await session_repository(db, session_id)
    if repository is None:
        raise _no_session(session_id)
    await read_access(request, principal).check(repository, _no_session(session_id))


async def _session_or_404(db: AsyncSession, session_id: str) -> Session:
    """The session (its repository checked first by :func:`readable_session`), or the 404 page."""
    try:
        return await get_session(db, session_id)
    except NotFoundError:
        raise _no_session(session_id) from None


@routes.get("/sessions/{session_id}")
async def session_page(request: web.Request) -> web.Response:
    """A session: where it comes from, how each task resolved, and its jobs with their output."""
    principal = await page_reader(request)
    session_id = request.match_info["session_id"]
    if len(session_id) != FULL_LENGTH:  # typed short, as pages and check runs print it: to its own page
        whole = await short_ids.session_id(request, session_id)
        await readable_session(request, principal, whole)  # a session it may not read: its 404 here
        query = f"?{request.query_string}" if request.query_string else ""
        raise web.HTTPFound(f"/sessions/{whole}{query}")
    await readable_session(request, principal, session_id)
    query_text = request.query.get("q", "")[:MAX_QUERY]
    only_task = request.query.get("task") or None
    chosen_job = _page_number(request.query.get("job"))
    chosen_page = _page_number(request.query.get("page"))
    database = request.config_dict[DATABASE]
    async with database.sessions() as db:
        session = await _session_or_404(db, session_id)
        jobs = await session_jobs(db, session_id)
        resolution = session.resolution
        facts = await device_facts(
            db, named_devices(resolution) | {job.device_id for job in jobs if job.device_id}
        )
        position = (
            await queue_position(db, session_id)
            if session.state is SessionState.QUEUED and not session.awaiting_approval
            else None
        )
        if chosen_job is not None and any(job.pk == chosen_job for job in jobs):
            # A page of output used to be shown here (``?job=&page=``): links to it still lead to it.
            raise web.HTTPFound(output_path(session_id, chosen_job, chosen_page))
        each = tail_bytes(len(jobs))
        outputs = [await output_tail(db, job.pk, job.chunks, each) for job in jobs]
        results = await results_of(db, [job.pk for job in jobs])
        files = await artifacts_of(db, [job.pk for job in jobs])
        cancelled = (
            await db.execute(
                select(SessionRow.cancelled_by, SessionRow.cancel_reason).where(SessionRow.id == session_id)
            )
        ).one_or_none()
        try:
            may_cancel = session.state is not SessionState.COMPLETED and await web_may_cancel(
                request, db, principal, session
            )
        except WritersUnknownError:  # GitHub silent: no button; the check run's Cancel still works
            may_cancel = False
    now = database.clock()
    tasks = [
        bounded(task_view(raw, facts, query_text if only_task in (None, raw.get("id")) else ""))
        for raw in map(_dict, _list(resolution.get("tasks")))
    ]
    job_views = [
        JobView(
            job,
            _duration(job.started_at, job.finished_at, now),
            accounting_view(job.accounting),
            output,
            session_ended=session.state is SessionState.COMPLETED,
            tail_bytes=each,
            attempt_text=_attempt_text(job, jobs, resolution),
            results=summarise(results[job.pk]) if job.pk in results else None,
            files=tuple(files.get(job.pk, ())),
        )
        for job, output in zip(jobs, outputs, strict=True)
    ]
    github = request.config_dict[SETTINGS].github_url.rstrip("/")
    path = f"/sessions/{quote(session_id)}"

    def link(fragment: str = "", **changes: str | None) -> str:
        return _link(path, request.query, fragment, **changes)

    def output_link(job_pk: int, page: int | None = None) -> str:
        return output_path(session_id, job_pk, page)

    def raw_link(job_pk: int) -> str:
        return raw_log_path(session_id, job_pk)

    def stream_link(job_pk: int) -> str:
        return stream_path(session_id, job_pk)

    def file_link(job_pk: int, file_pk: int) -> str:
        return file_path(session_id, job_pk, file_pk)

    return await render(
        request,
        "session.html",
        {
            "session": session,
            "short_id": session_id[:8],
            "repo_url": f"{github}/{session.repository}" if session.repository else None,
            "errors": problems(_list(resolution.get("errors"))),
            "warnings": problems(_list(resolution.get("warnings"))),
            "resolved": bool(resolution),
            "tasks": tasks,
            "jobs": job_views,
            "jobs_by_task": {view.job.task_id: view for view in job_views},
            "facts": facts,
            "position": position,
            "refresh": _refresh(session, request.query),
            "refresh_off": request.query.get("refresh") == "0",
            "filter_action": path,
            "filter_keep": {key: request.query[key] for key in ("refresh",) if key in request.query},
            "link": link,
            "output_link": output_link,
            "raw_link": raw_link,
            "stream_link": stream_link,
            "file_link": file_link,
            "size_text": size_text,
            "diagnostics_open": _diagnostics_open(session, tasks, query_text),
            "cut_text": cut_text,
            "cancelled_by": cancelled[0] if cancelled else None,
            "cancel_reason": cancelled[1] if cancelled else None,
            "may_cancel": may_cancel,
            "cancel_action": f"{path}/cancel",
        },
    )


@routes.post("/sessions/{session_id}/cancel")
async def cancel_session_page(request: web.Request) -> web.Response:
    """The page's *Cancel* button: sign-in and the CSRF token first, then the same rule as the API (403
    and 404 are the error page); back to the session page, which says who cancelled. An ended session is
    left as it was."""
    posted = await PostedForm.read(request)
    session_id = request.match_info["session_id"]
    await cancel_from_web(request, posted.principal, session_id)
    return redirect(f"/sessions/{quote(session_id)}")


@routes.get("/sessions/{session_id}/jobs/{job_id}/output")
async def job_output(request: web.Request) -> web.Response:
    """A job's output a page at a time (``?page=<n>``, 1 the oldest, the newest by default), each page at
    most ``CHUNKS_PER_PAGE`` chunks, with links to the first, previous, next and last pages."""
    principal = await page_reader(request)
    session_id = request.match_info["session_id"]
    await readable_session(request, principal, session_id)
    job_pk = _page_number(request.match_info["job_id"])
    database = request.config_dict[DATABASE]
    async with database.sessions() as db:
        session = await _session_or_404(db, session_id)
        job = next((job for job in await session_jobs(db, session_id) if job.pk == job_pk), None)
        if job is None:
            raise ApiError(
                404, "not_found", f"Session {session_id} has no job {request.match_info['job_id']}."
            )
        page = await output_page(
            db, job.pk, job.chunks, _page_number(request.query.get("page")), CHUNKS_PER_PAGE
        )

    def page_link(number: int) -> str:
        return output_path(session_id, job.pk, number)

    return await render(
        request,
        "session_output.html",
        {
            "session": session,
            "short_id": session_id[:8],
            "session_link": f"/sessions/{quote(session_id)}",
            "job": job,
            "output": page,
            "output_size": size_text(job.output_bytes),
            "page_size": size_text(PAGE_BYTES_AT_MOST),
            "cut": cut_text(job.output_cut),
            "page_link": page_link,
        },
    )


async def job_of(request: web.Request) -> tuple[str, int]:
    """The session id and job of the path, for a reader of its repository (else the session's 404); 404
    when the job is not one of that session's."""
    session_id = request.match_info["session_id"]
    await readable_session(request, await page_reader(request), session_id)
    job_pk = _page_number(request.match_info["job_id"])
    async with request.config_dict[DATABASE].sessions() as db:
        found = await session_job_pk(db, session_id, job_pk) if job_pk is not None else None
    if found is None:
        job = request.match_info["job_id"][:20]
        raise ApiError(404, "not_found", f"Session {session_id} has no job {job}.")
    return session_id, found


@routes.get("/sessions/{session_id}/jobs/{job_id}/output.txt")
async def job_raw_log(request: web.Request) -> web.StreamResponse:
    """A job's whole stored output as plain text, written chunk by chunk as it is read (the cut notice
    last, when it was cut): what the REST ``/api/v1/jobs/{id}/output`` serves, for the page's readers."""
    _, job_pk = await job_of(request)
    async with request.config_dict[DATABASE].sessions() as db:
        return await stream_log(request, db, job_pk)


def _after(request: web.Request) -> int:
    """The last chunk the page has: the browser's ``Last-Event-ID`` on a reconnect, else ``?after=``."""
    for raw in (request.headers.get("Last-Event-ID"), request.query.get("after")):
        if raw is not None and raw.lstrip("-").isascii() and raw.lstrip("-").isdigit() and len(raw) < 12:
            return max(int(raw), -1)
    return -1


@routes.get("/sessions/{session_id}/jobs/{job_id}/output/stream")
async def job_output_stream(request: web.Request) -> web.StreamResponse:
    """The job's output after the chunk the page has, as server-sent events: one ``message`` a chunk
    (``{"seq", "data", "evicted"}``, its ``id`` the chunk's number), then ``end`` (``{"state", "cut"}``)
    once the job has ended and every chunk was sent. At most ``STREAM_BYTES`` and ``STREAM_S`` a
    connection: then it closes without ``end``, and the browser reconnects from where it was."""
    _, job_pk = await job_of(request)
    after = _after(request)
    database = request.config_dict[DATABASE]
    response = web.StreamResponse(
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}  # no proxy holds events back
    )
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    await response.write(b"retry: 2000\n\n")
    loop = asyncio.get_running_loop()
    until = loop.time() + STREAM_S
    sent = 0
    while sent < STREAM_BYTES and loop.time() < until:
        # A database session per read: none is held while the stream waits.
        async with database.sessions() as db:
            since = await output_since(db, job_pk, after, STREAM_BATCH)
        for chunk in since.chunks:
            event = {"seq": chunk.seq, "data": chunk.data, "evicted": chunk.evicted}
            await response.write(sse_event(event, event_id=chunk.seq))
            after = chunk.seq
            sent += len(chunk.data.encode())
        if since.ended and len(since.chunks) < STREAM_BATCH:  # every chunk it stored was sent
            await response.write(sse_event({"state": since.state, "cut": since.cut}, event="end"))
            break
        if len(since.chunks) < STREAM_BATCH:
            await asyncio.sleep(STREAM_POLL_S)
    await response.write_eof()
    return response
