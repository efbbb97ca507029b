"""Test results a job writes as JUnit XML: read safely, summed up, and shown on the check run.

:mod:`~kerrigan.core.results.parse` reads one file's bytes into frozen records
(:mod:`~kerrigan.core.results.records`), refusing DTDs and entities, bounded in bytes, nesting, names,
tokens, tests and text kept, and so in memory;
:mod:`~kerrigan.core.results.locations` turns a path found in a result into one of the repository's or
refuses it, and :mod:`~kerrigan.core.results.summary` orders the tests of every file, renders the check
run's table within a byte budget and makes its annotations.
"""

from __future__ import annotations

from kerrigan.core.results.locations import Location, Locator
from kerrigan.core.results.parse import (
    UPLOAD_LIMITS,
    JUnitParser,
    ParseLimits,
    parse_junit,
    results_masker,
)
from kerrigan.core.results.records import CaseResult, Counts, JUnitReport, Outcome, ResultsProblem
from kerrigan.core.results.summary import (
    Annotation,
    ResultsSummary,
    failure_annotations,
    render_markdown,
    summarise,
)

__all__ = [
    "UPLOAD_LIMITS",
    "Annotation",
    "CaseResult",
    "Counts",
    "JUnitParser",
    "JUnitReport",
    "Location",
    "Locator",
    "Outcome",
    "ParseLimits",
    "ResultsProblem",
    "ResultsSummary",
    "failure_annotations",
    "parse_junit",
    "render_markdown",
    "results_masker",
    "summarise",
]
