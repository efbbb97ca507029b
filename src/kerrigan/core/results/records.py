"""What a results file is read into: each test kept (where it is, how it ended, why), every test counted, and
the file's problems; frozen, so a report can be kept, summed up and stored as it is."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kerrigan.core.results.locations import Location


class Outcome(enum.StrEnum):
    """How a test ended."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Counts:
    """Tests by outcome, and the seconds they took (of those that said)."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    time_s: float = 0.0

    @property
    def total(self) -> int:
        """Every test counted."""
        return self.passed + self.failed + self.errors + self.skipped

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.passed + other.passed,
            self.failed + other.failed,
            self.errors + other.errors,
            self.skipped + other.skipped,
            self.time_s + other.time_s,
        )


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One test: where it is, how it ended, and for one that did not pass, why (text and output bounded).

    ``details``, ``stdout`` and ``stderr`` are kept for a failure or error (up to the report's
    ``max_detailed``), and ``location`` when it names a repository line; a skipped test has its reason in
    ``message``.
    """

    name: str
    classname: str
    suite: str
    outcome: Outcome
    time_s: float | None
    message: str = ""
    kind: str = ""
    details: str = ""
    stdout: str = ""
    stderr: str = ""
    location: Location | None = None

    @property
    def text_chars(self) -> int:
        """The characters of its names and text (not its suite's, which its suite's tests share), as the
        limits on what is kept count them."""
        texts = (self.name, self.classname, self.message, self.kind, self.details, self.stdout, self.stderr)
        return sum(map(len, texts)) + (len(self.location.path) if self.location else 0)

    @property
    def full_name(self) -> str:
        """``classname.name``, or the name alone when it already starts with the class (twister's)."""
        if not self.classname or self.name.startswith(self.classname):
            return self.name
        return f"{self.classname}.{self.name}"


@dataclass(frozen=True, slots=True)
class ResultsProblem:
    """What is wrong with a results file, or what of it was left out, and where."""

    file: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.file + "".join(f":{number}" for number in (self.line, self.column) if number is not None)
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class JUnitReport:
    """One results file: the tests kept (in file order), every test counted, and its problems."""

    file: str
    cases: tuple[CaseResult, ...]
    counts: Counts
    problems: tuple[ResultsProblem, ...] = ()

    @property
    def unlisted(self) -> int:
        """Tests counted but not kept (past ``max_cases``)."""
        return self.counts.total - len(self.cases)
