"""The check run before any job runs: a manifest's errors, a fork's wait for approval, and the resolution
(each task's outcome, the devices or runner hosts it may use and why the others may not), queued or failed
at once. The rejected-device tables are cut at whole rows to fit the summary, saying how many the session
page has."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kerrigan.core.explain import Explanation, TaskExplanation
from kerrigan.core.inventory import Device
from kerrigan.core.manifest import ManifestResult
from kerrigan.core.matching import HostResolution, Outcome, TaskResolution
from kerrigan.core.outcome_words import outcome_words
from kerrigan.github.checks.annotations import hint_annotations, manifest_annotations
from kerrigan.github.checks.body import CheckRunBody, SessionContext, compose_body
from kerrigan.github.checks.limits import SUMMARY_LIMIT, byte_size, cut_lines
from kerrigan.github.checks.markdown import cell, code, header, labels_text

MAX_HOSTS_SHOWN: Final = 10  # of a gang's runner hosts with a device for every role
MAX_REJECTED_HOSTS_SHOWN: Final = 50  # of a boardless task's rejected runner hosts; the page has them all


def _overview(tasks: Sequence[TaskExplanation]) -> str:
    lines = ["| task | outcome | devices available | selected |", "|---|---|---|---|"]
    for item in tasks:
        if item.hosts is not None:  # no device: the runner hosts it may run on
            available = f"{len(item.hosts.eligible)} of {item.hosts.total_hosts} runner hosts (no board)"
            selected = f"host {code(item.selected_host)}" if item.selected_host else ""
        elif item.gang is not None:  # a role per line of the cell
            roles = item.gang.roles
            available = "<br>".join(
                f"{code(r.role)}: {len(r.resolution.eligible)} of {r.resolution.total_devices}" for r in roles
            )
            selected = "<br>".join(f"{code(r.role)}: {code(r.selected.id)}" for r in roles if r.selected)
        else:
            res = item.resolution
            available = f"{len(res.eligible)} of {res.total_devices}"
            selected = code(item.selected.id) if item.selected else ""
        lines.append(
            f"| {code(item.task.id)} | {_outcome_words(item)} | {available} | {selected or 'none'} |"
        )
    return "\n".join(lines) + "\n"


def _outcome_words(item: TaskExplanation) -> str:
    never = item.gang.never if item.gang is not None else None
    return outcome_words(item.outcome, boardless=item.hosts is not None, never=never)


def _hosts_section(item: TaskExplanation, hosts: HostResolution) -> str:
    """A task with ``board: none``: the runner hosts it may run on, and why each other may not."""
    requested = hosts.requested.as_dict()["labels"]
    assert isinstance(requested, dict)
    out = [
        f"### Task {code(item.task.id)}: {_outcome_words(item)}",
        "",
        "No board: it holds no device and runs on a runner host, its vCPUs claimed there.",
        "",
        f"- **Requested runner hosts:** {labels_text(requested) if requested else 'any'}",
    ]
    if item.selected_host:
        out.append(f"- **Selected:** runner host {code(item.selected_host)}")
    out.append(f"- **{cell(hosts.summary())}**")
    if hosts.histogram:
        out += ["", "| runner hosts | reason | |", "|---:|---|---|"]
        for row in hosts.histogram:
            out.append(f"| {row.count} | {cell(row.rule)} | {'never' if row.permanent else 'not yet'} |")
    rejected = hosts.rejected
    if rejected:
        out += ["", "**Rejected runner hosts:**", ""]
        out += [
            f"- {code(v.host)}: {cell('; '.join(r.text for r in v.reasons))}"
            for v in rejected[:MAX_REJECTED_HOSTS_SHOWN]
        ]
        if len(rejected) > MAX_REJECTED_HOSTS_SHOWN:
            out.append(f"- and {len(rejected) - MAX_REJECTED_HOSTS_SHOWN} more on the session page")
    if hosts.hints:
        out += [
            "",
            *(f"> line {hint.line}, {code(hint.field)}: {cell(hint.message)}" for hint in hosts.hints),
        ]
    return "\n".join(out) + "\n"


def _task_section(item: TaskExplanation) -> str:
    if item.hosts is not None:
        return _hosts_section(item, item.hosts)
    if item.gang is None:
        title = f"### Task {code(item.task.id)}: {_outcome_words(item)}"
        return "\n".join([title, "", *_resolution_lines(item.resolution, item.selected)]) + "\n"
    hosts = ", ".join(code(host) for host in item.gang.hosts[:MAX_HOSTS_SHOWN]) or "none"
    if len(item.gang.hosts) > MAX_HOSTS_SHOWN:
        hosts += f" and {len(item.gang.hosts) - MAX_HOSTS_SHOWN} more"
    out = [
        f"### Task {code(item.task.id)}: {_outcome_words(item)}",
        "",
        f"A gang: {len(item.gang.roles)} devices at once, all on one runner host.",
        "",
        f"- **Runner hosts with a device for every role:** {hosts}",
    ]
    if item.gang.never:
        out.append(f"- **{cell(item.gang.never)}** (never)")
    for role in item.gang.roles:
        out += ["", f"#### Role {code(role.role)}: {outcome_words(role.resolution.outcome)}", ""]
        out += _resolution_lines(role.resolution, role.selected, role=role.role)
    return "\n".join(out) + "\n"


def _resolution_lines(res: TaskResolution, selected: Device | None, role: str | None = None) -> list[str]:
    requested = res.requested.as_dict()
    labels = requested["labels"]
    tags = requested["tags"]
    assert isinstance(labels, dict)
    assert isinstance(tags, list)
    with_devices, none_match = res.pools_by_eligibility
    pools = ", ".join(f"{code(pool)} ({count} eligible)" for pool, count in with_devices) or "none"
    out = [
        f"- **Requested labels:** {labels_text(labels)}",
        f"- **Requested tags:** {', '.join(code(t) for t in tags) or 'none'}",
        f"- **Eligible pools:** {pools}",
    ]
    if none_match:
        out.append(f"- **No device matches in:** {', '.join(code(pool) for pool in none_match)}")
    for verdict in res.rejected_pools:
        why = cell("; ".join(r.text for r in verdict.reasons))
        out.append(f"- **Rejected pool** {code(verdict.pool)}: {why}")
    if selected is not None:
        device = selected
        out.append(
            f"- **Selected:** {code(device.id)} (pool {code(device.pool_id)}, host {code(device.host)}, "
            f"board {code(device.board)})"
        )
    summary = f"role {role}: {res.summary()}" if role else res.summary()
    out.append(f"- **{cell(summary)}**")
    if res.histogram:
        out += ["", "| devices | reason | |", "|---:|---|---|"]
        for row in res.histogram:
            when = "never" if row.permanent else "not yet"
            out.append(f"| {row.count} | {cell(row.rule)} | {when} |")
    if res.nearest_misses:
        out += ["", "**Nearest misses** (the devices closest to matching):", ""]
        out += [
            f"- {code(v.id)} ({code(v.device.pool_id)}): {cell('; '.join(r.text for r in v.reasons))}"
            for v in res.nearest_misses
        ]
    if res.hints:
        out += [
            "",
            *(f"> line {hint.line}, {code(hint.field)}: {cell(hint.message)}" for hint in res.hints),
        ]
    return out


def _rejected_rows(item: TaskExplanation) -> list[str]:
    return [
        f"| {code(v.id)} | {code(v.device.pool_id)} | "
        f"{cell((f'role {role}: ' if role else '') + '; '.join(r.text for r in v.reasons))} |"
        for role, res in item.resolutions()
        for v in res.rejected
    ]


_TABLE_HEAD: Final = (
    "\n<details><summary>Rejected devices ({count})</summary>\n\n"
    "| device | pool | every reason |\n|---|---|---|\n"
)
_TABLE_TAIL: Final = "</details>\n"


def render_summary(
    name: str, context: SessionContext, tasks: Sequence[TaskExplanation], limit: int = SUMMARY_LIMIT
) -> str:
    """The summary Markdown, within ``limit`` bytes: rows of the rejected-device tables are dropped from
    the end, whole, when they do not fit, with a line saying how many are on the session page."""
    fixed = [header(name, context), "\n", _overview(tasks)]
    sections = [_task_section(item) for item in tasks]
    tables = [_rejected_rows(item) for item in tasks]
    heads = [_TABLE_HEAD.format(count=len(rows)) for rows in tables]
    cut_note = "\n_{missing} more rows on the [session page]({url})._\n"
    reserve = byte_size(cut_note.format(missing=10**9, url=context.details_url))
    budget = limit - sum(byte_size(part) for part in fixed) - reserve
    budget -= sum(byte_size("\n" + section) for section in sections)
    budget -= sum(
        byte_size(head) + byte_size(_TABLE_TAIL) for head, rows in zip(heads, tables, strict=True) if rows
    )
    if budget < 0:  # even the fixed parts do not fit: keep what does, cut at a line
        text = "".join(fixed) + "".join("\n" + section for section in sections)
        return cut_lines(text, limit - reserve) + cut_note.format(missing="All", url=context.details_url)
    out = list(fixed)
    dropped = 0
    for section, head, rows in zip(sections, heads, tables, strict=True):
        out.append("\n" + section)
        if not rows:
            continue
        kept: list[str] = []
        for row in rows:
            size = byte_size(row) + 1
            if size > budget:
                dropped += len(rows) - len(kept)
                break
            budget -= size
            kept.append(row)
        out.append(head + "".join(row + "\n" for row in kept) + _TABLE_TAIL)
    if dropped:
        out.append(cut_note.format(missing=dropped, url=context.details_url))
    return "".join(out)


def invalid_manifest_body(manifest: ManifestResult, context: SessionContext) -> CheckRunBody:
    """A manifest with errors: ``completed`` / ``failure``, every error listed and annotated."""
    name = manifest.name or manifest.file
    count = len(manifest.errors)
    lines = [
        header(name, context),
        f"\nThe manifest {code(manifest.file)} has {count} error{'s' if count != 1 else ''}; nothing was "
        "scheduled. Fix them and push again.\n",
        *(
            f"- line {p.line}: {cell(str(p.field) + ': ' if p.field else '')}{cell(p.message)}"
            for p in manifest.errors
        ),
    ]
    if manifest.warnings:
        lines += ["", "Deprecations:", *(f"- line {p.line}: {cell(p.message)}" for p in manifest.warnings)]
    summary = cut_lines("\n".join(lines) + "\n", SUMMARY_LIMIT)
    return compose_body(
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
        header(name, context)
        + "\nThis pull request comes from a fork, so its code does not run on lab hardware by itself. "
        f"It waits until {context.approvers} has read this commit and comments `{command}` on the pull "
        f"request (`{command} secrets` also gives its jobs the repository secrets they name; without it "
        "they get none). An approval names the commit it covers: a later push needs one of its own.\n"
    )
    return compose_body(
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
        return compose_body(
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
    return compose_body(name, context, status="queued", title=title, summary=summary, annotations=annotations)
