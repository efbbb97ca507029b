"""The tests of a job's results files as the check run shows them: counts, a table, annotations.

:func:`summarise` puts every file's tests in one order (failures and errors first, then skipped, then
passed; file order within each), :func:`render_markdown` writes the table within a byte budget the caller
gives (whole rows are dropped from the end, and a line says how many tests only the session page lists),
and :func:`failure_annotations` makes a ``failure`` annotation for each failure that names a repository
line, cut to GitHub's limits (title 255 characters, message and raw details 64 KB; 50 a request).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from kerrigan.core.results.records import CaseResult, Counts, JUnitReport, Outcome, ResultsProblem
from kerrigan.core.runner_fields import fitting

KIB: Final = 1 << 10
ANNOTATIONS_PER_REQUEST: Final = 50
TITLE_LIMIT: Final = 255  # characters
# GitHub documents "64 KB" for a message and for raw details; its smallest reading, in bytes of UTF-8.
MESSAGE_LIMIT: Final = 64_000
MAX_PROBLEM_LINES: Final = 10
_MESSAGE_LINES: Final = 3  # of a failure's message, in its table cell
_CELL_CHARS: Final = 300
_NAME_CHARS: Final = 200
_ORDER: Final = (Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED, Outcome.PASSED)
_RESULT_CELL: Final = {
    Outcome.FAILED: "**failed**",
    Outcome.ERROR: "**error**",
    Outcome.SKIPPED: "skipped",
    Outcome.PASSED: "passed",
}
_TABLE_HEAD: Final = "| result | test | time | message |\n|---|---|---|---|\n"


@dataclass(frozen=True, slots=True)
class ResultsSummary:
    """Every results file of a job together: counts, problems, and the tests in the order shown."""

    counts: Counts
    files: tuple[str, ...]
    problems: tuple[ResultsProblem, ...]
    cases: tuple[CaseResult, ...]

    @property
    def unlisted(self) -> int:
        """Tests counted but not kept (past a file's limits, or past what a page lists)."""
        return self.counts.total - len(self.cases)


def summarise(reports: Iterable[JUnitReport]) -> ResultsSummary:
    """The reports of one job's results files, failures and errors first, then skipped, then passed."""
    reports = list(reports)
    buckets: dict[Outcome, list[CaseResult]] = {outcome: [] for outcome in _ORDER}
    counts = Counts()
    for report in reports:
        counts += report.counts
        for case in report.cases:
            buckets[case.outcome].append(case)
    return ResultsSummary(
        counts,
        tuple(report.file for report in reports),
        tuple(problem for report in reports for problem in report.problems),
        tuple(case for outcome in _ORDER for case in buckets[outcome]),
    )


def listed_first(reports: Sequence[JUnitReport], limit: int, chars: int | None = None) -> list[JUnitReport]:
    """``reports`` keeping only the tests :func:`summarise` would put first: at most ``limit``, and as many
    as fit in ``chars`` characters of names and text (each report keeps its counts and problems). What is
    kept is a beginning of that order, so cutting a job's files one at a time as they are read, then all
    of them, keeps the same tests as cutting all of them at once."""
    room = chars if chars is not None else -1
    kept: list[list[bool]] = [[False] * len(report.cases) for report in reports]
    count = 0
    for outcome in _ORDER:
        for marks, report in zip(kept, reports, strict=True):
            for index, case in enumerate(report.cases):
                if case.outcome is not outcome:
                    continue
                size = case.text_chars
                if count >= limit or (chars is not None and size > room):
                    return _keeping(reports, kept)
                marks[index] = True
                count += 1
                room -= size
    return _keeping(reports, kept)


def _keeping(reports: Sequence[JUnitReport], kept: Sequence[Sequence[bool]]) -> list[JUnitReport]:
    found = []
    for report, marks in zip(reports, kept, strict=True):
        cases = tuple(case for case, keep in zip(report.cases, marks, strict=True) if keep)
        found.append(report if len(cases) == len(report.cases) else replace(report, cases=cases))
    return found


def headline(counts: Counts) -> str:
    """``2 failed, 1 error, 5 skipped, 992 passed``, the failures in bold; ``no tests`` when none ran."""
    if not counts.total:
        return "no tests"
    bad = [f"{counts.failed:,} failed"] if counts.failed else []
    bad += [f"{counts.errors:,} error{'s' * (counts.errors != 1)}"] if counts.errors else []
    rest = [f"{counts.skipped:,} skipped"] if counts.skipped else []
    rest.append(f"{counts.passed:,} passed")
    return ", ".join(([f"**{', '.join(bad)}**"] if bad else []) + rest)


def duration(seconds: float | None) -> str:
    """``0.012 s``, ``12.3 s``; empty when the result gave no time."""
    if seconds is None:
        return ""
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:,.1f} s"


def _code(text: str) -> str:
    # In a table even a code span needs its pipes escaped; GitHub shows entities there as written.
    text = text[:_NAME_CHARS].replace("`", "'").replace("|", "\\|").replace("\n", " ")
    return f"`{text}`"


def _cell(text: str) -> str:
    """Text for a table cell: its first lines, joined by ``<br>``, with what Markdown or HTML would read
    (``|``, ``<``, ``>``, ``&``) escaped."""
    lines = [line.strip() for line in text.splitlines() if line.strip()][:_MESSAGE_LINES]
    text = "\n".join(lines)
    if len(text) > _CELL_CHARS:
        text = text[: _CELL_CHARS - 1] + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return text.replace("\n", "<br>")


def _row(case: CaseResult) -> str:
    message = case.message if case.outcome is not Outcome.PASSED else ""
    return (
        f"| {_RESULT_CELL[case.outcome]} | {_code(case.full_name)} | {duration(case.time_s)} | "
        f"{_cell(message)} |\n"
    )


def _size(text: str) -> int:
    return len(text.encode())


def render_markdown(
    summary: ResultsSummary,
    budget: int,
    *,
    details_url: str = "",
    max_rows: int = 100,
    heading: str = "### Test results",
) -> str:
    """The check run's test section, whole lines within ``budget`` bytes of UTF-8 (empty if even the
    counts do not fit): the counts, the files' problems, then at most ``max_rows`` tests in the summary's
    order and a line saying how many more the session page lists."""
    counts = summary.counts
    files = len(summary.files)
    overview = (
        f"{headline(counts)}: {counts.total:,} test{'s' * (counts.total != 1)} "
        f"in {files:,} file{'s' * (files != 1)}"
    )
    if counts.time_s:
        overview += f", {duration(counts.time_s)}"
    lines = [f"{heading}\n", "\n", f"{overview}\n"]
    problems = [f"- {_cell(str(problem))}\n" for problem in summary.problems[:MAX_PROBLEM_LINES]]
    if len(summary.problems) > MAX_PROBLEM_LINES:
        problems.append(f"- and {len(summary.problems) - MAX_PROBLEM_LINES:,} more problems\n")
    if problems:
        lines += ["\n", *problems]
    place = f"the [session page]({details_url})" if details_url else "the session page"
    note = "\n_and {more:,} more tests on " + place + "._\n"
    room = budget - _size(note.format(more=counts.total))
    kept: list[str] = []
    for line in lines:
        if _size(line) > room:
            break
        kept.append(line)
        room -= _size(line)
    if len(kept) < 3:  # not even the counts fit
        return ""
    rows: list[str] = []
    room -= _size("\n" + _TABLE_HEAD)
    for case in summary.cases[:max_rows]:
        row = _row(case)
        if _size(row) > room:
            break
        rows.append(row)
        room -= _size(row)
    table = "\n" + _TABLE_HEAD + "".join(rows) if rows else ""
    more = counts.total - len(rows)
    return "".join(kept) + table + (note.format(more=more) if more and counts.total else "")


@dataclass(frozen=True, slots=True)
class Annotation:
    """A check-run annotation on the line a test failed at."""

    path: str
    start_line: int
    title: str
    message: str
    raw_details: str = ""
    annotation_level: str = "failure"

    def as_json(self) -> dict[str, str | int]:
        """The annotation as GitHub's check-run API takes it."""
        body: dict[str, str | int] = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.start_line,
            "annotation_level": self.annotation_level,
            "title": self.title,
            "message": self.message,
        }
        if self.raw_details:
            body["raw_details"] = self.raw_details
        return body


def failure_annotations(
    summary: ResultsSummary,
    *,
    limit: int = ANNOTATIONS_PER_REQUEST,
    message_bytes: int = 4 * KIB,
    details_bytes: int = 16 * KIB,
) -> tuple[Annotation, ...]:
    """An annotation for each of the first ``limit`` failures and errors that name a repository line:
    the title is the test's name, the message its failure message, the raw details its text."""
    message_bytes, details_bytes = min(message_bytes, MESSAGE_LIMIT), min(details_bytes, MESSAGE_LIMIT)
    found: list[Annotation] = []
    for case in summary.cases:
        if len(found) >= limit or case.outcome not in (Outcome.FAILED, Outcome.ERROR):
            break  # the failures and errors come first: past them there is nothing to annotate
        if case.location is None:
            continue
        message = case.message or f"{case.outcome}"
        found.append(
            Annotation(
                case.location.path,
                case.location.line,
                case.full_name[:TITLE_LIMIT],
                fitting(message, message_bytes),
                fitting(case.details, details_bytes),
            )
        )
    return tuple(found)
