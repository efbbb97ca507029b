"""One JUnit XML file's bytes into frozen records of its tests, safely and within limits.

The dialects seen in practice share one shape: a ``<testsuites>`` root or a bare ``<testsuite>``, suites
nested in suites, ``<testcase classname name time [file line]>`` holding at most one of ``<failure>``,
``<error>`` or ``<skipped>`` (``message`` and ``type`` attributes, a traceback as text) and maybe
``<system-out>`` and ``<system-err>``. pytest, go-junit-report, Maven Surefire and Zephyr's twister write
it; Surefire's ``<flakyFailure>`` and ``<rerunFailure>`` (the runs before a rerun) are not outcomes and are
left out. Attributes a runner does not write are simply absent; a bad ``time`` is ``None``.

Safety: the bytes go through defusedxml's parser with DTDs, entity declarations and external references
refused, so a "billion laughs" or an XXE file is a problem naming its line, never an expansion or a read.
Elements are handed to a streaming target as the parser meets them and no tree is built, so memory is that
of the tests kept. Bounds: a file over ``max_bytes`` is read up to the limit only (an XML file cut anywhere
cannot be parsed whole, but every test complete before the cut is kept, and a notice says so); at most
``max_cases`` tests are kept per file (the rest are counted); the text and output of at most
``max_detailed`` failures and errors are kept, each cut in the middle to a bound (a skipped test keeps its
reason only, so that skips never use up what failures need). Malformed XML is a
problem naming the file, line and column; the tests before the error are kept. Nothing here raises on bad
input.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Final
from xml.etree.ElementTree import ParseError

from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

from kerrigan.core.results.locations import Location, Locator, locate

KIB: Final = 1 << 10
MIB: Final = 1 << 20
MAX_SUITE_DEPTH: Final = 4  # suite names kept in a test's path; deeper suites add nothing readable
_DATA_TAGS: Final = frozenset({"testsuites", "testsuite"})
# Messages that only repeat the outcome (go-junit-report's "Failed", twister's "failed"): the text says more.
_EMPTY_MESSAGES: Final = frozenset({"", "failed", "failure", "error", "skipped"})
_FAILURE_WORDS: Final = re.compile(r"assert|fail|error|panic|fatal", re.IGNORECASE)
_SECONDS: Final = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d{1,3})?|\.\d+")
_POSITION: Final = re.compile(r": line \d+, column \d+$")


class Outcome(enum.StrEnum):
    """How a test ended."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


_OUTCOME_TAGS: Final = {"failure": Outcome.FAILED, "error": Outcome.ERROR, "skipped": Outcome.SKIPPED}
# A test with several outcome elements is as bad as its worst one.
_RANK: Final = {Outcome.PASSED: 0, Outcome.SKIPPED: 1, Outcome.FAILED: 2, Outcome.ERROR: 3}


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


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """How much of one results file is read and kept."""

    max_bytes: int = 16 * MIB
    max_cases: int = 100_000
    max_detailed: int = 1_000
    max_text_chars: int = 16 * KIB  # a failure's text (the traceback)
    max_output_chars: int = 4 * KIB  # each of system-out and system-err
    max_field_chars: int = 1_000  # a name, class, suite or message

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 1:
                raise ValueError(f"ParseLimits.{name} must be at least 1, not {getattr(self, name)}")


class _Text:
    """Text kept within ``limit`` characters: its start and its end (where tracebacks say what failed)."""

    __slots__ = ("head", "head_room", "seen", "tail", "tail_room", "tail_size")

    def __init__(self, limit: int) -> None:
        self.head: list[str] = []
        self.head_room = limit - limit // 4
        self.tail: list[str] = []
        self.tail_room = limit // 4
        self.tail_size = 0
        self.seen = 0

    def add(self, chunk: str) -> None:
        self.seen += len(chunk)
        if self.head_room:
            piece = chunk[: self.head_room]
            self.head.append(piece)
            self.head_room -= len(piece)
            chunk = chunk[len(piece) :]
        if chunk and self.tail_room:
            self.tail.append(chunk)
            self.tail_size += len(chunk)
            if self.tail_size > 2 * self.tail_room:  # trimmed now and then, so adding stays linear
                kept = "".join(self.tail)[-self.tail_room :]
                self.tail, self.tail_size = [kept], len(kept)

    def text(self) -> str:
        head = "".join(self.head)
        tail = "".join(self.tail)[-self.tail_room :] if self.tail_room else ""
        cut = self.seen - len(head) - len(tail)
        return f"{head}\n[... {cut:,} characters cut ...]\n{tail}" if cut > 0 else head + tail


def seconds_of(value: str | None) -> float | None:
    """A ``time`` attribute in seconds; ``None`` when missing or not a number (Surefire once wrote
    ``1,234.5``: thousands are read, a decimal comma is not)."""
    if value is None or not _SECONDS.fullmatch(value := value.strip()):
        return None
    seconds = float(value.replace(",", ""))
    return seconds if math.isfinite(seconds) else None


def _line_number(value: str | None) -> int | None:
    if value is None or not (value := value.strip()).isdecimal() or len(value) > 9:
        return None
    return int(value) or None


def _message(message: str | None, details: str, limit: int) -> str:
    """The ``message`` attribute; when it says nothing the outcome does not, the text's first line that
    mentions a failure (twister's ``Assertion failed at ...``), else its first line."""
    message = (message or "").strip()
    if message.casefold() in _EMPTY_MESSAGES:
        lines = [line.strip() for line in details.splitlines() if line.strip()]
        message = next((line for line in lines if _FAILURE_WORDS.search(line)), lines[0] if lines else "")
    return message[:limit]


class _Reader:
    """The parser's target: keeps each test as its ``</testcase>`` arrives."""

    def __init__(self, file: str, limits: ParseLimits, locator: Locator) -> None:
        self.file = file
        self.limits = limits
        self.locator = locator
        self.cases: list[CaseResult] = []
        self.counts = dict.fromkeys(Outcome, 0)
        self.time_s = 0.0
        self.detailed = 0
        self.depth = 0
        self.foreign: str | None = None  # the root's name, when it is not JUnit's
        self.suites: list[tuple[int, str, int]] = []  # (depth, path, names in it) of each open suite
        self.case_depth = 0  # of the open <testcase>; 0 when none is open
        self._reset()

    def _reset(self) -> None:
        self.attrib: dict[str, str] = {}
        self.outcome = Outcome.PASSED
        self.outcome_message: str | None = None
        self.kind = ""
        self.details: _Text | None = None
        self.stdout: _Text | None = None
        self.stderr: _Text | None = None
        self.collecting: _Text | None = None

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        tag = tag.rpartition("}")[2]  # a namespace, if a runner declared one, changes nothing
        self.depth += 1
        if self.depth == 1 and tag not in _DATA_TAGS:
            self.foreign = tag
        if self.foreign is not None:
            return
        if not self.case_depth:
            if tag == "testsuite":
                self._open_suite(attrib.get("name", ""))
            elif tag == "testcase":
                self.case_depth = self.depth
                self.attrib = attrib
            return
        if self.depth != self.case_depth + 1:
            return
        self.collecting = None
        if tag in _OUTCOME_TAGS:
            outcome = _OUTCOME_TAGS[tag]
            if _RANK[outcome] > _RANK[self.outcome]:  # the worst outcome's message and text are kept
                self.outcome = outcome
                self.outcome_message = attrib.get("message")
                self.kind = attrib.get("type", "")[: self.limits.max_field_chars]
                self.details = self.collecting = _Text(self.limits.max_text_chars)
        elif tag == "system-out":
            self.stdout = self.collecting = self.stdout or _Text(self.limits.max_output_chars)
        elif tag == "system-err":
            self.stderr = self.collecting = self.stderr or _Text(self.limits.max_output_chars)

    def _open_suite(self, name: str) -> None:
        path, names = ("", 0) if not self.suites else self.suites[-1][1:]
        name = name.strip()[: self.limits.max_field_chars]
        if name and names < MAX_SUITE_DEPTH:
            path, names = (f"{path} / {name}" if path else name), names + 1
        self.suites.append((self.depth, path, names))

    def data(self, text: str) -> None:
        if self.collecting is not None:
            self.collecting.add(text)

    def end(self, tag: str) -> None:
        if self.case_depth:
            if self.depth == self.case_depth + 1:
                self.collecting = None
            elif self.depth == self.case_depth:
                self._close_case()
        elif self.suites and self.suites[-1][0] == self.depth:
            self.suites.pop()
        self.depth -= 1

    def close(self) -> None:
        """Nothing to hand back: the reader keeps what it read."""

    def _close_case(self) -> None:
        attrib, outcome, limits = self.attrib, self.outcome, self.limits
        self.case_depth = 0
        self.counts[outcome] += 1
        time_s = seconds_of(attrib.get("time"))
        self.time_s += time_s or 0.0
        if len(self.cases) >= limits.max_cases:
            self._reset()
            return
        name = attrib.get("name", "").strip()[: limits.max_field_chars] or "(no name)"
        classname = attrib.get("classname", "").strip()[: limits.max_field_chars]
        suite = self.suites[-1][1] if self.suites else ""
        if outcome is Outcome.PASSED:
            self.cases.append(CaseResult(name, classname, suite, outcome, time_s))
            self._reset()
            return
        details = self.details.text() if self.details else ""
        message = _message(self.outcome_message, details, limits.max_field_chars)
        if outcome is Outcome.SKIPPED or self.detailed >= limits.max_detailed:
            self.cases.append(CaseResult(name, classname, suite, outcome, time_s, message, self.kind))
            self._reset()
            return
        self.detailed += 1
        location = locate(
            self.locator,
            f"{message}\n{details}",
            file=attrib.get("file", ""),
            line=_line_number(attrib.get("line")),
            hint=classname,
        )
        self.cases.append(
            CaseResult(
                name,
                classname,
                suite,
                outcome,
                time_s,
                message,
                self.kind,
                details,
                self.stdout.text() if self.stdout else "",
                self.stderr.text() if self.stderr else "",
                location,
            )
        )
        self._reset()

    def report(self, problems: list[ResultsProblem]) -> JUnitReport:
        counts = Counts(
            self.counts[Outcome.PASSED],
            self.counts[Outcome.FAILED],
            self.counts[Outcome.ERROR],
            self.counts[Outcome.SKIPPED],
            self.time_s,
        )
        if self.foreign is not None:
            problems.append(
                ResultsProblem(
                    self.file,
                    f"not JUnit XML: the root is <{self.foreign}>, not <testsuites> or <testsuite>",
                    1,
                )
            )
        if counts.total > len(self.cases):
            problems.append(
                ResultsProblem(
                    self.file,
                    f"{counts.total - len(self.cases):,} tests past the first {len(self.cases):,} "
                    "are counted but not listed",
                )
            )
        failures = counts.failed + counts.errors
        if failures > self.detailed and self.detailed >= self.limits.max_detailed:
            problems.append(
                ResultsProblem(
                    self.file,
                    f"failure text, output and lines kept for the first {self.detailed:,} of the "
                    f"{failures:,} failures and errors",
                )
            )
        return JUnitReport(self.file, tuple(self.cases), counts, tuple(problems))


def _size(count: int) -> str:
    return f"{count / MIB:.1f} MiB" if count >= MIB else f"{count:,} bytes"


def _refusal(error: Exception) -> str:
    if isinstance(error, DTDForbidden):
        return (
            f"a DOCTYPE (<!DOCTYPE {error.name}>) is refused: JUnit needs none, and one can declare "
            "entities that expand without bound or read files"
        )
    if isinstance(error, EntitiesForbidden):
        return f"an entity declaration ({error.name}) is refused"
    if isinstance(error, ExternalReferenceForbidden):
        return "an external reference is refused"
    if isinstance(error, LookupError):
        return f"the file declares an encoding Python does not know ({error})"
    return f"cannot be read as XML ({error})"


def parse_junit(
    data: bytes,
    file: str,
    *,
    limits: ParseLimits | None = None,
    locator: Locator | None = None,
    size: int | None = None,
) -> JUnitReport:
    """The tests of one JUnit XML file; never raises on bad input (its problems are in the report).

    ``file`` names it in problems; ``size`` is its whole size when the caller read only the first
    ``max_bytes + 1`` bytes of it; ``locator`` makes the places failures name repository-relative.
    """
    limits = limits or ParseLimits()
    reader = _Reader(file, limits, locator or Locator())
    problems: list[ResultsProblem] = []
    size = max(size or 0, len(data))
    cut = size > limits.max_bytes
    parser = DefusedXMLParser(target=reader, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    try:
        parser.feed(data[: limits.max_bytes])
    except ParseError as error:
        line, column = error.position
        reason = _POSITION.sub("", str(error))
        listed = f"; tests listed before it: {len(reader.cases):,}" if reader.cases else ""
        problems.append(ResultsProblem(file, f"malformed XML: {reason}{listed}", line, column + 1))
        return reader.report(problems)
    except (ValueError, LookupError) as error:  # defusedxml's refusals are ValueErrors
        expat = parser.parser
        line, column = expat.CurrentLineNumber, expat.CurrentColumnNumber + 1
        problems.append(ResultsProblem(file, _refusal(error), line, column))
        return reader.report(problems)
    try:
        parser.close()
    except ParseError as error:
        if not cut:  # the document ended before its root did
            line, column = error.position
            reason = _POSITION.sub("", str(error))
            problems.append(ResultsProblem(file, f"malformed XML: {reason}", line, column + 1))
    if cut:
        problems.insert(
            0,
            ResultsProblem(
                file,
                f"cut: {_size(size)}, over the limit of {_size(limits.max_bytes)}; only its first "
                f"{_size(limits.max_bytes)} were read, and only the tests complete in them are counted",
            ),
        )
    return reader.report(problems)
