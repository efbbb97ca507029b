"""A parsed results file as the store keeps it (JSON) and back, without loss.

The JSON is small keys on purpose: a report keeps up to tens of thousands of tests, and each key is
repeated once per test. ``report_from_json`` never raises on a document of another version: what it cannot
read is left out, so a stored report always renders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kerrigan.core.results.locations import Location
from kerrigan.core.results.records import CaseResult, Counts, JUnitReport, Outcome, ResultsProblem

VERSION: Final = 1
_OUTCOMES: Final = {outcome.value: outcome for outcome in Outcome}


def _case_json(case: CaseResult) -> dict[str, Any]:
    body: dict[str, Any] = {"n": case.name, "o": case.outcome.value}
    optional = {
        "c": case.classname,
        "s": case.suite,
        "t": case.time_s,
        "m": case.message,
        "k": case.kind,
        "d": case.details,
        "so": case.stdout,
        "se": case.stderr,
    }
    body |= {key: value for key, value in optional.items() if value}
    if case.location is not None:
        body["l"] = [case.location.path, case.location.line]
    return body


def report_json(report: JUnitReport) -> dict[str, Any]:
    """``report`` as JSON for the store."""
    counts = report.counts
    return {
        "v": VERSION,
        "file": report.file,
        "counts": [counts.passed, counts.failed, counts.errors, counts.skipped, counts.time_s],
        "problems": [[p.message, p.line, p.column] for p in report.problems],
        "cases": [_case_json(case) for case in report.cases],
    }


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _case(body: Mapping[str, Any], suites: dict[str, str]) -> CaseResult | None:
    outcome = _OUTCOMES.get(_text(body.get("o")))
    if outcome is None:
        return None
    suite = _text(body.get("s"))
    suite = suites.setdefault(suite, suite)  # one string for a suite's tests, as the parser had it
    where = body.get("l")
    location = None
    if isinstance(where, list) and len(where) == 2 and isinstance(where[0], str) and _whole(where[1]):
        location = Location(where[0], int(where[1]))
    return CaseResult(
        _text(body.get("n")),
        _text(body.get("c")),
        suite,
        outcome,
        _number(body.get("t")),
        _text(body.get("m")),
        _text(body.get("k")),
        _text(body.get("d")),
        _text(body.get("so")),
        _text(body.get("se")),
        location,
    )


def report_from_json(body: Mapping[str, Any], file: str = "") -> JUnitReport:
    """The report the store kept (``file`` names it when the document does not)."""
    name = _text(body.get("file")) or file
    raw = body.get("counts")
    numbers = raw if isinstance(raw, list) and len(raw) == 5 else [0, 0, 0, 0, 0.0]
    passed, failed, errors, skipped = (_whole(value) or 0 for value in numbers[:4])
    counts = Counts(passed, failed, errors, skipped, _number(numbers[4]) or 0.0)
    problems = tuple(
        ResultsProblem(name, _text(item[0]), _whole(item[1]), _whole(item[2]))
        for item in body.get("problems") or ()
        if isinstance(item, list) and len(item) == 3
    )
    suites: dict[str, str] = {}
    cases = tuple(
        case
        for item in body.get("cases") or ()
        if isinstance(item, dict) and (case := _case(item, suites)) is not None
    )
    return JUnitReport(name, cases, counts, problems)
