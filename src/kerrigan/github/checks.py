"""Check-run bodies: pure functions from a session's resolution to what GitHub is sent.

GitHub's limits are kept here, where they can be tested without GitHub: a summary of at most 65,535 bytes
(cut at a table row, saying how many rows the session page has), at most 50 annotations a request (the
rest follow in updates), at most 3 actions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kerrigan.core.explain import Explanation, TaskExplanation
from kerrigan.core.inventory import Device
from kerrigan.core.lifecycle import (
    Conclusion,
    JobState,
    SessionState,
    describe_attempt,
    reason_words,
)
from kerrigan.core.manifest import ManifestResult
from kerrigan.core.matching import HostResolution, Outcome, TaskResolution
from kerrigan.core.matrix import shown_name
from kerrigan.core.results import ResultsSummary
from kerrigan.core.runner_fields import cut_of, size_text
from kerrigan.core.yamlsource import Problem
from kerrigan.github.check_results import results_annotations, results_sections

SUMMARY_LIMIT: Final = 65_535
ANNOTATIONS_PER_REQUEST: Final = 50
MAX_ACTIONS: Final = 3
NAME_PREFIX: Final = "kerrigan / "

RETRY_ACTION: Final = {
    "label": "Retry",
    "description": "Run this workflow again",
    "identifier": "retry",
}
CANCEL_ACTION: Final = {
    "label": "Cancel",
    "description": "Stop this session's jobs",
    "identifier": "cancel",
}


def check_run_name(workflow: str) -> str:
    """``kerrigan / <workflow name>``."""
    return f"{NAME_PREFIX}{workflow}"


def workflow_of(check_run_name: str) -> str | None:
    """The workflow a check run of ours is for, or ``None`` for someone else's check run."""
    return check_run_name.removeprefix(NAME_PREFIX) if check_run_name.startswith(NAME_PREFIX) else None


@dataclass(frozen=True, slots=True)
class CheckRunBody:
    """What to send GitHub for one check run: the fields, and annotations beyond the first 50.

    GitHub adds up the annotations of every request, so those in ``fields`` go with the create only;
    ``update_annotations`` (a completed check run's failed tests) go with the update that sends this body,
    or with the create when the check run is created with it.
    """

    fields: dict[str, Any]
    more_annotations: tuple[tuple[dict[str, Any], ...], ...] = ()
    update_annotations: tuple[dict[str, Any], ...] = ()

    def with_annotations(self, annotations: list[dict[str, Any]]) -> CheckRunBody:
        """This body carrying ``annotations`` as its own (the first 50 in ``output``, the rest after)."""
        first, more = _batched(annotations)
        output = {key: value for key, value in self.fields["output"].items() if key != "annotations"}
        if first:
            output["annotations"] = first
        return CheckRunBody({**self.fields, "output": output}, more)

    def unsent(self, shown: Mapping[str, Any]) -> CheckRunBody | None:
        """What is left to send of this completing body, GitHub showing the check run as ``shown``:
        ``None`` when GitHub has all of it, else the body with the update annotations it lacks.

        GitHub adds up annotations, so an update whose answer was lost is not sent again whole: when GitHub
        shows this body's status, conclusion, title and summary, the update was done, and its annotations
        beyond those the create sent (this body's own) are counted off the ones still to go.
        """
        output = self.fields["output"]
        seen = shown.get("output") or {}
        done = (
            shown.get("status") == "completed"
            and shown.get("conclusion") == self.conclusion
            and seen.get("title") == output["title"]
            and seen.get("summary") == output["summary"]
        )
        if not done:
            return self.with_annotations(list(self.update_annotations))
        created = len(output.get("annotations", ())) + sum(len(batch) for batch in self.more_annotations)
        count = seen.get("annotations_count")
        landed = min(max(count - created, 0), len(self.update_annotations)) if isinstance(count, int) else 0
        if landed == len(self.update_annotations):
            return None
        return self.with_annotations(list(self.update_annotations[landed:]))

    @property
    def conclusion(self) -> str | None:
        """The conclusion, when the body completes the check run."""
        value = self.fields.get("conclusion")
        return str(value) if value is not None else None

    def as_json(self) -> dict[str, Any]:
        """The body as the store keeps it (:func:`body_from_json` reads it back)."""
        return {
            "fields": self.fields,
            "more_annotations": [list(batch) for batch in self.more_annotations],
            "update_annotations": list(self.update_annotations),
        }


@dataclass(frozen=True, slots=True)
class SessionContext:
    """What the check run says about where the session comes from."""

    session_id: str
    details_url: str
    head_sha: str
    event: str
    ref: str | None = None
    queue_position: int | None = None
    approvers: str = "someone with write access to the repository"
    extra: dict[str, str] = field(default_factory=dict)


# -- Markdown pieces -------------------------------------------------------------------------------


def _code(text: str) -> str:
    quoted = text.replace("`", "'")
    return f"`{quoted}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _labels(requested: dict[str, list[str]]) -> str:
    return (
        ", ".join(
            _code(f"{key}={values[0]}") if len(values) == 1 else _code(f"{key} in [{', '.join(values)}]")
            for key, values in requested.items()
        )
        or "none"
    )


def _header(name: str, context: SessionContext) -> str:
    where = f" ({context.event}" + (f" to {_code(context.ref)}" if context.ref else "") + ")"
    return (
        f"**{_cell(name)}** at {_code(context.head_sha[:12])}{where}, "
        f"session [{_code(context.session_id[:8])}]({context.details_url})\n"
    )


MAX_HOSTS_SHOWN: Final = 10  # of a gang's runner hosts with a device for every role
MAX_REJECTED_HOSTS_SHOWN: Final = 50  # of a boardless task's rejected runner hosts; the page has them all
_OUTCOME_WORDS: Final = {
    Outcome.ELIGIBLE: "ready: waiting for dispatch",
    Outcome.WAITING: "waiting: matching devices are busy or offline",
    Outcome.UNSCHEDULABLE: "unschedulable: no device can ever match",
}
_HOST_OUTCOME_WORDS: Final = {
    Outcome.ELIGIBLE: "ready: waiting for dispatch (no board)",
    Outcome.WAITING: "waiting: matching runner hosts are offline or paused",
    Outcome.UNSCHEDULABLE: "unschedulable: no runner host can ever run it",
}


def _overview(tasks: Sequence[TaskExplanation]) -> str:
    lines = ["| task | outcome | devices available | selected |", "|---|---|---|---|"]
    for item in tasks:
        if item.hosts is not None:  # no device: the runner hosts it may run on
            available = f"{len(item.hosts.eligible)} of {item.hosts.total_hosts} runner hosts (no board)"
            selected = f"host {_code(item.selected_host)}" if item.selected_host else ""
        elif item.gang is not None:  # a role per line of the cell
            roles = item.gang.roles
            available = "<br>".join(
                f"{_code(r.role)}: {len(r.resolution.eligible)} of {r.resolution.total_devices}"
                for r in roles
            )
            selected = "<br>".join(f"{_code(r.role)}: {_code(r.selected.id)}" for r in roles if r.selected)
        else:
            res = item.resolution
            available = f"{len(res.eligible)} of {res.total_devices}"
            selected = _code(item.selected.id) if item.selected else ""
        lines.append(
            f"| {_code(item.task.id)} | {_outcome_words(item)} | {available} | {selected or 'none'} |"
        )
    return "\n".join(lines) + "\n"


def _outcome_words(item: TaskExplanation) -> str:
    if item.hosts is not None:
        return _HOST_OUTCOME_WORDS[item.outcome]
    never = item.gang.never if item.gang is not None else None
    return f"unschedulable: {never}" if never else _OUTCOME_WORDS[item.outcome]


def _hosts_section(item: TaskExplanation, hosts: HostResolution) -> str:
    """A task with ``board: none``: the runner hosts it may run on, and why each other may not."""
    requested = hosts.requested.as_dict()["labels"]
    assert isinstance(requested, dict)
    out = [
        f"### Task {_code(item.task.id)}: {_outcome_words(item)}",
        "",
        "No board: it holds no device and runs on a runner host, its vCPUs claimed there.",
        "",
        f"- **Requested runner hosts:** {_labels(requested) if requested else 'any'}",
    ]
    if item.selected_host:
        out.append(f"- **Selected:** runner host {_code(item.selected_host)}")
    out.append(f"- **{_cell(hosts.summary())}**")
    if hosts.histogram:
        out += ["", "| runner hosts | reason | |", "|---:|---|---|"]
        for row in hosts.histogram:
            out.append(f"| {row.count} | {_cell(row.rule)} | {'never' if row.permanent else 'not yet'} |")
    rejected = hosts.rejected
    if rejected:
        out += ["", "**Rejected runner hosts:**", ""]
        out += [
            f"- {_code(v.host)}: {_cell('; '.join(r.text for r in v.reasons))}"
            for v in rejected[:MAX_REJECTED_HOSTS_SHOWN]
        ]
        if len(rejected) > MAX_REJECTED_HOSTS_SHOWN:
            out.append(f"- and {len(rejected) - MAX_REJECTED_HOSTS_SHOWN} more on the session page")
    if hosts.hints:
        out += [
            "",
            *(f"> line {hint.line}, {_code(hint.field)}: {_cell(hint.message)}" for hint in hosts.hints),
        ]
    return "\n".join(out) + "\n"


def _task_section(item: TaskExplanation) -> str:
    if item.hosts is not None:
        return _hosts_section(item, item.hosts)
    if item.gang is None:
        title = f"### Task {_code(item.task.id)}: {_outcome_words(item)}"
        return "\n".join([title, "", *_resolution_lines(item.resolution, item.selected)]) + "\n"
    hosts = ", ".join(_code(host) for host in item.gang.hosts[:MAX_HOSTS_SHOWN]) or "none"
    if len(item.gang.hosts) > MAX_HOSTS_SHOWN:
        hosts += f" and {len(item.gang.hosts) - MAX_HOSTS_SHOWN} more"
    out = [
        f"### Task {_code(item.task.id)}: {_outcome_words(item)}",
        "",
        f"A gang: {len(item.gang.roles)} devices at once, all on one runner host.",
        "",
        f"- **Runner hosts with a device for every role:** {hosts}",
    ]
    if item.gang.never:
        out.append(f"- **{_cell(item.gang.never)}** (never)")
    for role in item.gang.roles:
        out += ["", f"#### Role {_code(role.role)}: {_OUTCOME_WORDS[role.resolution.outcome]}", ""]
        out += _resolution_lines(role.resolution, role.selected, role=role.role)
    return "\n".join(out) + "\n"


def _resolution_lines(res: TaskResolution, selected: Device | None, role: str | None = None) -> list[str]:
    requested = res.requested.as_dict()
    labels = requested["labels"]
    tags = requested["tags"]
    assert isinstance(labels, dict)
    assert isinstance(tags, list)
    with_devices, none_match = res.pools_by_eligibility
    pools = ", ".join(f"{_code(pool)} ({count} eligible)" for pool, count in with_devices) or "none"
    out = [
        f"- **Requested labels:** {_labels(labels)}",
        f"- **Requested tags:** {', '.join(_code(t) for t in tags) or 'none'}",
        f"- **Eligible pools:** {pools}",
    ]
    if none_match:
        out.append(f"- **No device matches in:** {', '.join(_code(pool) for pool in none_match)}")
    for verdict in res.rejected_pools:
        out.append(f"- **Rejected pool** {_code(verdict.pool)}: {'; '.join(r.text for r in verdict.reasons)}")
    if selected is not None:
        device = selected
        out.append(
            f"- **Selected:** {_code(device.id)} (pool {_code(device.pool_id)}, host {_code(device.host)}, "
            f"board {_code(device.board)})"
        )
    summary = f"role {role}: {res.summary()}" if role else res.summary()
    out.append(f"- **{_cell(summary)}**")
    if res.histogram:
        out += ["", "| devices | reason | |", "|---:|---|---|"]
        for row in res.histogram:
            when = "never" if row.permanent else "not yet"
            out.append(f"| {row.count} | {_cell(row.rule)} | {when} |")
    if res.nearest_misses:
        out += ["", "**Nearest misses** (the devices closest to matching):", ""]
        out += [
            f"- {_code(v.id)} ({_code(v.device.pool_id)}): {_cell('; '.join(r.text for r in v.reasons))}"
            for v in res.nearest_misses
        ]
    if res.hints:
        out += [
            "",
            *(f"> line {hint.line}, {_code(hint.field)}: {_cell(hint.message)}" for hint in res.hints),
        ]
    return out


def _rejected_rows(item: TaskExplanation) -> list[str]:
    return [
        f"| {_code(v.id)} | {_code(v.device.pool_id)} | "
        f"{_cell((f'role {role}: ' if role else '') + '; '.join(r.text for r in v.reasons))} |"
        for role, res in item.resolutions()
        for v in res.rejected
    ]


_TABLE_HEAD: Final = (
    "\n<details><summary>Rejected devices ({count})</summary>\n\n"
    "| device | pool | every reason |\n|---|---|---|\n"
)
_TABLE_TAIL: Final = "</details>\n"


def _size(text: str) -> int:
    return len(text.encode())


def render_summary(
    name: str, context: SessionContext, tasks: Sequence[TaskExplanation], limit: int = SUMMARY_LIMIT
) -> str:
    """The summary Markdown, within ``limit`` bytes: rows of the rejected-device tables are dropped from
    the end, whole, when they do not fit, with a line saying how many are on the session page."""
    fixed = [_header(name, context), "\n", _overview(tasks)]
    sections = [_task_section(item) for item in tasks]
    tables = [_rejected_rows(item) for item in tasks]
    heads = [_TABLE_HEAD.format(count=len(rows)) for rows in tables]
    cut_note = "\n_{missing} more rows on the [session page]({url})._\n"
    reserve = _size(cut_note.format(missing=10**9, url=context.details_url))
    budget = limit - sum(_size(part) for part in fixed) - reserve
    budget -= sum(_size("\n" + section) for section in sections)
    budget -= sum(_size(head) + _size(_TABLE_TAIL) for head, rows in zip(heads, tables, strict=True) if rows)
    if budget < 0:  # even the fixed parts do not fit: keep what does, cut at a line
        text = "".join(fixed) + "".join("\n" + section for section in sections)
        return _cut_lines(text, limit - reserve) + cut_note.format(missing="All", url=context.details_url)
    out = list(fixed)
    dropped = 0
    for section, head, rows in zip(sections, heads, tables, strict=True):
        out.append("\n" + section)
        if not rows:
            continue
        kept: list[str] = []
        for row in rows:
            size = _size(row) + 1
            if size > budget:
                dropped += len(rows) - len(kept)
                break
            budget -= size
            kept.append(row)
        out.append(head + "".join(row + "\n" for row in kept) + _TABLE_TAIL)
    if dropped:
        out.append(cut_note.format(missing=dropped, url=context.details_url))
    return "".join(out)


def _cut_lines(text: str, limit: int) -> str:
    kept: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        if used + _size(line) > limit:
            break
        kept.append(line)
        used += _size(line)
    return "".join(kept)


# -- annotations -----------------------------------------------------------------------------------


def _annotation(problem: Problem, level: str, title: str) -> dict[str, Any]:
    return {
        "path": problem.file,
        "start_line": problem.line,
        "end_line": problem.line,
        "annotation_level": level,
        "title": title,
        "message": (f"{problem.field}: " if problem.field else "") + problem.message,
    }


def manifest_annotations(manifest: ManifestResult) -> list[dict[str, Any]]:
    """Errors as ``failure`` and warnings (deprecations, a fork's ``priority: gate``) as ``warning``
    annotations on the manifest's lines."""
    return [_annotation(p, "failure", "Manifest error") for p in manifest.errors] + [
        _annotation(p, "warning", "Manifest warning") for p in manifest.warnings
    ]


def hint_annotations(file: str, tasks: Iterable[TaskExplanation]) -> list[dict[str, Any]]:
    """Did-you-mean hints as ``notice`` annotations on the lines of the requested keys and tags."""
    return [
        {
            "path": file,
            "start_line": hint.line,
            "end_line": hint.line,
            "annotation_level": "notice",
            "title": f"Task {item.task.id}: nothing has this",
            "message": f"{hint.field}: {hint.message}",
        }
        for item in tasks
        for hints in (
            [res.hints for _, res in item.resolutions()] + ([item.hosts.hints] if item.hosts else [])
        )
        for hint in hints
    ]


def _batched(
    annotations: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], tuple[tuple[dict[str, Any], ...], ...]]:
    first = annotations[:ANNOTATIONS_PER_REQUEST]
    rest = annotations[ANNOTATIONS_PER_REQUEST:]
    more = tuple(
        tuple(rest[start : start + ANNOTATIONS_PER_REQUEST])
        for start in range(0, len(rest), ANNOTATIONS_PER_REQUEST)
    )
    return first, more


# -- whole bodies ----------------------------------------------------------------------------------


def _body(
    name: str,
    context: SessionContext,
    *,
    status: str,
    title: str,
    summary: str,
    conclusion: str | None = None,
    annotations: list[dict[str, Any]] | None = None,
) -> CheckRunBody:
    first, more = _batched(annotations or [])
    output: dict[str, Any] = {"title": title[:255], "summary": summary}
    if first:
        output["annotations"] = first
    fields: dict[str, Any] = {
        "name": check_run_name(name),
        "head_sha": context.head_sha,
        "status": status,
        "details_url": context.details_url,
        "external_id": context.session_id,
        "output": output,
    }
    if conclusion is not None:
        fields["conclusion"] = conclusion
        fields["actions"] = [RETRY_ACTION]
    else:
        fields["actions"] = [CANCEL_ACTION]  # queued or in progress: it can still be stopped
    return CheckRunBody(fields, more)


def invalid_manifest_body(manifest: ManifestResult, context: SessionContext) -> CheckRunBody:
    """A manifest with errors: ``completed`` / ``failure``, every error listed and annotated."""
    name = manifest.name or manifest.file
    count = len(manifest.errors)
    lines = [
        _header(name, context),
        f"\nThe manifest {_code(manifest.file)} has {count} error{'s' if count != 1 else ''}; nothing was "
        "scheduled. Fix them and push again.\n",
        *(
            f"- line {p.line}: {_cell(str(p.field) + ': ' if p.field else '')}{_cell(p.message)}"
            for p in manifest.errors
        ),
    ]
    if manifest.warnings:
        lines += ["", "Deprecations:", *(f"- line {p.line}: {_cell(p.message)}" for p in manifest.warnings)]
    summary = _cut_lines("\n".join(lines) + "\n", SUMMARY_LIMIT)
    return _body(
        name,
        context,
        status="completed",
        conclusion="failure",
        title=f"Manifest has {count} error{'s' if count != 1 else ''}",
        summary=summary,
        annotations=manifest_annotations(manifest),
    )


def awaiting_approval_body(name: str, context: SessionContext) -> CheckRunBody:
    """A fork's pull request: nothing runs on lab hardware until someone approves."""
    command = f"/kerrigan approve {context.head_sha}"
    summary = (
        _header(name, context)
        + "\nThis pull request comes from a fork, so its code does not run on lab hardware by itself. "
        f"It waits until {context.approvers} has read this commit and comments `{command}` on the pull "
        f"request (`{command} secrets` also gives its jobs the repository secrets they name; without it "
        "they get none). An approval names the commit it covers: a later push needs one of its own.\n"
    )
    return _body(
        name, context, status="queued", title="Waiting for approval to run on lab hardware", summary=summary
    )


def resolution_body(explanation: Explanation, context: SessionContext) -> CheckRunBody:
    """The resolution of a valid manifest: failed at once if a task can never be scheduled, else queued."""
    manifest = explanation.manifest
    name = manifest.name or manifest.file
    tasks = explanation.tasks
    summary = render_summary(name, context, tasks)
    annotations = manifest_annotations(manifest) + hint_annotations(manifest.file, tasks)
    never = [item.task.id for item in tasks if item.outcome is Outcome.UNSCHEDULABLE]
    if never:
        split = {item.task.id for item in tasks if item.gang is not None and item.gang.never}
        boardless = {item.task.id for item in tasks if item.hosts is not None}
        what = (
            "No runner host holds a device for every role of"
            if split.issuperset(never)
            else "No runner host can ever run"
            if boardless.issuperset(never)
            else "No device can ever run"
        )
        title = f"{what} {', '.join(never[:3])}" + (", ..." if len(never) > 3 else "")
        return _body(
            name,
            context,
            status="completed",
            conclusion="failure",
            title=title,
            summary=summary,
            annotations=annotations,
        )
    waiting = sum(1 for item in tasks if item.outcome is Outcome.WAITING)
    position = f", queue position {context.queue_position}" if context.queue_position else ""
    on_hosts = all(item.hosts is not None for item in tasks if item.outcome is Outcome.WAITING)
    what = "offline or paused runner hosts" if on_hosts else "busy or offline devices"
    if waiting == len(tasks) == 1:
        title = f"Queued: the task waits for {what}{position}"
    elif waiting:
        title = f"Queued: {waiting} of {len(tasks)} tasks wait for {what}{position}"
    else:
        ready = "1 task" if len(tasks) == 1 else f"{len(tasks)} tasks"
        title = f"Queued: {ready} ready to start on free devices{position}"
    return _body(name, context, status="queued", title=title, summary=summary, annotations=annotations)


def validate_actions(actions: Sequence[dict[str, Any]]) -> None:
    """GitHub's rules for actions, checked before sending (and by the stand-in on receipt)."""
    if len(actions) > MAX_ACTIONS:
        raise ValueError(f"at most {MAX_ACTIONS} actions, not {len(actions)}")
    for action in actions:
        if len(action["label"]) > 20 or len(action["description"]) > 40 or len(action["identifier"]) > 20:
            raise ValueError(f"action {action['identifier']!r} breaks GitHub's length limits")


# -- progress of a session's jobs ------------------------------------------------------------------


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
            return f"{_code(self.path)}: {_cell(self.note)}"
        # The path is the job's to choose: shown as code, never as a link's text (``](`` in it stays text).
        return f"{_code(self.path)} ([{size_text(self.size or 0)}]({self.url}))"


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

    def devices_cell(self) -> str:
        """Its device, or each role's: ``dut `modalix-old-02`<br>peer `davinci-old-01```; ``no board``."""
        if self.boardless:
            return "no board"
        if self.roles:
            return "<br>".join(f"{_cell(role)} {_code(device)}" for role, device in self.roles)
        return _code(self.device_id) if self.device_id else ""

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
            lines.append(f"- {_code(shown_name(job.task_id))}: {_cell(job.attempt_text())}: {job.state}{why}")
    return ["", "**Attempts**", "", *lines] if lines else []


def _reasons(jobs: Sequence[JobProgress]) -> list[str]:
    """The reasons the table names (``runner_lost``) in words, each once; not one its state says already
    (a job ``timed_out`` for ``timed_out``)."""
    named = {job.reason for job in jobs if job.reason and job.reason != job.state}
    lines = [
        f"- `{reason}`: {_cell(reason_words(reason))}"
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
    used = _size(parts[0])
    # The sections that are not output (attempts, reasons, results, files) keep their room, up to half:
    # a table of hundreds of jobs does not crowd out what explains them.
    sections = sum(_size(text) + 2 for text, output in blocks if not output)
    table_budget = budget - min(sections, budget // 2)
    kept = 0
    for row in rows:
        if used + _size(row) + 1 > table_budget:
            break
        parts.append(row + "\n")
        used += _size(row) + 1
        kept += 1
    if kept < len(rows):
        note = f"\n{len(rows) - kept} more jobs on the session page.\n"
        parts.append(note)
        used += _size(note)
    outputs_left = sections_left = 0
    for text, output in blocks:
        piece = "\n" + text + "\n"
        if used + _size(piece) > budget:
            if output:
                outputs_left += 1
            else:
                sections_left += 1
            continue
        parts.append(piece)
        used += _size(piece)
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
    blocks: list[tuple[str, bool]] = [("\n".join(_attempts(jobs) + _reasons(jobs)).strip("\n"), False)]
    blocks += [(section.rstrip("\n"), False) for section in results_sections(jobs, context.details_url)]
    uploaded = [job for job in jobs if job.current and job.files]
    if uploaded:
        listed_files = ["**Files**", ""]
        for job in uploaded:
            listing = job.files[:MAX_FILES_LISTED]
            more = len(job.files) - len(listing)
            rest = f", and {more} more on the session page" if more else ""
            listed = ", ".join(file.line() for file in listing)
            listed_files.append(f"- {_code(shown_name(job.task_id))}: {listed}{rest}")
        blocks.append(("\n".join(listed_files), False))
    suspects = [job for job in jobs if job.suspect and job.state in (JobState.FAILED, JobState.RETRIED)]
    if suspects:
        suspect_lines = ["**Suspect devices**", ""]
        suspect_lines += [
            f"- {_code(shown_name(job.task_id))}: {_cell(job.suspect)}: the device may be at fault, "
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
                f"<details{' open' if running else ''}><summary>{_cell(shown_name(job.task_id))}"
                f"{f' (attempt {job.attempt})' if job.attempt > 1 or not job.current else ''}"
                f"{': latest lines of output, while it runs' if running else ': last lines of output'}"
                f"{f' ({_cell(cut)})' if cut else ''}</summary>",
                "",
                "```",
                tail,
                "```",
                "",
                "</details>",
            ]
            blocks.append(("\n".join(folded), True))
    return [(text, output) for text, output in blocks if text]


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
    return jobs[:1].upper() + jobs[1:]


def progress_body(
    name: str,
    context: SessionContext,
    jobs: Sequence[JobProgress],
    state: SessionState,
    conclusion: Conclusion | None,
    *,
    cancel_reason: str | None = None,
) -> CheckRunBody:
    """The check run while and after the jobs run: each job's device, host, duration, result and output;
    each attempt of a task that was retried; who cancelled it, or which commit superseded it.

    The status and conclusion are the session's, as the store derived them (``kerrigan.core.lifecycle``);
    counts are of the current attempts (one a retry replaced does not count).
    """
    current = [job for job in jobs if job.current]
    lines = [_header(name, context)]
    if cancel_reason:
        lines += ["", f"{_cell(cancel_line(cancel_reason))}."]
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
            f"| {_code(shown_name(job.task_id))} | {_cell(shown)} | "
            f"{job.devices_cell()} | "
            f"{_code(job.host) if job.host else ''} | {duration} | "
            f"{job.exit_status if job.exit_status is not None else ''} |"
        )
    summary = fit_summary(lines, rows, _blocks(jobs, context))
    body = _body(
        name,
        context,
        status=state.value,
        title=progress_title(current, state, conclusion, cancel_reason),
        summary=summary,
        conclusion=(conclusion or Conclusion.FAILURE).value if state is SessionState.COMPLETED else None,
    )
    if state is not SessionState.COMPLETED:
        return body
    # With the update that completes it only: the updates before it would each add them again.
    return CheckRunBody(body.fields, body.more_annotations, tuple(results_annotations(jobs)))


def body_from_json(stored: Mapping[str, Any]) -> CheckRunBody:
    """A body kept in the store (:meth:`CheckRunBody.as_json`)."""
    more = tuple(tuple(batch) for batch in stored.get("more_annotations", ()))
    return CheckRunBody(dict(stored["fields"]), more, tuple(stored.get("update_annotations", ())))


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
        _header(name, context)
        + f"\nGitHub refused the full report of this session ({_cell(refusal)[:300]}); "
        f"the [session page]({context.details_url}) has all of it.\n"
    )
    done = state is SessionState.COMPLETED
    verdict = _VERDICTS[conclusion or Conclusion.FAILURE] if done else _GOING[state]
    if cancel_reason and (not done or conclusion is Conclusion.CANCELLED):
        verdict = cancel_line(cancel_reason)
    return _body(
        name,
        context,
        status=state.value,
        title=f"{verdict} (short report: GitHub refused the full one)",
        summary=summary,
        conclusion=(conclusion or Conclusion.FAILURE).value if done else None,
    )
