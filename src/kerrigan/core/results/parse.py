"""One JUnit XML file's bytes into frozen records of its tests, safely and within limits.

The dialects seen in practice share one shape: a ``<testsuites>`` root or a bare ``<testsuite>``, suites
nested in suites, ``<testcase classname name time [file line]>`` holding at most one of ``<failure>``,
``<error>`` or ``<skipped>`` (``message`` and ``type`` attributes, a traceback as text) and maybe
``<system-out>`` and ``<system-err>``. pytest, go-junit-report, Maven Surefire and Zephyr's twister write
it; Surefire's ``<flakyFailure>`` and ``<rerunFailure>`` (the runs before a rerun) are not outcomes and are
left out. Attributes a runner does not write are simply absent; a bad ``time`` is ``None``.

Safety: the bytes go through expat with defusedxml's refusals (a DTD, an entity declaration, an external
reference), so a "billion laughs" or an XXE file is a problem naming its line, never an expansion or a read.
:class:`JUnitParser` takes the bytes as they arrive (the server feeds it the request's body piece by piece)
and keeps only the tests, never a tree, so that memory is bounded by the limits below and not by the file:

- a file over ``max_bytes`` is read up to the limit only (an XML file cut anywhere cannot be parsed whole,
  but every test complete before the cut is kept, and a notice says so);
- reading stops, keeping the tests before, with a problem naming the line: at elements nested more than
  ``max_depth`` deep, an element with more than ``max_attributes`` attributes, more than
  ``max_names`` different element and attribute names (expat keeps each name it meets for the whole parse),
  more than ``max_elements`` elements, or one tag, comment or processing instruction over
  ``max_token_bytes`` (expat holds a token whole before it hands it over; text is handed over as it comes);
- at most ``max_cases`` tests are kept per file, and at most ``max_kept_chars`` characters of their names
  and text; passed tests stop being listed at three quarters of it, so a failure late in a big file still
  is (the rest are counted, and a problem says so);
- the text and output of at most ``max_detailed`` failures and errors are kept, each cut in the middle to
  a bound (a skipped test keeps its reason only, so that skips never use up what failures need).

Malformed XML is a problem naming the file, line and column; the tests before the error are kept. Nothing
here raises on bad input.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final, NoReturn
from xml.parsers import expat

from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden

from kerrigan.core.job_files import RESULTS_MAX_BYTES
from kerrigan.core.masking import MIN_SECRET_BYTES, Masker, OutputMasker
from kerrigan.core.results.locations import Locator, locate
from kerrigan.core.results.records import CaseResult, Counts, JUnitReport, Outcome, ResultsProblem

KIB: Final = 1 << 10
MIB: Final = 1 << 20
MAX_SUITE_DEPTH: Final = 4  # suite names kept in a test's path; deeper suites add nothing readable
_DATA_TAGS: Final = frozenset({"testsuites", "testsuite"})
# Messages that only repeat the outcome (go-junit-report's "Failed", twister's "failed"): the text says more.
_EMPTY_MESSAGES: Final = frozenset({"", "failed", "failure", "error", "skipped"})
_FAILURE_WORDS: Final = re.compile(r"assert|fail|error|panic|fatal", re.IGNORECASE)
_SECONDS: Final = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d{1,3})?|\.\d+")
_POSITION: Final = re.compile(r": line \d+, column \d+$")
_PIECE_BYTES: Final = 64 * KIB  # fed to expat at a time: a token too long is found within this of its limit
_PASSED_SHARE: Final = 0.75  # of max_kept_chars, what passed tests may use


_OUTCOME_TAGS: Final = {"failure": Outcome.FAILED, "error": Outcome.ERROR, "skipped": Outcome.SKIPPED}
# A test with several outcome elements is as bad as its worst one.
_RANK: Final = {Outcome.PASSED: 0, Outcome.SKIPPED: 1, Outcome.FAILED: 2, Outcome.ERROR: 3}


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """How much of one results file is read and kept."""

    max_bytes: int = 16 * MIB
    max_cases: int = 100_000
    max_detailed: int = 1_000
    max_text_chars: int = 16 * KIB  # a failure's text (the traceback)
    max_output_chars: int = 4 * KIB  # each of system-out and system-err
    max_field_chars: int = 1_000  # a name, class, suite or message
    max_kept_chars: int = 4_000_000  # every kept test's names and text together (a suite's name once)
    max_depth: int = 10_000  # elements inside elements (each open one costs expat and the reader a little)
    max_attributes: int = 256  # of one element
    max_names: int = 10_000  # different element and attribute names
    max_elements: int = 1_000_000
    max_token_bytes: int = 1 * MIB  # one tag (its attributes), comment or processing instruction

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 1:
                raise ValueError(f"ParseLimits.{name} must be at least 1, not {getattr(self, name)}")


# What of one uploaded results file the server reads and keeps: its first 16 MiB; 50,000 tests and 2,000,000
# characters of their names and text (a character the JSON the store keeps escapes takes up to 12 bytes
# there); the text of 200 failures.
UPLOAD_LIMITS: Final = ParseLimits(
    max_bytes=RESULTS_MAX_BYTES, max_cases=50_000, max_detailed=200, max_kept_chars=2_000_000
)


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


class _MaskedText(_Text):
    """Text kept as :class:`_Text` keeps it, the job's secrets hidden before any of it is cut: a secret the
    file wrote in pieces (character references, CDATA sections, comments between its halves) is whole
    here, as expat hands the text over, and is hidden whole."""

    __slots__ = ("decoder", "stream")

    def __init__(self, limit: int, masker: Masker) -> None:
        super().__init__(limit)
        self.stream = OutputMasker(masker)
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def add(self, chunk: str) -> None:
        super().add(self.decoder.decode(self.stream.feed(chunk.encode())))

    def text(self) -> str:
        super().add(self.decoder.decode(self.stream.flush(), final=True))
        return super().text()


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


class _Stop(Exception):  # noqa: N818 -- not an error: the reader has read all it may
    """A limit was reached: reading ends here with this problem (the tests before it are kept)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line, self.column = line, column


class _Reader:
    """Keeps each test as its ``</testcase>`` arrives, and stops the parse at a limit."""

    def __init__(
        self,
        file: str,
        limits: ParseLimits,
        locator: Locator,
        position: Callable[[], tuple[int, int]],
        masker: Masker | None = None,
    ) -> None:
        self.file = file
        self.limits = limits
        self.locator = locator
        self.position = position  # the line and column (from 1) of the event being handled
        self.masker = masker  # the job's secrets, hidden in every string kept before it is cut
        self.events = 0  # what expat handed over so far: while it grows, no token is held back long
        self.cases: list[CaseResult] = []
        self.counts = dict.fromkeys(Outcome, 0)
        self.time_s = 0.0
        self.detailed = 0
        self.depth = 0
        self.elements = 0
        self.names: set[int] = set()
        self.kept_chars = 0
        self.passed_full = False  # passed tests are no longer listed (their share of max_kept_chars is used)
        self.full = False  # no more tests are listed (max_cases or max_kept_chars)
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

    def start(self, tag: str, attributes: list[str]) -> None:
        """expat's start of an element; ``attributes`` its names and values in turn."""
        self.events += 1
        limits = self.limits
        self.depth += 1
        self.elements += 1
        if self.depth > limits.max_depth:
            self.stop(f"elements are nested more than {limits.max_depth:,} deep")
        if len(attributes) > 2 * limits.max_attributes:
            self.stop(f"<{_shown(tag)}> has more than {limits.max_attributes:,} attributes")
        if self.elements > limits.max_elements:
            self.stop(f"more than {limits.max_elements:,} elements")
        keys = attributes[::2]
        names = self.names  # their hashes: expat keeps the names themselves, no need to twice
        names.add(hash(tag))
        names.update(map(hash, keys))
        if len(names) > limits.max_names:
            self.stop(f"more than {limits.max_names:,} different element and attribute names")
        attrib = dict(zip(keys, attributes[1::2], strict=True))
        tag = tag.rpartition("}")[2]  # a namespace, if a runner declared one, changes nothing
        if self.depth == 1 and tag not in _DATA_TAGS:
            self.foreign = tag
        if self.foreign is not None:
            return
        if not self.case_depth:
            if tag == "testsuite":
                self._open_suite(self.hide(attrib.get("name", "")))
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
                message = attrib.get("message")
                self.outcome_message = None if message is None else self.hide(message)
                self.kind = self.hide(attrib.get("type", ""))[: self.limits.max_field_chars]
                self.details = self.collecting = self._text(self.limits.max_text_chars)
        elif tag == "system-out":
            self.stdout = self.collecting = self.stdout or self._text(self.limits.max_output_chars)
        elif tag == "system-err":
            self.stderr = self.collecting = self.stderr or self._text(self.limits.max_output_chars)

    def hide(self, text: str) -> str:
        """``text`` with the job's secrets masked (as it is, without a masker)."""
        if self.masker is None:
            return text
        return self.masker.mask_all(text.encode()).decode()

    def _text(self, limit: int) -> _Text:
        return _Text(limit) if self.masker is None else _MaskedText(limit, self.masker)

    def _open_suite(self, name: str) -> None:
        path, names = ("", 0) if not self.suites else self.suites[-1][1:]
        name = name.strip()[: self.limits.max_field_chars]
        if name and names < MAX_SUITE_DEPTH:
            path, names = (f"{path} / {name}" if path else name), names + 1
            self.kept_chars += len(path)  # once for the suite, however many of its tests are kept
        self.suites.append((self.depth, path, names))

    def data(self, text: str) -> None:
        """expat's text, in pieces."""
        self.events += 1
        if self.collecting is not None:
            self.collecting.add(text)

    def stop(self, reason: str) -> NoReturn:
        """End the parse here, at a limit."""
        raise _Stop(f"not read past here: {reason}", *self.position())

    def end(self, tag: str) -> None:
        """expat's end of an element."""
        self.events += 1
        if self.case_depth:
            if self.depth == self.case_depth + 1:
                self.collecting = None
            elif self.depth == self.case_depth:
                self._close_case()
        elif self.suites and self.suites[-1][0] == self.depth:
            self.suites.pop()
        self.depth -= 1

    def _close_case(self) -> None:
        attrib, outcome, limits = self.attrib, self.outcome, self.limits
        self.case_depth = 0
        self.counts[outcome] += 1
        time_s = seconds_of(attrib.get("time"))
        self.time_s += time_s or 0.0
        if self.full or (outcome is Outcome.PASSED and self.passed_full):
            self._reset()
            return
        if len(self.cases) >= limits.max_cases:
            self.full = True
            self._reset()
            return
        name = self.hide(attrib.get("name", "")).strip()[: limits.max_field_chars] or "(no name)"
        classname = self.hide(attrib.get("classname", "")).strip()[: limits.max_field_chars]
        suite = self.suites[-1][1] if self.suites else ""
        if outcome is Outcome.PASSED:
            self._keep(CaseResult(name, classname, suite, outcome, time_s))
            return
        details = self.details.text() if self.details else ""
        message = _message(self.outcome_message, details, limits.max_field_chars)
        if outcome is Outcome.SKIPPED or self.detailed >= limits.max_detailed:
            self._keep(CaseResult(name, classname, suite, outcome, time_s, message, self.kind))
            return
        self.detailed += 1
        location = locate(
            self.locator,
            f"{message}\n{details}",
            file=self.hide(attrib.get("file", "")),
            line=_line_number(attrib.get("line")),
            hint=classname,
        )
        self._keep(
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

    def _keep(self, case: CaseResult) -> None:
        """List the test, unless its names and text would take the file past ``max_kept_chars``."""
        self._reset()
        size = case.text_chars
        limit = self.limits.max_kept_chars
        if self.kept_chars + size > limit:
            self.full = True
            return
        self.kept_chars += size
        self.cases.append(case)
        if self.kept_chars > limit * _PASSED_SHARE:
            self.passed_full = True

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
            unlisted = counts.total - len(self.cases)
            if self.kept_chars > self.limits.max_kept_chars * _PASSED_SHARE:
                words = (
                    f"{unlisted:,} tests are counted but not listed: the names and text kept of one file "
                    f"stop at {self.limits.max_kept_chars:,} characters (failures first)"
                )
            else:
                words = f"{unlisted:,} tests past the first {len(self.cases):,} are counted but not listed"
            problems.append(ResultsProblem(self.file, words))
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


_LINE_ENDS: Final = re.compile(r"\r\n?")
_ATTRIBUTE_SPACE: Final = re.compile(r"[\t\n]")


def results_masker(secrets: Mapping[str, str]) -> Masker | None:
    """The masker of a job's secrets (name to value) for what its results files say once parsed: each value,
    and the forms XML gives a value written into a file as it is, its line ends read as line feeds (in text)
    and then as spaces (in an attribute). None when there is nothing to hide."""
    forms = dict(secrets)  # a value too short to mask is refused (SecretRefusedError), as ever
    for name, value in secrets.items():
        text = _LINE_ENDS.sub("\n", value)
        for index, form in enumerate((text, _ATTRIBUTE_SPACE.sub(" ", text))):
            if form != value and len(form.encode()) >= MIN_SECRET_BYTES:  # a shorter one: its lines are
                forms[f"{name}\0{index}"] = form
    return Masker.for_secrets(forms) if forms else None


def _size(count: int) -> str:
    return f"{count / MIB:.1f} MiB" if count >= MIB else f"{count:,} bytes"


def _shown(name: str) -> str:
    """An element's name in a problem: without its namespace, and not too long to read."""
    name = name.rpartition("}")[2]
    return name if len(name) <= 40 else name[:40] + "…"


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


def _forbid_doctype(name: str, sysid: str | None, pubid: str | None, internal: bool) -> NoReturn:
    raise DTDForbidden(name, sysid, pubid)


def _forbid_entity(name: str, *details: object) -> NoReturn:
    raise EntitiesForbidden(name, None, None, None, None, None)


def _forbid_external(context: str, base: str | None, sysid: str | None, pubid: str | None) -> NoReturn:
    raise ExternalReferenceForbidden(context, base, sysid, pubid)


class JUnitParser:
    """One results file, parsed as its bytes arrive: :meth:`feed` them in order, then :meth:`report`.

    Never raises on bad input: what goes wrong is a problem of the report, and the bytes after it are
    ignored. Not safe to share between threads at once (one may feed it, then another).
    """

    def __init__(
        self,
        file: str,
        *,
        limits: ParseLimits | None = None,
        locator: Locator | None = None,
        masker: Masker | None = None,
    ) -> None:
        """``masker``: the job's secrets, hidden in every name, message and text kept, and in the
        problems, as they stand once parsed (character references resolved, CDATA sections and comments
        gone); ``file`` is the caller's to mask."""
        self.file = file
        self.masker = masker
        self.limits = limits or ParseLimits()
        # No interning: expat's own table of names is bounded by max_names; a dict of them need not be.
        self._expat = expat.ParserCreate(None, "}", intern=None)
        parser = self._expat
        self._reader = _Reader(
            file,
            self.limits,
            locator or Locator(),
            lambda: (parser.CurrentLineNumber, parser.CurrentColumnNumber + 1),
            masker,
        )
        parser.buffer_text = True
        parser.buffer_size = _PIECE_BYTES
        parser.ordered_attributes = True
        parser.StartElementHandler = self._reader.start
        parser.EndElementHandler = self._reader.end
        parser.CharacterDataHandler = self._reader.data
        parser.StartDoctypeDeclHandler = _forbid_doctype
        parser.EntityDeclHandler = _forbid_entity
        parser.UnparsedEntityDeclHandler = _forbid_entity
        parser.ExternalEntityRefHandler = _forbid_external
        self._fed = 0
        self._quiet_since = 0  # where the pieces fed without an event begin
        self._events = 0
        self._problems: list[ResultsProblem] = []
        self._stopped = False

    def feed(self, data: bytes) -> None:
        """The file's next bytes; past ``max_bytes`` or after a problem that ends reading, ignored."""
        room = self.limits.max_bytes - self._fed
        view = memoryview(data)[: max(room, 0)]
        for start in range(0, len(view), _PIECE_BYTES):
            if self._stopped:
                return
            piece = view[start : start + _PIECE_BYTES]
            self._parse(piece, final=False)
            if self._reader.events != self._events:  # a token left unfinished began in this piece at most
                self._events, self._quiet_since = self._reader.events, self._fed
            self._fed += len(piece)
            if not self._stopped and self._fed - self._quiet_since > self.limits.max_token_bytes:
                self._problem(
                    "not read past here: a tag, comment or processing instruction runs past "
                    f"{_size(self.limits.max_token_bytes)}",
                    self._expat.CurrentLineNumber,
                    self._expat.CurrentColumnNumber + 1,
                )

    def report(self, size: int | None = None) -> JUnitReport:
        """The tests read, once every byte was fed; ``size``: the whole file's, when only its first bytes
        were (a file over ``max_bytes`` is said to be cut)."""
        limits = self.limits
        size = max(size or 0, self._fed)
        cut = size > limits.max_bytes
        if not self._stopped:
            self._parse(b"", final=True, quiet_end=cut)
            self._release()
        problems = list(self._problems)
        if cut:
            problems.insert(
                0,
                ResultsProblem(
                    self.file,
                    f"cut: {_size(size)}, over the limit of {_size(limits.max_bytes)}; only its first "
                    f"{_size(limits.max_bytes)} were read, and only the tests complete in them are counted",
                ),
            )
        report = self._reader.report(problems)
        if self.masker is None:
            return report
        # A DOCTYPE's or a root's name is the file's own words too.
        hide = self._reader.hide
        return replace(report, problems=tuple(replace(p, message=hide(p.message)) for p in report.problems))

    def _parse(self, data: bytes | memoryview, *, final: bool, quiet_end: bool = False) -> None:
        parser, reader = self._expat, self._reader
        try:
            parser.Parse(data, final)
        except expat.ExpatError as error:
            if not quiet_end:  # a cut file ends before its root does: the cut's notice says so
                reason = _POSITION.sub("", str(error))
                listed = f"; tests listed before it: {len(reader.cases):,}" if reader.cases else ""
                self._problem(f"malformed XML: {reason}{listed}", error.lineno, error.offset + 1)
            self._stopped = True
        except _Stop as stop:
            listed = f"; tests listed before it: {len(reader.cases):,}" if reader.cases else ""
            self._problem(f"{stop}{listed}", stop.line, stop.column)
        except (ValueError, LookupError) as error:  # defusedxml's refusals are ValueErrors
            self._problem(_refusal(error), parser.CurrentLineNumber, parser.CurrentColumnNumber + 1)

    def _problem(self, message: str, line: int, column: int) -> None:
        self._problems.append(ResultsProblem(self.file, message, line, column))
        self._stopped = True
        self._release()

    def _release(self) -> None:
        """Let expat go of the reader: the handlers made a cycle (expat, the reader, its position), which
        would keep every test read until the collector's next full pass, long after the report is made."""
        parser = self._expat
        parser.StartElementHandler = parser.EndElementHandler = parser.CharacterDataHandler = None


def parse_junit(
    data: bytes,
    file: str,
    *,
    limits: ParseLimits | None = None,
    locator: Locator | None = None,
    size: int | None = None,
    masker: Masker | None = None,
) -> JUnitReport:
    """The tests of one JUnit XML file; never raises on bad input (its problems are in the report).

    ``file`` names it in problems; ``size`` is its whole size when the caller read only the first
    ``max_bytes + 1`` bytes of it; ``locator`` makes the places failures name repository-relative;
    ``masker`` hides the job's secrets (:class:`JUnitParser`).
    """
    parser = JUnitParser(file, limits=limits, locator=locator, masker=masker)
    parser.feed(data)
    return parser.report(size=max(size or 0, len(data)))
