"""The check run while and after a session's jobs run: a row per job (device, runner host, duration, exit),
each retried task's attempts, test results, uploaded files, suspect devices and the jobs' last lines of
output, cut at whole pieces to fit the summary; its title in plain words; and the short body sent when
GitHub refuses the full one."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from kerrigan.core.holds import HELD_STATES
from kerrigan.core.lifecycle import (
    BOARD_FAULTS,
    LAB_CONCLUSIONS,
    Conclusion,
    JobState,
    SessionState,
    describe_attempt,
    reason_words,
)
from kerrigan.core.log_streams import CONSOLE_SHOWN
from kerrigan.core.matrix import shown_name
from kerrigan.core.results import ResultsSummary
from kerrigan.core.runner_fields import cut_of, size_text
from kerrigan.core.suspect_retry import SuspectFailure, SuspectRetry
from kerrigan.github.checks.body import CheckRunBody, SessionContext, compose_body
from kerrigan.github.checks.limits import SUMMARY_LIMIT, byte_size
from kerrigan.github.checks.markdown import cell, code, fenced, header
from kerrigan.github.checks.results import results_annotations, results_sections


@dataclass(frozen=True, slots=True)
class JobFile:
    """A file a job uploaded, linked from its check run; ``note`` says why one was not kept."""

    path: str
    url: str
    size: int | None
    note: str | None = None

    def line(self) -> str:
        """```logs/console.log` ([12 KiB](…))``, or the path and its note."""
        if self.note:
            return f"{code(self.path)}: {cell(self.note)}"
        # The path is the job's to choose: shown as code, never as a link's text (``](`` in it stays text).
        return f"{code(self.path)} ([{size_text(self.size or 0)}]({self.url}))"


@dataclass(frozen=True, slots=True)
class JobProgress:
    """One job as the check run shows it."""

    task_id: str
    state: str
    device_id: str | None = None
    host: str | None = None
    exit_status: int | None = None
    reason: str | None = None
    seconds: float | None = None
    output_tail: str = ""
    detail: str | None = None  # the runner's words for a refusal (the limit it names)
    attempt: int = 1
    attempts: int = 1  # the most attempts its session's retry policy allows
    after: str | None = None  # what ended the attempt it retries: "runner_lost on modalix-bluebox"
    suspect: str = ""  # its device fails this task more than its peers: "modalix-redbox failed 8 of 10 ..."
    results: ResultsSummary | None = None  # the tests of the JUnit XML files its runner sent
    files: tuple[JobFile, ...] = ()  # what it uploaded (artifacts.upload)
    roles: tuple[tuple[str, str], ...] = ()  # a gang's (role, device); device_id is the first role's
    boardless: bool = False  # ``board: none``: no device; ``host`` is where it runs
    suspect_failure: SuspectFailure | None = None  # it failed on a suspect device, and what became of it
    console_tail: str = ""  # its board's console's last chunks, when it failed or timed out

    def devices_cell(self) -> str:
        """Its device, or each role's: ``dut `modalix-old-02`<br>peer `davinci-old-01```; ``no board``."""
        if self.boardless:
            return "no board"
        if self.roles:
            return "<br>".join(f"{cell(role)} {code(device)}" for role, device in self.roles)
        return code(self.device_id) if self.device_id else ""

    @property
    def current(self) -> bool:
        """Whether this attempt counts (one a retry replaced does not)."""
        return self.state != JobState.RETRIED

    def attempt_text(self) -> str:
        """``attempt 2 of 3 on modalix-redbox after runner_lost on modalix-bluebox``."""
        where = self.host if self.boardless else self.device_id
        return describe_attempt(self.attempt, self.attempts, where, self.after)


MAX_FILES_LISTED: Final = 20  # a job's uploaded files linked from the check run; the page lists them all
TAIL_LINES: Final = 20
TAIL_LINE_CHARS: Final = 1000  # of each tail line: 20 long lines of several jobs stay within the summary


def _tail_line(line: str) -> str:
    return line if len(line) <= TAIL_LINE_CHARS else line[:TAIL_LINE_CHARS] + " [… line cut]"


_VERDICTS: Final = {
    Conclusion.SUCCESS: "Passed",
    Conclusion.CANCELLED: "Cancelled",
    Conclusion.TIMED_OUT: "Timed out",
    Conclusion.FAILURE: "Failed",
    Conclusion.ACTION_REQUIRED: "Lab problem",
    Conclusion.NEUTRAL: "Lab problem",
}
LAB_TITLE: Final = "Lab problem"  # how the title of a session the lab failed begins
MAX_LAB_JOBS: Final = 20  # jobs the lab problem's own section names; the table has every one
# What each of the lab's conclusions does on GitHub (docs/check-runs.md, "Lab problems").
_LAB_EFFECT: Final = {
    Conclusion.ACTION_REQUIRED: (
        "It ends `action_required`: where this check is required, the pull request cannot merge until a "
        "run passes. Once the lab is fixed, **Retry** (or `/kerrigan retry` on the pull request) runs it "
        "again."
    ),
    Conclusion.NEUTRAL: (
        "It ends `neutral`: this lab lets a pull request merge past its own problems. **Retry** (or "
        "`/kerrigan retry` on the pull request) runs it again once the lab is fixed."
    ),
}


_GOING: Final = {SessionState.QUEUED: "Queued", SessionState.IN_PROGRESS: "Running"}


def cancel_line(reason: str) -> str:
    """A cancel's reason as a sentence's start: ``Cancelled by hubot``, ``Superseded by 3f2a1b0``."""
    return reason[:1].upper() + reason[1:]


def _attempts(jobs: Sequence[JobProgress]) -> list[str]:
    """Each attempt of every task that had more than one, in order."""
    retried = {job.task_id for job in jobs if job.attempt > 1}
    lines = []
    for job in jobs:
        if job.task_id in retried:
            why = f" ({job.reason})" if job.reason else ""
            lines.append(f"- {code(shown_name(job.task_id))}: {cell(job.attempt_text())}: {job.state}{why}")
    return ["", "**Attempts**", "", *lines] if lines else []


# What the attempt after a suspect retry did, after "failed on modalix-redbox, suspect: ...; ".
_AFTER_SUSPECT: Final = {
    JobState.SUCCEEDED: "passed on {device}",
    JobState.FAILED: "failed on {device} too",
    JobState.TIMED_OUT: "timed out on {device}",
    JobState.CANCELLED: "cancelled on {device}",
    JobState.RETRIED: "failed on {device} too",
    JobState.RUNNING: "running on {device}",
}
_NOT_RETRIED: Final = {
    SuspectRetry.NO_PEER: "not retried: no device that is neither this one nor suspect can run this task",
    SuspectRetry.SPENT: "not retried: its suspect retries (retry.suspect) are spent",
}


def _suspect_retries(jobs: Sequence[JobProgress]) -> list[str]:
    """Each failure on a suspect device and what followed (DESIGN.md, "A lab problem is not a code
    failure"): ``failed on modalix-redbox, suspect: 8 of 10 failed this week; passed on modalix-bluebox``."""
    lines = []
    for job in jobs:
        failure = job.suspect_failure
        if failure is None:
            continue
        if failure.retry is SuspectRetry.RETRIED:
            following = next(
                (o for o in jobs if o.task_id == job.task_id and o.attempt == job.attempt + 1), None
            )
            then = "retried on a device that is not suspect"
            if following is not None and following.device_id:
                template = _AFTER_SUSPECT.get(JobState(following.state))
                then = (
                    template.format(device=following.device_id) if template else f"{then}: {following.state}"
                )
            elif following is not None:
                then = f"{then}: {following.state}"
        else:
            then = _NOT_RETRIED[failure.retry]
        lines.append(f"- {code(shown_name(job.task_id))}: {cell(failure.words())}; {cell(then)}")
    return ["**Suspect retries**", "", *lines] if lines else []


def _reasons(jobs: Sequence[JobProgress]) -> list[str]:
    """The reasons the table names (``runner_lost``) in words, each once; not one its state says already
    (a job ``timed_out`` for ``timed_out``)."""
    named = {job.reason for job in jobs if job.reason and job.reason != job.state}
    lines = [
        f"- `{reason}`: {cell(reason_words(reason))}"
        for reason in sorted(named)
        if reason_words(reason) != reason
    ]
    return ["", *lines] if lines else []


CUT_NOTE_ROOM: Final = 400  # bytes kept for the notes of what was left out


def fit_summary(
    head: Sequence[str], rows: Sequence[str], blocks: Sequence[tuple[str, bool]], limit: int = SUMMARY_LIMIT
) -> str:
    """The progress summary within ``limit`` bytes, cut at whole pieces only: the ``head`` (ending in the
    job table's heading), as many table ``rows`` as fit beside the sections that are not output, then each
    block (``(markdown, is_output)``) that still fits whole. What was left out is said ("N more jobs on the
    session page" under the table, and how many jobs' output and other sections were not shown); a cut
    never leaves a block open."""
    budget = limit - CUT_NOTE_ROOM
    parts = ["\n".join(head) + "\n"]
    used = byte_size(parts[0])
    # The sections that are not output (attempts, reasons, results, files) keep their room, up to half:
    # a table of hundreds of jobs does not crowd out what explains them.
    sections = sum(byte_size(text) + 2 for text, output in blocks if not output)
    table_budget = budget - min(sections, budget // 2)
    kept = 0
    for row in rows:
        if used + byte_size(row) + 1 > table_budget:
            break
        parts.append(row + "\n")
        used += byte_size(row) + 1
        kept += 1
    if kept < len(rows):
        note = f"\n{len(rows) - kept} more jobs on the session page.\n"
        parts.append(note)
        used += byte_size(note)
    outputs_left = sections_left = 0
    for text, output in blocks:
        piece = "\n" + text + "\n"
        if used + byte_size(piece) > budget:
            if output:
                outputs_left += 1
            else:
                sections_left += 1
            continue
        parts.append(piece)
        used += byte_size(piece)
    left = []
    if outputs_left:
        left.append(f"the output of {outputs_left} more job(s)")
    if sections_left:
        left.append(f"{sections_left} more section(s)")
    if left:
        parts.append(f"\n{' and '.join(left).capitalize()} on the session page (this summary is full).\n")
    return "".join(parts)


def _blocks(jobs: Sequence[JobProgress], context: SessionContext) -> list[tuple[str, bool]]:
    """What follows the job table, as whole markdown blocks (a list, a ``<details>`` with its code block),
    each with whether it is a job's output: kept whole or left out, never cut inside."""
    blocks: list[tuple[str, bool]] = [("\n".join(_suspect_retries(jobs)), False)]
    blocks.append(("\n".join(_attempts(jobs) + _reasons(jobs)).strip("\n"), False))
    blocks += [(section.rstrip("\n"), False) for section in results_sections(jobs, context.details_url)]
    uploaded = [job for job in jobs if job.current and job.files]
    if uploaded:
        listed_files = ["**Files**", ""]
        for job in uploaded:
            listing = job.files[:MAX_FILES_LISTED]
            more = len(job.files) - len(listing)
            rest = f", and {more} more on the session page" if more else ""
            listed = ", ".join(file.line() for file in listing)
            listed_files.append(f"- {code(shown_name(job.task_id))}: {listed}{rest}")
        blocks.append(("\n".join(listed_files), False))
    suspects = [job for job in jobs if job.suspect and job.state in (JobState.FAILED, JobState.RETRIED)]
    if suspects:
        suspect_lines = ["**Suspect devices**", ""]
        suspect_lines += [
            f"- {code(shown_name(job.task_id))}: {cell(job.suspect)}: the device may be at fault, "
            "not the code"
            for job in suspects
        ]
        blocks.append(("\n".join(suspect_lines), False))
    for job in jobs:
        if job.output_tail:
            tail = "\n".join(_tail_line(line) for line in job.output_tail.splitlines()[-TAIL_LINES:]).replace(
                "```", "'''"
            )
            # Shown on the folded line too: what the job printed past the cap is not in the tail.
            cut = cut_of(job.output_tail)
            running = job.state == JobState.RUNNING
            folded = [
                # A running job's lines so far are what a reader comes for: shown unfolded.
                f"<details{' open' if running else ''}><summary>{cell(shown_name(job.task_id))}"
                f"{f' (attempt {job.attempt})' if job.attempt > 1 or not job.current else ''}"
                f"{': latest lines of output, while it runs' if running else ': last lines of output'}"
                f"{f' ({cell(cut)})' if cut else ''}</summary>",
                "",
                "```",
                tail,
                "```",
                "",
                "</details>",
            ]
            blocks.append(("\n".join(folded), True))
    blocks += [(_console_block(job), True) for job in jobs if job.console_tail and job.state in CONSOLE_SHOWN]
    return [(text, output) for text, output in blocks if text]


# A terminal's control sequences (colours, cursor moves) and the other control characters a board prints:
# left out of the lines shown, which are text, not a terminal.
_TERMINAL_CONTROL: Final = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def _console_block(job: JobProgress) -> str:
    """The last lines of a failed job's console, in a fence no line can close; open when the board itself
    failed the job (it did not power on or boot, or its console went away): they are why."""
    lines = [_TERMINAL_CONTROL.sub("", line) for line in job.console_tail.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    board = job.reason in BOARD_FAULTS
    return "\n".join(
        [
            f"<details{' open' if board else ''}><summary>{cell(shown_name(job.task_id))}"
            f"{f' (attempt {job.attempt})' if job.attempt > 1 or not job.current else ''}"
            ": last lines of its board's console</summary>",
            "",
            fenced("\n".join(_tail_line(line) for line in lines[-TAIL_LINES:])),
            "",
            "</details>",
        ]
    )


# What a job's state is called in a title, in the order a title names them: what went wrong first.
_ENDED_WORDS: Final = (
    ((JobState.FAILED,), "failed"),
    ((JobState.TIMED_OUT,), "timed out"),
    ((JobState.REFUSED_BEFORE_START,), "did not start"),
    ((JobState.CANCELLED,), "cancelled"),
    ((JobState.SKIPPED,), "skipped"),
)
_PASSED: Final = ((JobState.SUCCEEDED,), "passed")
_GOING_WORDS: Final = (
    ((JobState.RUNNING,), "running"),
    ((JobState.LEASED, JobState.ACCEPTED), "starting"),
    ((JobState.QUEUED,), "queued"),
    ((JobState.WAITING,), "waiting"),
)


def _counted(jobs: Sequence[JobProgress], words: Iterable[tuple[tuple[JobState, ...], str]]) -> str:
    """``1 of 4 jobs failed, 1 timed out``: the first state with jobs leads, counted of them all; the
    others follow with their counts. ``All 3 jobs passed``, ``1 job running``; empty when none is in any."""
    counts = [
        (count, word) for states, word in words if (count := sum(1 for job in jobs if job.state in states))
    ]
    if not counts:
        return ""
    (first, word), rest = counts[0], counts[1:]
    if len(jobs) == 1:
        lead = f"1 job {word}"
    elif first == len(jobs):
        lead = f"Both jobs {word}" if first == 2 else f"All {first} jobs {word}"
    else:
        lead = f"{first} of {len(jobs)} jobs {word}"
    return ", ".join([lead, *(f"{count} {word}" for count, word in rest)])


def progress_title(
    current: Sequence[JobProgress],
    state: SessionState,
    conclusion: Conclusion | None,
    cancel_reason: str | None = None,
) -> str:
    """What happened, in plain words: ``1 of 4 jobs failed``, ``All 3 jobs passed``, ``2 of 4 jobs running,
    1 passed, 1 queued``, ``Cancelled by hubot: 2 of 3 jobs cancelled``. A completed session's title names
    the jobs that did not pass (the rest did); passed ones lead only when every job passed."""
    if not current:
        jobs = "no job ran" if state is SessionState.COMPLETED else "no job yet"
    elif state is SessionState.COMPLETED:
        jobs = _counted(current, _ENDED_WORDS) or _counted(current, (_PASSED, *_GOING_WORDS))
    elif state is SessionState.QUEUED and all(job.state == JobState.QUEUED for job in current):
        waits = "1 job waits for a device" if len(current) == 1 else f"{len(current)} jobs wait for devices"
        return f"Queued: {waits}"
    else:
        jobs = _counted(current, (*_GOING_WORDS[:2], *_ENDED_WORDS, _PASSED, *_GOING_WORDS[2:]))
    if cancel_reason and state is not SessionState.COMPLETED:
        return f"{cancel_line(cancel_reason)}, stopping: {jobs}"
    if cancel_reason and conclusion is Conclusion.CANCELLED:
        return f"{cancel_line(cancel_reason)}: {jobs}"
    if state is SessionState.COMPLETED and conclusion in LAB_CONCLUSIONS:
        reasons = sorted({job.reason for job in _not_passed(current) if job.reason})
        return f"{LAB_TITLE}: {jobs}" + (f" ({', '.join(reasons)})" if reasons else "")
    return jobs[:1].upper() + jobs[1:]


def _not_passed(jobs: Sequence[JobProgress]) -> list[JobProgress]:
    """The jobs that decided a session did not pass: ended, but neither passed nor skipped."""
    return [job for job in jobs if job.state not in (JobState.SUCCEEDED, JobState.SKIPPED)]


def _ran_on(job: JobProgress) -> str:
    """Where an attempt ran: its device (a gang's first role's), or its runner host without a board."""
    return (job.host if job.boardless else job.device_id) or "no device"


def lab_section(jobs: Sequence[JobProgress], conclusion: Conclusion) -> list[str]:
    """Why a session the lab failed did not pass (DESIGN.md, "A lab problem is not a code failure"): each
    job that did not, with its reason in words and what it waited on or failed on in the diagnostics'
    words, each attempt of a retried task on its board; and what the conclusion does on GitHub."""
    lines = [
        "",
        "**Lab problem**: no job failed because of this commit's code; what kept this check from passing "
        "is the lab's:",
        "",
    ]
    failed = _not_passed([job for job in jobs if job.current])
    for job in failed[:MAX_LAB_JOBS]:
        said = reason_words(job.reason) if job.reason else job.state
        if job.detail:
            said += f": {job.detail}"
        tries = [other for other in jobs if other.task_id == job.task_id]
        if len(tries) > 1:
            said += "; " + ", ".join(
                f"attempt {other.attempt} on {_ran_on(other)}"
                for other in sorted(tries, key=lambda other: other.attempt)
            )
        lines.append(f"- {code(shown_name(job.task_id))}: {cell(said)}")
    if len(failed) > MAX_LAB_JOBS:
        lines.append(f"- and {len(failed) - MAX_LAB_JOBS} more jobs: the table below has each")
    return [*lines, "", _LAB_EFFECT[conclusion]]


def progress_body(
    name: str,
    context: SessionContext,
    jobs: Sequence[JobProgress],
    state: SessionState,
    conclusion: Conclusion | None,
    *,
    cancel_reason: str | None = None,
    holds: Sequence[str] = (),
) -> CheckRunBody:
    """The check run while and after the jobs run: each job's device, host, duration, result and output;
    each attempt of a task that was retried; who cancelled it, or which commit superseded it; for a session
    the lab failed, why (:func:`lab_section`); who holds which failed job's board (``holds``, with the
    last refusal of a *Hold board*), and the *Hold board* action when a job failed on a board.

    The status and conclusion are the session's, as the store derived them (``kerrigan.core.lifecycle``);
    counts are of the current attempts (one a retry replaced does not count).
    """
    current = [job for job in jobs if job.current]
    lines = [header(name, context)]
    if cancel_reason:
        lines += ["", f"{cell(cancel_line(cancel_reason))}."]
    if state is SessionState.COMPLETED and conclusion in LAB_CONCLUSIONS:
        lines += lab_section(jobs, conclusion)
    if holds:
        lines += ["", "**Held boards**:", "", *(f"- {line}" for line in holds)]
    lines += ["", "| task | state | device | runner host | duration | exit |", "|---|---|---|---|---|---|"]
    rows = []
    for job in jobs:
        duration = f"{job.seconds:.0f} s" if job.seconds is not None else ""
        why = f"{job.reason}: {job.detail}" if job.reason and job.detail else job.reason
        if job.state in (job.reason, JobState.WAITING):  # its detail says why: needs build (failed)
            why = job.detail
        shown = job.state + (f" ({why})" if why else "")
        if job.attempt > 1 or not job.current:
            shown += f", {job.attempt_text()}"
        rows.append(
            f"| {code(shown_name(job.task_id))} | {cell(shown)} | "
            f"{job.devices_cell()} | "
            f"{code(job.host) if job.host else ''} | {duration} | "
            f"{job.exit_status if job.exit_status is not None else ''} |"
        )
    summary = fit_summary(lines, rows, _blocks(jobs, context))
    body = compose_body(
        name,
        context,
        status=state.value,
        title=progress_title(current, state, conclusion, cancel_reason),
        summary=summary,
        conclusion=(conclusion or Conclusion.FAILURE).value if state is SessionState.COMPLETED else None,
        holdable=any(job.state in HELD_STATES and not job.boardless and job.device_id for job in jobs),
    )
    if state is not SessionState.COMPLETED:
        return body
    # With the update that completes it only: the updates before it would each add them again.
    return CheckRunBody(body.fields, body.more_annotations, tuple(results_annotations(jobs)))


def short_body(
    name: str,
    context: SessionContext,
    state: SessionState,
    conclusion: Conclusion | None,
    refusal: str,
    *,
    cancel_reason: str | None = None,
) -> CheckRunBody:
    """What GitHub is sent when it refuses the full body: the status and conclusion (and who cancelled it),
    and a line pointing to the session page, so the check run still ends right."""
    summary = (
        header(name, context) + f"\nGitHub refused the full report of this session ({cell(refusal)[:300]}); "
        f"the [session page]({context.details_url}) has all of it.\n"
    )
    done = state is SessionState.COMPLETED
    verdict = _VERDICTS[conclusion or Conclusion.FAILURE] if done else _GOING[state]
    if cancel_reason and (not done or conclusion is Conclusion.CANCELLED):
        verdict = cancel_line(cancel_reason)
    return compose_body(
        name,
        context,
        status=state.value,
        title=f"{verdict} (short report: GitHub refused the full one)",
        summary=summary,
        conclusion=(conclusion or Conclusion.FAILURE).value if done else None,
    )
